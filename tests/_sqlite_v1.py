"""A SQLite file in format ``pwf.store.v1``, made by hand as pwf wrote it before ADR 0102.

This pwf no longer writes that format, so the tests and the benchmark of
``pwf log migrate`` make one here from any pwf file: the same projections,
head, checkpoints and tree, and the log in one ``events`` table holding each
event's bytes whole, with v1's columns, its ``UNIQUE`` hash and its five
indexes (the ``events`` view of format v2 gives exactly those rows).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["V1_EVENTS", "make_v1"]

V1_EVENTS: Final = """CREATE TABLE events_v1 (
  seq INTEGER PRIMARY KEY CHECK (seq >= 1),
  batch INTEGER NOT NULL CHECK (batch >= 1),
  type TEXT NOT NULL,
  at INTEGER NOT NULL,
  run_id TEXT,
  session_id TEXT,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT,
  content_hash TEXT NOT NULL UNIQUE,
  prev_hash TEXT,
  body BLOB NOT NULL
) STRICT"""
_INDEXES: Final = (
    "CREATE INDEX events_batch ON events (batch)",
    "CREATE INDEX events_type ON events (type, seq)",
    "CREATE INDEX events_run ON events (run_id, seq) WHERE run_id IS NOT NULL",
    "CREATE INDEX events_session ON events (session_id, seq) WHERE session_id IS NOT NULL",
    "CREATE INDEX events_request ON events (request_id, seq) WHERE request_id IS NOT NULL",
)
_COLUMNS: Final = (
    "seq, batch, type, at, run_id, session_id, request_id, client_id, idempotency_key,"
    " content_hash, prev_hash, body"
)


def make_v1(source: Path, target: Path) -> None:
    """Write ``target``: the pwf file ``source`` (v1 or v2, not pruned) in format v1."""
    copy = sqlite3.connect(source)
    try:
        into = sqlite3.connect(target)
        try:
            copy.backup(into)
        finally:
            into.close()
    finally:
        copy.close()
    connection = sqlite3.connect(target, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = DELETE")
        found = connection.execute("SELECT type FROM sqlite_master WHERE name = 'events'")
        if found.fetchone() == ("table",):
            return  # already v1
        connection.execute("BEGIN")
        connection.execute(V1_EVENTS)
        connection.execute(
            f"INSERT INTO events_v1 ({_COLUMNS}) SELECT {_COLUMNS} FROM events ORDER BY seq"  # noqa: S608 - constants
        )
        for name in ("readable_events", "events"):
            connection.execute(f"DROP VIEW IF EXISTS {name}")
        for table in ("_pwf_events", "_pwf_batches", "_pwf_whole", "_pwf_pruned"):
            connection.execute(f"DROP TABLE IF EXISTS {table}")
        connection.execute("ALTER TABLE events_v1 RENAME TO events")
        for statement in _INDEXES:
            connection.execute(statement)
        connection.execute("UPDATE _pwf_meta SET value = 'pwf.store.v1' WHERE key = 'format'")
        connection.execute("COMMIT")
        connection.execute("VACUUM")
    finally:
        connection.close()
    target.chmod(0o600)
