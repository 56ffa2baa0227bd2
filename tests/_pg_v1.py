"""A shared log in format ``pwf.store.v1``, made by hand as pwf wrote it before ADR 0102.

This pwf no longer writes that format, so tests and the benchmark of
``pwf log migrate --store`` make one here: the one ``events`` table holding
each event's bytes whole with its five indexes, ``_pwf_recorded``,
``_pwf_meta`` (format ``pwf.store.v1``), ``_pwf_head`` and the Merkle tree,
filled from the ``events`` rows of a pwf SQLite file (either format: the
view of ``pwf.store.v2`` gives the same columns and bytes).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

import psycopg

from pwf.events import CommandRecorded, open_body
from pwf.store.postgres.reads import HEAD, head_of
from pwf.store.postgres.tree import build
from pwf.store.rows import COLUMNS, shared_row, shared_text

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

__all__ = ["V1_SCHEMA", "export_of", "load_v1", "rows_of"]

V1_SCHEMA: Final = (
    """CREATE TABLE events (
  seq BIGINT PRIMARY KEY CHECK (seq >= 1),
  batch BIGINT NOT NULL CHECK (batch >= 1),
  type TEXT NOT NULL,
  at BIGINT NOT NULL,
  run_id TEXT,
  session_id TEXT,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT,
  content_hash TEXT NOT NULL UNIQUE,
  prev_hash TEXT,
  body BYTEA NOT NULL
)""",
    "CREATE INDEX events_batch ON events (batch)",
    "CREATE INDEX events_type ON events (type, seq)",
    "CREATE INDEX events_run ON events (run_id, seq) WHERE run_id IS NOT NULL",
    "CREATE INDEX events_session ON events (session_id, seq) WHERE session_id IS NOT NULL",
    "CREATE INDEX events_request ON events (request_id, seq) WHERE request_id IS NOT NULL",
    """CREATE TABLE _pwf_recorded (
  request_id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  seq BIGINT NOT NULL,
  UNIQUE (client_id, idempotency_key)
)""",
    "CREATE TABLE _pwf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE _pwf_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq BIGINT NOT NULL,
  content_hash TEXT,
  batch BIGINT NOT NULL
)""",
)
"""The tables and indexes of a v1 shared log (but the tree's, which :func:`build` makes)."""


def rows_of(path: Path) -> Iterator[tuple[object, ...]]:
    """The ``events`` rows of the pwf SQLite file at ``path``, in seq order."""
    connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        for row in connection.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq"):  # noqa: S608
            yield (*row[:11], bytes(row[11]))
    finally:
        connection.close()


def load_v1(url: str, rows: Iterable[tuple[object, ...]]) -> None:
    """Make the empty database at ``url`` a v1 shared log of ``rows``."""
    with psycopg.connect(url, autocommit=True) as connection, connection.transaction():
        for statement in V1_SCHEMA:
            connection.execute(statement)
        last: tuple[object, ...] | None = None
        with (
            connection.cursor() as cursor,
            cursor.copy(f"COPY events ({COLUMNS}) FROM STDIN") as copy,
        ):
            recorded = []
            for row in rows:
                shared = shared_row(row)
                copy.write_row(shared)
                last = shared
                if row[2] == CommandRecorded.TAG:
                    body = row[11]
                    assert isinstance(body, bytes)
                    event = open_body(body).event
                    assert isinstance(event, CommandRecorded)
                    keys = (event.request_id, event.client_id, event.idempotency_key)
                    recorded.append((*map(shared_text, keys), row[0]))
        connection.cursor().executemany(
            "INSERT INTO _pwf_recorded (request_id, client_id, idempotency_key, seq)"
            " VALUES (%s, %s, %s, %s)",
            recorded,
        )
        head = (0, None, 0) if last is None else (last[0], last[9], last[1])
        connection.execute(
            "INSERT INTO _pwf_head (id, seq, content_hash, batch) VALUES (1, %s, %s, %s)", head
        )
        connection.execute(
            "INSERT INTO _pwf_meta (key, value)"
            " VALUES ('format', 'pwf.store.v1'), ('log_id', gen_random_uuid()::text)"
        )
        # The tree reads the first seq from v2's table (ADR 0106): a v1 log's is its events.
        connection.execute("CREATE TEMP VIEW _pwf_events AS SELECT seq FROM events")
        connection.execute("CREATE TEMP TABLE _pwf_pruned (seq BIGINT, leaf BYTEA, taken BIGINT)")
        build(connection, head_of(connection.execute(HEAD).fetchone()))
        connection.execute("DROP TABLE pg_temp._pwf_pruned")
        connection.execute("DROP VIEW pg_temp._pwf_events")


def export_of(url: str) -> bytes:
    """The log's export as ``pwf log export`` writes it: each body and a newline."""
    with psycopg.connect(url, autocommit=True) as connection:
        bodies = connection.execute("SELECT body FROM events ORDER BY seq").fetchall()
    return b"".join(bytes(body) + b"\n" for (body,) in bodies)
