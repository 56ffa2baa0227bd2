"""``node_attempts``: one row per attempt of a node (DOMAIN §5.3).

``deadline_at`` is carried by ``attempt.started``; only deadline events of
the timeout accounting move it later.
"""

from __future__ import annotations

from typing import Final

from pwf.events import AttemptChanged, AttemptStarted, DeadlineShifted, Entry
from pwf.projections._sql import Statement, dispatch, handlers, json_hash, on, pruned

NAME: Final = "node_attempts"
VERSION: Final = 1

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS node_attempts (
  attempt_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  node_id TEXT NOT NULL,
  attempt_number INTEGER NOT NULL CHECK (attempt_number > 0),
  status TEXT NOT NULL CHECK (status IN (
    'pending', 'running', 'waiting', 'interrupted', 'completed', 'failed', 'timed_out', 'cancelled'
  )),
  output_hash BLOB,
  started_at INTEGER,
  deadline_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (run_id, node_id, attempt_number)
) STRICT""",
    """CREATE UNIQUE INDEX IF NOT EXISTS node_attempts_active_idx ON node_attempts(run_id)
  WHERE status IN ('pending', 'running', 'waiting')""",
)


_STARTED: Final = (
    "INSERT INTO node_attempts (attempt_id, run_id, node_id, attempt_number,"
    " status, started_at, deadline_at, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)"
)
_SHIFTED: Final = (
    "UPDATE node_attempts SET deadline_at = ?, started_at = ?, updated_at = ? WHERE attempt_id = ?"
)
_CHANGED: Final = (
    "UPDATE node_attempts SET status = ?,"
    " output_hash = coalesce(?, output_hash), updated_at = ? WHERE attempt_id = ?"
)


HANDLERS: Final = handlers(
    on(
        AttemptStarted,
        _STARTED,
        lambda event, at: (
            event.attempt_id,
            event.run_id,
            event.node_id,
            event.attempt_number,
            at,
            event.deadline_at,
            at,
            at,
        ),
    ),
    on(
        DeadlineShifted,
        _SHIFTED,
        lambda event, at: (event.to_deadline, event.to_started_at, at, event.attempt_id),
    ),
    on(
        AttemptChanged,
        _CHANGED,
        lambda event, at: (event.status, json_hash(event.output), at, event.attempt_id),
    ),
    pruned("DELETE FROM node_attempts WHERE run_id IN ({})"),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Insert started attempts and follow their status."""
    return dispatch(HANDLERS, entry)
