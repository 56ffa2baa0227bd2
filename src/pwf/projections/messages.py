"""``workflow_messages``: what each session is shown, in order (DOMAIN §5.6).

Order numbers and ids are decided by the handler and carried in
``message.created``.  Each message also keeps its latest model turn's id,
state, start and end (folded from ``turn.started`` and ``turn.ended``, the
newest by start then id, as ``workflow_turns`` orders them), so the open
message and the retained terminal are searches of the few messages that can
still be either, not walks of a session's history (ADR 0085).
"""

from __future__ import annotations

from typing import Final

from pwf.events import Entry, MessageCancelled, MessageCreated, MessageSent, TurnEnded, TurnStarted
from pwf.projections._sql import Statement, dispatch, handlers, json_hash, on, pruned

NAME: Final = "workflow_messages"
VERSION: Final = 2

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS workflow_messages (
  workflow_message_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  target_session_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN (
    'step', 'decision', 'notification', 'terminal', 'followUp'
  )),
  source_id TEXT NOT NULL,
  content_hash BLOB NOT NULL,
  order_number INTEGER NOT NULL CHECK (order_number > 0),
  status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'cancelled')),
  pi_session_entry_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  latest_turn_id TEXT,
  latest_turn_state TEXT CHECK (latest_turn_state IS NULL OR latest_turn_state IN (
    'started', 'ended'
  )),
  latest_turn_started_at INTEGER,
  latest_turn_ended_at INTEGER,
  UNIQUE (target_session_id, order_number),
  CHECK ((status = 'sent') = (pi_session_entry_id IS NOT NULL)),
  CHECK ((latest_turn_id IS NULL) = (latest_turn_state IS NULL)),
  CHECK ((latest_turn_state = 'ended') = (latest_turn_ended_at IS NOT NULL))
) STRICT""",
    """CREATE INDEX IF NOT EXISTS workflow_messages_session_idx
  ON workflow_messages(target_session_id, status, order_number)""",
    """CREATE INDEX IF NOT EXISTS workflow_messages_run_idx
  ON workflow_messages(run_id, order_number)""",
    """CREATE INDEX IF NOT EXISTS workflow_messages_source_idx
  ON workflow_messages(kind, source_id, order_number)""",
    # pwf's own (ADR 0077): the messages of one source (a request, a follow-up) of any kind.
    """CREATE INDEX IF NOT EXISTS workflow_messages_source_id_idx
  ON workflow_messages(source_id, order_number)""",
    """CREATE UNIQUE INDEX IF NOT EXISTS workflow_messages_pending_step_source_idx
  ON workflow_messages(source_id) WHERE kind = 'step' AND status = 'pending'""",
    # pwf's own (ADR 0085): the sent terminal and follow-up messages whose latest turn is
    # missing or open, which the open message and the retained terminal search newest first.
    """CREATE INDEX IF NOT EXISTS workflow_messages_unread_idx
  ON workflow_messages(target_session_id, order_number)
  WHERE status = 'sent' AND kind IN ('terminal', 'followUp')
  AND (latest_turn_state IS NULL OR latest_turn_state = 'started')""",
    # pwf's own (ADR 0085): the sent terminal messages by their latest turn's end, for the
    # ones whose retention has not run out.
    """CREATE INDEX IF NOT EXISTS workflow_messages_read_terminal_idx
  ON workflow_messages(target_session_id, latest_turn_ended_at)
  WHERE status = 'sent' AND kind = 'terminal' AND latest_turn_state = 'ended'""",
    # pwf's own (ADR 0094): the run list revision's latest message change.
    "CREATE INDEX IF NOT EXISTS workflow_messages_updated_idx ON workflow_messages(updated_at)",
)


_CREATED: Final = (
    "INSERT INTO workflow_messages (workflow_message_id, run_id,"
    " target_session_id, kind, source_id, content_hash, order_number, status,"
    " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)"
)
_SENT: Final = (
    "UPDATE workflow_messages SET status = 'sent', pi_session_entry_id = ?,"
    " updated_at = ? WHERE workflow_message_id = ?"
)
_CANCELLED: Final = (
    "UPDATE workflow_messages SET status = 'cancelled', updated_at = ?"
    " WHERE workflow_message_id = ? AND status = 'pending'"
)

_TURN_STARTED: Final = (
    "UPDATE workflow_messages SET latest_turn_id = ?, latest_turn_state = 'started',"
    " latest_turn_started_at = ?, latest_turn_ended_at = NULL"
    " WHERE workflow_message_id = ? AND (latest_turn_started_at IS NULL"
    " OR latest_turn_started_at < ? OR (latest_turn_started_at = ? AND latest_turn_id < ?))"
)
"""A started turn is the latest unless one started later (or as late, with a larger id)."""
_TURN_ENDED: Final = (
    "UPDATE workflow_messages SET latest_turn_state = 'ended', latest_turn_ended_at = ?"
    " WHERE workflow_message_id = ? AND latest_turn_id = ?"
)


HANDLERS: Final = handlers(
    on(
        MessageCreated,
        _CREATED,
        lambda event, at: (
            event.workflow_message_id,
            event.run_id,
            event.target_session_id,
            event.kind,
            event.source_id,
            json_hash(event.content),
            event.order_number,
            at,
            at,
        ),
    ),
    on(
        MessageSent,
        _SENT,
        lambda event, at: (event.pi_session_entry_id, at, event.workflow_message_id),
    ),
    on(MessageCancelled, _CANCELLED, lambda event, at: (at, event.workflow_message_id)),
    on(
        TurnStarted,
        _TURN_STARTED,
        lambda event, at: (
            event.workflow_turn_id,
            at,
            event.workflow_message_id,
            at,
            at,
            event.workflow_turn_id,
        ),
    ),
    on(
        TurnEnded,
        _TURN_ENDED,
        lambda event, at: (at, event.workflow_message_id, event.workflow_turn_id),
    ),
    pruned("DELETE FROM workflow_messages WHERE run_id IN ({})"),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Insert created messages, mark them sent or cancelled, and keep their latest turn."""
    return dispatch(HANDLERS, entry)
