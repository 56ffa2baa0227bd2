"""``log.pruned`` unlinks what stays of the removed runs in a few statements (ADR 0103, 0107).

The recorded commands and cleared terminal views of the removed runs stay,
no longer naming them.  No index serves ``host_commands.run_id``, so the
unlink binds the removed ids in chunks: one scan of the table per chunk,
not one per run (a prune of thousands of runs held the shared log's lock
for seconds).  These tests fold the event's statements into the tables
alone and check every row, across chunk edges.
"""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from pwf.events import Actor, LogPruned, seal
from pwf.projections import host_commands, sessions
from pwf.projections._sql import CHUNK, for_each_chunk


def _pruned(removed: tuple[str, ...]) -> list[tuple[str, tuple[object, ...]]]:
    event = LogPruned(
        cutoff=1,
        removed_run_ids=removed,
        removed_events=len(removed),
        backup_path="/backups/before-prune.db",
        backup_sha256="0" * 64,
        backup_seq=9,
        backup_hash="1" * 64,
    )
    entry = seal(
        event,
        seq=10,
        batch=10,
        at=5,
        actor=Actor(type="host", id="host"),
        cause=None,
        event_id="evt-10",
        prev_hash="1" * 64,
    ).entry
    return [*host_commands.apply(entry), *sessions.apply(entry)]


def _tables(runs: int) -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    for ddl in (*host_commands.DDL, *sessions.DDL):
        connection.execute(ddl)
    fingerprint = hashlib.sha256(b"request").digest()
    connection.executemany(
        "INSERT INTO host_commands (request_id, client_id, operation, idempotency_key,"
        " request_fingerprint, run_id, outcome, created_at, completed_at)"
        " VALUES (?, 'c', 'run.status', ?, ?, ?, 'accepted', 1, 1)",
        [(f"req-{n}", f"key-{n}", fingerprint, f"run-{n}") for n in range(runs)],
    )
    connection.executemany(
        "INSERT INTO session_terminal_views (target_session_id, cleared_run_id, cleared_at)"
        " VALUES (?, ?, 1)",
        [(f"session-{n}", f"run-{n}") for n in range(runs)],
    )
    return connection


@pytest.mark.parametrize("removed", [1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 17])
def test_every_removed_run_is_unlinked_and_no_other(removed: int) -> None:
    runs = 2 * CHUNK + 40
    connection = _tables(runs)
    gone = tuple(f"run-{n}" for n in range(0, 2 * removed, 2) if n < runs)[:removed]
    statements = _pruned(gone)
    for sql, params in statements:
        connection.execute(sql, params)
    named = {row[0] for row in connection.execute("SELECT run_id FROM host_commands")}
    cleared = {
        row[0] for row in connection.execute("SELECT cleared_run_id FROM session_terminal_views")
    }
    kept = {f"run-{n}" for n in range(runs)} - set(gone)
    assert named == kept | ({None} if gone else set())
    assert cleared == named
    assert connection.execute("SELECT count(*) FROM host_commands").fetchone() == (runs,)
    chunks = -(-len(gone) // CHUNK)
    # one unlink a chunk in each table, and the sessions' turns and follow-ups deleted likewise
    assert len(statements) == 4 * chunks


def test_chunks_share_one_text_and_fill_the_last_with_its_last_value() -> None:
    values = tuple(f"v{n}" for n in range(CHUNK + 2))
    statements = for_each_chunk("DELETE FROM t WHERE id IN ({})", values)
    assert len({sql for sql, _ in statements}) == 1
    assert statements[0][1] == values[:CHUNK]
    assert statements[1][1] == (f"v{CHUNK}", f"v{CHUNK + 1}") + (f"v{CHUNK + 1}",) * (CHUNK - 2)
    assert for_each_chunk("DELETE FROM t WHERE id IN ({})", ()) == []
