"""The log's table as every backend writes it: its columns, indexes and format mark.

Imports nothing of pwf.  SQLite (:mod:`pwf.store.sqlite_schema`) and
PostgreSQL (:mod:`pwf.store.postgres.schema`) keep the same events table and
the same indexes; only the names of their integer and byte types differ, and
SQLite's tables are ``STRICT``.  A compaction's kept events
(:mod:`pwf.store.segment`) carry the same indexed columns.
"""

from __future__ import annotations

from typing import Final

__all__ = ["EVENTS_DDL", "EVENT_INDEXES", "FORMAT", "INDEXED_COLUMNS_DDL"]

FORMAT: Final = "pwf.store.v1"
"""The format row of every pwf log, in either backend."""

INDEXED_COLUMNS_DDL: Final = """  type TEXT NOT NULL,
  at {integer} NOT NULL,
  run_id TEXT,
  session_id TEXT,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT"""
"""The columns an event is looked up by, copied out of its body; ``{integer}`` is the backend's."""

EVENTS_DDL: Final = (
    """CREATE TABLE IF NOT EXISTS events (
  seq {integer} PRIMARY KEY CHECK (seq >= 1),
  batch {integer} NOT NULL CHECK (batch >= 1),
"""
    + INDEXED_COLUMNS_DDL
    + """,
  content_hash TEXT NOT NULL UNIQUE,
  prev_hash TEXT,
  body {blob} NOT NULL
){strict}"""
)
"""The events table; ``{integer}``, ``{blob}`` and ``{strict}`` are the backend's."""

EVENT_INDEXES: Final = (
    "CREATE INDEX IF NOT EXISTS events_batch ON events (batch)",
    "CREATE INDEX IF NOT EXISTS events_type ON events (type, seq)",
    "CREATE INDEX IF NOT EXISTS events_run ON events (run_id, seq) WHERE run_id IS NOT NULL",
    (
        "CREATE INDEX IF NOT EXISTS events_session ON events (session_id, seq)"
        " WHERE session_id IS NOT NULL"
    ),
    (
        "CREATE INDEX IF NOT EXISTS events_request ON events (request_id, seq)"
        " WHERE request_id IS NOT NULL"
    ),
)
"""The events table's indexes, the same text in both backends."""
