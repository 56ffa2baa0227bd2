"""``interactive_requests`` and ``interactive_submissions`` (DOMAIN §5.4, §5.5).

Revisions and outcomes come from the events; the projector only copies them.
"""

from __future__ import annotations

from typing import Final

from pwf.events import (
    Entry,
    InteractionCancelled,
    InteractionConsumed,
    InteractionRequested,
    InteractionRevised,
    InteractionSettled,
    SubmissionFinished,
    SubmissionRecorded,
)
from pwf.projections._sql import Statement, dispatch, handlers, json_hash, on, pruned

NAME: Final = "interactions"
VERSION: Final = 1

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS interactive_requests (
  request_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  attempt_id TEXT NOT NULL UNIQUE,
  target_session_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('agent', 'assistant', 'decision')),
  contract_hash BLOB NOT NULL,
  revision INTEGER NOT NULL DEFAULT 1 CHECK (revision > 0),
  status TEXT NOT NULL CHECK (status IN ('pending', 'settled', 'cancelled')),
  unproductive_turn_ends INTEGER NOT NULL DEFAULT 0 CHECK (unproductive_turn_ends >= 0),
  accepted_submission_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  settled_at INTEGER,
  consumed_at INTEGER,
  CHECK ((status = 'settled') = (accepted_submission_id IS NOT NULL AND settled_at IS NOT NULL)),
  CHECK (consumed_at IS NULL OR status = 'settled')
) STRICT""",
    """CREATE INDEX IF NOT EXISTS interactive_requests_session_idx
  ON interactive_requests(target_session_id, status, created_at)""",
    """CREATE INDEX IF NOT EXISTS interactive_requests_run_idx
  ON interactive_requests(run_id, status, created_at)""",
    # pwf's own (ADR 0077): requests in the order `pwf query interactions` lists them.
    """CREATE INDEX IF NOT EXISTS interactive_requests_created_idx
  ON interactive_requests(created_at, request_id)""",
    # pwf's own (ADR 0077): the requests not yet consumed (pending, or settled and unread),
    # which `pwf status` counts and lists; the settled ones grow with the log, these do not.
    """CREATE INDEX IF NOT EXISTS interactive_requests_open_idx
  ON interactive_requests(status, created_at)
  WHERE status = 'pending' OR (status = 'settled' AND consumed_at IS NULL)""",
    """CREATE TABLE IF NOT EXISTS interactive_submissions (
  submission_id TEXT PRIMARY KEY,
  request_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_revision INTEGER NOT NULL CHECK (request_revision > 0),
  payload_hash BLOB NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('validating', 'accepted', 'rejected', 'adopted')),
  receipt_hash BLOB,
  submitted_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (request_id, idempotency_key)
) STRICT""",
    """CREATE UNIQUE INDEX IF NOT EXISTS interactive_submissions_validating_idx
  ON interactive_submissions(request_id) WHERE outcome = 'validating'""",
)


_REQUESTED: Final = (
    "INSERT INTO interactive_requests (request_id, run_id, attempt_id, target_session_id,"
    " kind, contract_hash, revision, status, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)"
    " ON CONFLICT (request_id) DO UPDATE SET revision = excluded.revision,"
    " status = 'pending', accepted_submission_id = NULL, settled_at = NULL,"
    " consumed_at = NULL, updated_at = excluded.updated_at"
)
_SETTLED: Final = (
    "UPDATE interactive_requests SET status = 'settled', revision = ?,"
    " accepted_submission_id = ?, settled_at = ?, updated_at = ?"
    " WHERE request_id = ?"
)
_REVISED: Final = (
    "UPDATE interactive_requests SET revision = ?,"
    " unproductive_turn_ends = coalesce(?, unproductive_turn_ends),"
    " updated_at = ? WHERE request_id = ?"
)
_CANCELLED: Final = (
    "UPDATE interactive_requests SET status = 'cancelled', revision = ?,"
    " updated_at = ? WHERE request_id = ?"
)
_CONSUMED: Final = (
    "UPDATE interactive_requests SET consumed_at = ?, updated_at = ? WHERE request_id = ?"
)
_SUBMITTED: Final = (
    "INSERT INTO interactive_submissions (submission_id, request_id,"
    " idempotency_key, request_revision, payload_hash, outcome, receipt_hash,"
    " submitted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_FINISHED: Final = (
    "UPDATE interactive_submissions SET outcome = ?, receipt_hash = ?,"
    " updated_at = ? WHERE submission_id = ?"
)


_SUBMISSIONS_PRUNED: Final = (
    "DELETE FROM interactive_submissions WHERE request_id IN"
    " (SELECT request_id FROM interactive_requests WHERE run_id IN ({}))"
)
"""A removed run's submissions go before its requests, which name the run (ADR 0107)."""

HANDLERS: Final = handlers(
    on(
        InteractionRequested,
        _REQUESTED,
        lambda event, at: (
            event.request_id,
            event.run_id,
            event.attempt_id,
            event.target_session_id,
            event.kind,
            json_hash(event.contract),
            event.revision,
            at,
            at,
        ),
    ),
    on(
        InteractionSettled,
        _SETTLED,
        lambda event, at: (event.revision, event.submission_id, at, at, event.request_id),
    ),
    on(
        InteractionRevised,
        _REVISED,
        lambda event, at: (event.revision, event.unproductive_turn_ends, at, event.request_id),
    ),
    on(
        InteractionCancelled,
        _CANCELLED,
        lambda event, at: (event.revision, at, event.request_id),
    ),
    on(InteractionConsumed, _CONSUMED, lambda event, at: (at, at, event.request_id)),
    on(
        SubmissionRecorded,
        _SUBMITTED,
        lambda event, at: (
            event.submission_id,
            event.request_id,
            event.idempotency_key,
            event.request_revision,
            json_hash(event.payload),
            event.outcome,
            json_hash(event.receipt),
            at,
            at,
        ),
    ),
    on(
        SubmissionFinished,
        _FINISHED,
        lambda event, at: (event.outcome, json_hash(event.receipt), at, event.submission_id),
    ),
    pruned(_SUBMISSIONS_PRUNED, "DELETE FROM interactive_requests WHERE run_id IN ({})"),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Fold request and submission events."""
    return dispatch(HANDLERS, entry)
