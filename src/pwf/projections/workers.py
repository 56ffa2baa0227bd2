"""``run_workers`` and ``worker_messages`` (DOMAIN §5.12, §14), and the host claim.

The host claim's ``host_state`` (DOMAIN §5.1, :mod:`pwf.projections.host`) is
folded here rather than as a read model of its own, so a database written
before served hosts existed keeps its checkpoint rows and verifies unchanged.
"""

from __future__ import annotations

from typing import Final

from pwf.events import (
    Entry,
    RunClaimed,
    RunStarted,
    WorkerAttached,
    WorkerEnded,
    WorkerMessageRecorded,
)
from pwf.projections import host
from pwf.projections._sql import Statement, dispatch, handlers, json_hash, on, pruned, text_hash

NAME: Final = "workers"
VERSION: Final = 1

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS run_workers (
  worker_epoch TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  generation INTEGER NOT NULL CHECK (generation > 0),
  host_epoch INTEGER CHECK (host_epoch IS NULL OR host_epoch > 0),
  launch_envelope_hash BLOB NOT NULL,
  pid INTEGER,
  process_start_identity TEXT,
  status TEXT NOT NULL CHECK (status IN (
    'starting', 'running', 'exited', 'cancelled', 'timedOut', 'crashed', 'claimLost', 'orphaned'
  )),
  started_at INTEGER NOT NULL,
  ready_at INTEGER,
  finished_at INTEGER,
  exit_code INTEGER,
  signal TEXT,
  diagnostic_hash BLOB,
  UNIQUE (run_id, generation)
) STRICT""",
    """CREATE UNIQUE INDEX IF NOT EXISTS run_workers_active_idx ON run_workers(run_id)
  WHERE status IN ('starting', 'running')""",
    """CREATE TABLE IF NOT EXISTS worker_messages (
  worker_epoch TEXT NOT NULL,
  message_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  operation TEXT NOT NULL,
  request_fingerprint BLOB NOT NULL CHECK (length(request_fingerprint) = 32),
  outcome TEXT NOT NULL CHECK (outcome IN ('accepted', 'adopted', 'rejected', 'claimLost')),
  accepted_revision INTEGER CHECK (accepted_revision IS NULL OR accepted_revision >= 0),
  result_hash BLOB,
  error_hash BLOB,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (worker_epoch, message_id)
) STRICT""",
)


_CLAIMED: Final = (
    "INSERT INTO run_workers (worker_epoch, run_id, generation, host_epoch,"
    " launch_envelope_hash, status, started_at) VALUES (?, ?, ?, ?, ?, 'starting', ?)"
)
_STARTED: Final = "UPDATE run_workers SET status = 'running', ready_at = ? WHERE worker_epoch = ?"
_ENDED: Final = (
    "UPDATE run_workers SET status = ?, finished_at = ?, exit_code = ?, signal = ?,"
    " diagnostic_hash = ? WHERE worker_epoch = ? AND status IN ('starting', 'running')"
)
_ATTACHED: Final = (
    "UPDATE run_workers SET pid = ?, process_start_identity = ? WHERE worker_epoch = ?"
)
_MESSAGE: Final = (
    "INSERT INTO worker_messages (worker_epoch, message_id, run_id, operation,"
    " request_fingerprint, outcome, accepted_revision, result_hash, error_hash,"
    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


HANDLERS: Final = handlers(
    on(
        RunClaimed,
        _CLAIMED,
        lambda event, at: (
            event.worker_epoch,
            event.run_id,
            event.generation,
            event.host_epoch,
            json_hash(event.launch),
            at,
        ),
    ),
    on(RunStarted, _STARTED, lambda event, at: (at, event.worker_epoch)),
    on(
        WorkerEnded,
        _ENDED,
        lambda event, at: (
            event.status,
            at,
            event.exit_code,
            event.signal,
            text_hash(event.diagnostic),
            event.worker_epoch,
        ),
    ),
    on(
        WorkerAttached,
        _ATTACHED,
        lambda event, _at: (event.pid, event.start_identity, event.worker_epoch),
    ),
    on(
        WorkerMessageRecorded,
        _MESSAGE,
        lambda event, at: (
            event.worker_epoch,
            event.message_id,
            event.run_id,
            event.operation,
            bytes.fromhex(event.fingerprint),
            event.outcome,
            event.revision,
            json_hash(event.result),
            text_hash(event.error),
            at,
        ),
    ),
    *host.HANDLERS.items(),
    pruned(
        "DELETE FROM run_workers WHERE run_id IN ({})",
        "DELETE FROM worker_messages WHERE run_id IN ({})",
    ),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Follow workers from launch to end and store their answered messages."""
    return dispatch(HANDLERS, entry)
