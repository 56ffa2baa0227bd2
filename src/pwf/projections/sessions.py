"""Session read models: coordinators, model turns, follow-ups, terminal views (§5.7-§5.9, §5.13).

``session_coordinators`` is pwf's persisted form of the original's
process-local coordinator map, so fencing replays deterministically.
"""

from __future__ import annotations

from typing import Final

from pwf.events import (
    BranchReported,
    CoordinatorAttached,
    CoordinatorDetached,
    Entry,
    FollowUpClosed,
    FollowUpQueued,
    LogPruned,
    TerminalCleared,
    TurnEnded,
    TurnStarted,
)
from pwf.projections._sql import Statement, dispatch, each, for_each_chunk, handlers, on, text_hash

NAME: Final = "sessions"
VERSION: Final = 1

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS session_coordinators (
  target_session_id TEXT PRIMARY KEY,
  coordinator_epoch TEXT NOT NULL UNIQUE,
  connection_id TEXT NOT NULL,
  branch_reported INTEGER NOT NULL DEFAULT 0 CHECK (branch_reported IN (0, 1)),
  attached_at INTEGER NOT NULL,
  reported_at INTEGER
) STRICT""",
    """CREATE TABLE IF NOT EXISTS workflow_turns (
  workflow_turn_id TEXT PRIMARY KEY,
  workflow_message_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  target_session_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('started', 'ended')),
  stop_reason TEXT CHECK (stop_reason IS NULL OR stop_reason IN (
    'completed', 'aborted', 'error', 'lost'
  )),
  response_session_entry_id TEXT,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  CHECK (
    (state = 'started' AND stop_reason IS NULL AND ended_at IS NULL)
    OR
    (state = 'ended' AND stop_reason IS NOT NULL AND ended_at IS NOT NULL)
  )
) STRICT""",
    """CREATE UNIQUE INDEX IF NOT EXISTS workflow_turns_open_message_idx
  ON workflow_turns(workflow_message_id) WHERE state = 'started'""",
    """CREATE INDEX IF NOT EXISTS workflow_turns_session_idx
  ON workflow_turns(target_session_id, state, started_at)""",
    """CREATE INDEX IF NOT EXISTS workflow_turns_message_idx
  ON workflow_turns(workflow_message_id, started_at)""",
    # pwf's own (ADR 0077): a run's started turns, for its display and its session's view.
    """CREATE INDEX IF NOT EXISTS workflow_turns_run_idx
  ON workflow_turns(run_id, state)""",
    # pwf's own (ADR 0094): the run list revision's latest turn start or end.
    """CREATE INDEX IF NOT EXISTS workflow_turns_time_idx
  ON workflow_turns(coalesce(ended_at, started_at))""",
    """CREATE TABLE IF NOT EXISTS workflow_follow_ups (
  follow_up_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  request_id TEXT NOT NULL,
  order_number INTEGER NOT NULL CHECK (order_number > 0),
  target_session_id TEXT NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT,
  source_type TEXT NOT NULL,
  prompt_hash BLOB NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued', 'removed', 'cancelled')),
  reason_hash BLOB,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (run_id, request_id),
  UNIQUE (run_id, order_number),
  CHECK ((status IN ('removed', 'cancelled')) = (reason_hash IS NOT NULL))
) STRICT""",
    # pwf's own (ADR 0077): the queued follow-ups that host.status counts.
    """CREATE INDEX IF NOT EXISTS workflow_follow_ups_status_idx
  ON workflow_follow_ups(status)""",
    """CREATE TABLE IF NOT EXISTS session_terminal_views (
  target_session_id TEXT PRIMARY KEY,
  cleared_run_id TEXT,
  cleared_at INTEGER NOT NULL
) STRICT""",
)


_ATTACHED: Final = (
    "INSERT INTO session_coordinators (target_session_id, coordinator_epoch,"
    " connection_id, attached_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (target_session_id) DO UPDATE SET"
    " coordinator_epoch = excluded.coordinator_epoch,"
    " connection_id = excluded.connection_id, branch_reported = 0,"
    " attached_at = excluded.attached_at, reported_at = NULL"
)
_DETACHED: Final = (
    "DELETE FROM session_coordinators WHERE target_session_id = ? AND coordinator_epoch = ?"
)
_REPORTED: Final = (
    "UPDATE session_coordinators SET branch_reported = 1, reported_at = ?"
    " WHERE target_session_id = ? AND coordinator_epoch = ?"
)
_TURN_STARTED: Final = (
    "INSERT INTO workflow_turns (workflow_turn_id, workflow_message_id, run_id,"
    " target_session_id, state, started_at) VALUES (?, ?, ?, ?, 'started', ?)"
)
_TURN_ENDED: Final = (
    "UPDATE workflow_turns SET state = 'ended', stop_reason = ?,"
    " response_session_entry_id = ?, ended_at = ? WHERE workflow_turn_id = ?"
)
_QUEUED: Final = (
    "INSERT INTO workflow_follow_ups (follow_up_id, run_id, request_id,"
    " order_number, target_session_id, actor_type, actor_id, source_type,"
    " prompt_hash, status, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)"
)
_CLOSED: Final = (
    "UPDATE workflow_follow_ups SET status = ?, reason_hash = ?, updated_at = ?"
    " WHERE follow_up_id = ?"
)
_CLEARED: Final = (
    "INSERT INTO session_terminal_views (target_session_id, cleared_run_id,"
    " cleared_at) VALUES (?, ?, ?) ON CONFLICT (target_session_id) DO UPDATE"
    " SET cleared_run_id = excluded.cleared_run_id,"
    " cleared_at = excluded.cleared_at"
)


_UNCLEARED: Final = (
    "UPDATE session_terminal_views SET cleared_run_id = NULL WHERE cleared_run_id IN ({})"
)
"""A terminal view cleared for a pruned run stays cleared, no longer naming it (ADR 0103)."""
_PRUNED: Final = (
    "DELETE FROM workflow_turns WHERE run_id IN ({})",
    "DELETE FROM workflow_follow_ups WHERE run_id IN ({})",
)
"""A removed run's turns and follow-ups go with it (ADR 0107)."""


HANDLERS: Final = handlers(
    on(
        CoordinatorAttached,
        _ATTACHED,
        lambda event, at: (
            event.target_session_id,
            event.coordinator_epoch,
            event.connection_id,
            at,
        ),
    ),
    on(
        CoordinatorDetached,
        _DETACHED,
        lambda event, _at: (event.target_session_id, event.coordinator_epoch),
    ),
    on(
        BranchReported,
        _REPORTED,
        lambda event, at: (at, event.target_session_id, event.coordinator_epoch),
    ),
    on(
        TurnStarted,
        _TURN_STARTED,
        lambda event, at: (
            event.workflow_turn_id,
            event.workflow_message_id,
            event.run_id,
            event.target_session_id,
            at,
        ),
    ),
    on(
        TurnEnded,
        _TURN_ENDED,
        lambda event, at: (
            event.stop_reason,
            event.response_session_entry_id,
            at,
            event.workflow_turn_id,
        ),
    ),
    on(
        FollowUpQueued,
        _QUEUED,
        lambda event, at: (
            event.follow_up_id,
            event.run_id,
            event.request_id,
            event.order_number,
            event.target_session_id,
            event.actor_type,
            event.actor_id,
            event.source_type,
            text_hash(event.prompt),
            at,
            at,
        ),
    ),
    on(
        FollowUpClosed,
        _CLOSED,
        lambda event, at: (event.status, text_hash(event.reason), at, event.follow_up_id),
    ),
    on(TerminalCleared, _CLEARED, lambda event, at: (event.target_session_id, event.run_id, at)),
    each(
        LogPruned,
        lambda event, _at: [
            statement
            for text in (_UNCLEARED, *_PRUNED)
            for statement in for_each_chunk(text, event.removed_run_ids)
        ],
    ),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Fold coordinator, turn, follow-up and terminal-view events."""
    return dispatch(HANDLERS, entry)
