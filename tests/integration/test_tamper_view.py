"""The tests' editable ``events`` view changes exactly what format v1's table did.

Every tamper test says what it damages as a statement on ``events``
(:mod:`tests._tamper`); its first bad seq is right only if the statement
changed that row and no other.  Each case here runs the same statements on
the view of a seven-event log (seqs 1 | 2 3 4 | 5 6 | 7) and on a plain
table of v1's columns holding the same rows, and the two must then hold
the same rows, byte for byte; in SQLite, and in PostgreSQL for the
statements the contract suite runs there.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Final

import pytest

from pwf.store.rows import COLUMNS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests._tamper import HASH_REFUSED, editable, pg_editable

    from pwf.events import Sealed
    from pwf.store.sqlite import SqliteStore

    AppendBatches = Callable[..., list[list[Sealed]]]
else:
    from _tamper import HASH_REFUSED, editable, pg_editable

SIZES: Final = (1, 3, 2, 1)
SELECT: Final = f"SELECT {COLUMNS} FROM events ORDER BY seq"  # noqa: S608 - constant
V1: Final = """CREATE TABLE events (
  seq INTEGER PRIMARY KEY, batch INTEGER NOT NULL, type TEXT NOT NULL, at INTEGER NOT NULL,
  run_id TEXT, session_id TEXT, request_id TEXT, client_id TEXT, idempotency_key TEXT,
  content_hash TEXT NOT NULL, prev_hash TEXT, body BLOB NOT NULL
) STRICT"""
"""Format v1's table, as its statements saw it."""
BODY: Final = "UPDATE events SET body = CAST(body || ' ' AS BLOB) WHERE seq "
"""A space after the bytes of the events the rest of the statement picks."""

Statement = tuple[str, tuple[object, ...]]


def _run(sql: str, *params: object) -> Statement:
    return sql, params


CASES: Final[dict[str, tuple[Statement, ...]]] = {
    "the body of a batch's first event": (_run(BODY + "= 2"),),
    "the body of a batch's middle event": (_run(BODY + "= 3"),),
    "the body of a batch's last event": (_run(BODY + "= 4"),),
    "every body from seq 3": (_run(BODY + ">= 3"),),
    "a body set to other bytes": (_run("UPDATE events SET body = ? WHERE seq = 4", b'{"x":1}'),),
    "a run_id": (_run("UPDATE events SET run_id = 'run-x' WHERE seq = 5"),),
    "a batch's at, on one event": (_run("UPDATE events SET at = 1 WHERE seq = 3"),),
    "a batch number and a cause": (
        _run("UPDATE events SET batch = 9, request_id = 'req-x', client_id = NULL WHERE seq = 6"),
    ),
    "a content hash": (_run("UPDATE events SET content_hash = ? WHERE seq = 3", "f" * 64),),
    "a prev hash": (_run("UPDATE events SET prev_hash = 'not a hash' WHERE seq = 4"),),
    "an event deleted": (_run("DELETE FROM events WHERE seq = 3"),),
    "the first event deleted": (_run("DELETE FROM events WHERE seq = 1"),),
    "a batch's first event deleted": (_run("DELETE FROM events WHERE seq = 5"),),
    "two events deleted": (_run("DELETE FROM events WHERE seq IN (2, 3)"),),
    "the tail deleted": (_run("DELETE FROM events WHERE seq >= 5"),),
    "every event deleted": (_run("DELETE FROM events"),),
    "two rows swapped": (
        _run("UPDATE events SET seq = 1000 WHERE seq = 3"),
        _run("UPDATE events SET seq = 3 WHERE seq = 4"),
        _run("UPDATE events SET seq = 4 WHERE seq = 1000"),
    ),
    "a row moved past the end": (_run("UPDATE events SET seq = 100 WHERE seq = 4"),),
    "a row copied past the end": (
        _run(
            "INSERT INTO events SELECT 8, batch, type, at, run_id, session_id, request_id,"
            " client_id, idempotency_key, content_hash, prev_hash, body FROM events WHERE seq = 7"
        ),
    ),
    "a deleted row put back changed": (
        _run("CREATE TEMP TABLE kept AS SELECT * FROM events WHERE seq = 3"),
        _run("DELETE FROM events WHERE seq = 3"),
        _run(
            "INSERT INTO events SELECT seq, batch, type, at, run_id, session_id, request_id,"
            " client_id, idempotency_key, content_hash, prev_hash, CAST(body || ' ' AS BLOB)"
            " FROM temp.kept"
        ),
    ),
    "a body edited twice": (
        _run(BODY + "= 3"),
        _run("UPDATE events SET body = CAST(body || ' ' AS BLOB), type = 'x' WHERE seq = 3"),
    ),
}
"""Statements as v1's tests ran them, in order, with their parameters."""
PG_CASES: Final = (
    "a body set to other bytes",
    "a run_id",
    "a content hash",
    "an event deleted",
    "the tail deleted",
    "two rows swapped",
    "a row copied past the end",
)
"""The cases PostgreSQL runs too: what the contract suite tampers with, and moves and inserts."""


@pytest.fixture
def log(store: SqliteStore, fill: AppendBatches) -> SqliteStore:
    """Seven events in four batches, ``events`` editable on the store's connection."""
    fill(store, SIZES)
    editable(store.connection)
    return store


def _as_v1(rows: list[tuple[Any, ...]], statements: tuple[Statement, ...]) -> list[tuple[Any, ...]]:
    """What v1's table holds after ``statements``, from ``rows``."""
    table = sqlite3.connect(":memory:")
    try:
        table.execute(V1)
        table.executemany(f"INSERT INTO events VALUES ({','.join('?' * 12)})", rows)  # noqa: S608
        for sql, params in statements:
            table.execute(sql, params)
        return [tuple(row) for row in table.execute(SELECT)]
    finally:
        table.close()


@pytest.mark.parametrize("case", list(CASES))
def test_the_view_takes_a_statement_as_v1_s_table(log: SqliteStore, case: str) -> None:
    """The view's rows after the statements are v1's table's after them."""
    connection = log.connection
    before = [tuple(row) for row in connection.execute(SELECT)]
    for sql, params in CASES[case]:
        connection.execute(sql, params)
    after = [tuple(row) for row in connection.execute(SELECT)]
    assert _as_v1(before, CASES[case]) == after
    assert after != before


def test_every_batch_row_left_is_an_event_s(log: SqliteStore) -> None:
    """Rows of ``_pwf_batches`` no event names are removed with the last event that named them."""
    for sql, params in CASES["two rows swapped"] + CASES["the tail deleted"]:
        log.connection.execute(sql, params)
    orphans = log.connection.execute(
        "SELECT seq FROM _pwf_batches WHERE seq NOT IN (SELECT head FROM _pwf_events)"
    ).fetchall()
    assert [] == orphans


def test_an_unchanged_event_keeps_its_parts(log: SqliteStore) -> None:
    """Only the edited event is kept whole; its batch's other events keep their stored parts."""
    log.connection.execute(*CASES["the body of a batch's middle event"][0])
    stored = log.connection.execute(
        "SELECT e.seq, e.data IS NULL, w.seq IS NOT NULL FROM _pwf_events e"
        " LEFT JOIN _pwf_whole w ON w.seq = e.seq ORDER BY e.seq"
    ).fetchall()
    assert [(seq, seq == 3, seq == 3) for seq in range(1, 8)] == stored


@pytest.mark.parametrize("digest", ["moving", "F" * 64, "f" * 63, "g" * 64])
def test_a_hash_v2_cannot_hold_is_refused_and_changes_nothing(
    log: SqliteStore, digest: str
) -> None:
    """A content hash that is not 64 lower-case hex digits fails the statement, with why."""
    before = log.connection.execute(SELECT).fetchall()
    with pytest.raises(sqlite3.IntegrityError, match=HASH_REFUSED):
        log.connection.execute("UPDATE events SET content_hash = ? WHERE seq = 3", (digest,))
    assert before == log.connection.execute(SELECT).fetchall()


def test_only_the_connection_made_editable_can_edit(log: SqliteStore) -> None:
    """The triggers are the connection's own: the file's schema and other connections lack them."""
    other = sqlite3.connect(log.path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="cannot modify events"):
            other.execute("DELETE FROM events WHERE seq = 7")
        kinds = other.execute("SELECT DISTINCT type FROM sqlite_master ORDER BY type").fetchall()
    finally:
        other.close()
    assert [("index",), ("table",), ("view",)] == kinds


def test_a_file_without_the_view_is_left_alone(tmp_path: Path) -> None:
    """A file whose ``events`` is a table (format v1's) is edited as it is."""
    connection = editable(sqlite3.connect(tmp_path / "v1.db"))
    try:
        connection.execute(V1)
        assert [] == connection.execute("SELECT name FROM sqlite_temp_master").fetchall()
    finally:
        connection.close()


@pytest.mark.parametrize("case", PG_CASES)
def test_postgresql_takes_a_statement_as_v1_s_table(
    pg_url: str, fill: AppendBatches, case: str
) -> None:
    """The same cases on the shared log's view, through one transaction's trigger."""
    import psycopg  # noqa: PLC0415 - optional extra

    from pwf.store.postgres import PostgresStore  # noqa: PLC0415 - optional extra

    with PostgresStore(pg_url, create=True) as store:
        fill(store, SIZES)
    with psycopg.connect(pg_url, autocommit=True) as pg:
        before = [tuple(row) for row in pg.execute(SELECT)]
        with pg_editable(pg):
            for sql, params in CASES[case]:
                pg.execute(sql.replace("?", "%s"), params)
        after = [tuple(row) for row in pg.execute(SELECT)]
        triggers = pg.execute("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal").fetchone()
    assert _as_v1(before, CASES[case]) == after
    assert (0,) == triggers
