"""``runs`` with ``run_queue``, ``run_bindings``, ``run_checkpoints`` and ``run_updates`` (§5.2).

Columns, CHECKs and the unique restart-parent index mirror the 0.16.1 schema;
foreign keys are left out so that a projection never depends on the order in
which read models are folded (ADR 0009).  ``revision`` counts the changes of
the run, its queue entry and its attempts: it is what a worker's
``expectedRevision`` is compared with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    DeadlineShifted,
    Entry,
    InteractionTimeoutStarted,
    RunClaimed,
    RunFinished,
    RunLeaseRenewed,
    RunLeasesRenewed,
    RunPaused,
    RunQueueDoneForContinuation,
    RunReserved,
    RunResumed,
    RunStarted,
    RunUpdatePublished,
    RunWaiting,
    WorkerEnded,
    WorkerMessageRecorded,
)
from pwf.projections._sql import Statement, dispatch, each, handlers, json_hash, on, pruned
from pwf.projections.run_totals import TOTALS_DDL, TOTALS_FILL

if TYPE_CHECKING:
    from collections.abc import Callable

NAME: Final = "runs"
VERSION: Final = 2

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY,
  parent_run_id TEXT,
  root_run_id TEXT NOT NULL,
  lineage_kind TEXT CHECK (lineage_kind IS NULL OR lineage_kind IN ('continuation', 'restart')),
  restart_number INTEGER NOT NULL DEFAULT 0 CHECK (restart_number >= 0),
  parent_terminal_fingerprint BLOB CHECK (
    parent_terminal_fingerprint IS NULL OR length(parent_terminal_fingerprint) = 32
  ),
  project_path TEXT NOT NULL,
  workflow_name TEXT NOT NULL,
  workflow_ref TEXT NOT NULL,
  workflow_source TEXT NOT NULL,
  definition_digest TEXT NOT NULL,
  definition_snapshot_hash BLOB,
  launch_options_hash BLOB NOT NULL,
  origin_session_id TEXT,
  execution_mode TEXT NOT NULL CHECK (execution_mode IN ('interactive', 'headless')),
  status TEXT NOT NULL CHECK (status IN (
    'queued', 'running', 'waiting', 'completed', 'failed', 'timed_out', 'cancelled'
  )),
  paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
  paused_at INTEGER,
  status_detail TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  input_hash BLOB NOT NULL,
  final_output_hash BLOB,
  error_hash BLOB,
  error_code TEXT,
  presentation_prompt_hash BLOB,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER,
  CHECK (
    (status IN ('waiting', 'completed', 'failed', 'timed_out', 'cancelled'))
    = (finished_at IS NOT NULL)
  ),
  CHECK ((parent_run_id IS NULL) = (lineage_kind IS NULL)),
  CHECK (
    (lineage_kind = 'restart' AND parent_terminal_fingerprint IS NOT NULL) OR
    (lineage_kind IS NOT 'restart' AND parent_terminal_fingerprint IS NULL)
  ),
  CHECK (parent_run_id IS NOT NULL OR restart_number = 0)
) STRICT""",
    "CREATE INDEX IF NOT EXISTS runs_status_idx ON runs(status, updated_at DESC)",
    "CREATE INDEX IF NOT EXISTS runs_parent_idx ON runs(parent_run_id)",
    "CREATE INDEX IF NOT EXISTS runs_root_idx ON runs(root_run_id)",
    "CREATE INDEX IF NOT EXISTS runs_origin_idx ON runs(origin_session_id, created_at)",
    # pwf's own (ADR 0077): runs in the order `pwf query runs` and the web's runs page list them.
    "CREATE INDEX IF NOT EXISTS runs_created_idx ON runs(created_at, run_id)",
    """CREATE UNIQUE INDEX IF NOT EXISTS runs_restart_parent_idx ON runs(parent_run_id)
  WHERE lineage_kind = 'restart'""",
    """CREATE TABLE IF NOT EXISTS run_queue (
  run_id TEXT PRIMARY KEY,
  origin_session_id TEXT,
  status TEXT NOT NULL CHECK (status IN (
    'queued', 'starting', 'running', 'parked', 'done', 'failed', 'cancelled'
  )),
  generation INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),
  owner_worker_epoch TEXT,
  lease_expires_at INTEGER,
  error_code TEXT,
  error_message TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CHECK ((owner_worker_epoch IS NULL) = (lease_expires_at IS NULL))
) STRICT""",
    """CREATE UNIQUE INDEX IF NOT EXISTS run_queue_session_active_idx
  ON run_queue(origin_session_id)
  WHERE origin_session_id IS NOT NULL AND status IN ('queued', 'starting', 'running')""",
    "CREATE INDEX IF NOT EXISTS run_queue_status_idx ON run_queue(status, created_at)",
    # pwf's own (ADR 0077): the run list page, newest first; the claims host.status counts.
    "CREATE INDEX IF NOT EXISTS run_queue_created_idx ON run_queue(created_at, run_id)",
    """CREATE INDEX IF NOT EXISTS run_queue_lease_idx ON run_queue(lease_expires_at)
  WHERE owner_worker_epoch IS NOT NULL""",
    # pwf's own (ADR 0094): the run list revision's latest queue change.
    "CREATE INDEX IF NOT EXISTS run_queue_updated_idx ON run_queue(updated_at)",
    """CREATE TABLE IF NOT EXISTS run_bindings (
  run_id TEXT PRIMARY KEY,
  origin_session_id TEXT NOT NULL,
  execution_mode TEXT NOT NULL CHECK (execution_mode IN ('interactive', 'headless')),
  created_at INTEGER NOT NULL
) STRICT""",
    "CREATE INDEX IF NOT EXISTS run_bindings_session_idx ON run_bindings(origin_session_id)",
    """CREATE TABLE IF NOT EXISTS run_checkpoints (
  run_id TEXT PRIMARY KEY,
  node_id TEXT NOT NULL,
  continuation_run_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT""",
    """CREATE TABLE IF NOT EXISTS run_updates (
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL CHECK (sequence > 0),
  request_id TEXT NOT NULL,
  attempt_id TEXT NOT NULL,
  update_hash BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, sequence)
) STRICT""",
    # pwf's own (ADR 0094): the run list's totals and contradictions, kept by triggers.
    *TOTALS_DDL,
)

KEPT: Final = TOTALS_FILL
"""What makes the rows this read model's triggers keep, from its tables (:mod:`pwf.fold.bulk`)."""


_BUMP: Final = "revision = revision + 1, updated_at = ?"


def _run_sql(sets: str = "") -> str:
    """Bump the run's revision, optionally changing more columns: ``sets`` first, then the bump."""
    prefix = f"{sets}, " if sets else ""
    return f"UPDATE runs SET {prefix}{_BUMP} WHERE run_id = ?"


def _queue_sql(sets: str) -> str:
    return f"UPDATE run_queue SET {sets}, updated_at = ? WHERE run_id = ?"


RESERVED_REVISION: Final = 1
"""A reserved run's revision: ``run.start`` answers with it, read nowhere (ADR 0101)."""
RESERVED_GENERATION: Final = 0
"""A reserved run's queue generation, as ``run.start``'s receipt states it (ADR 0101)."""

_INSERT_RUN: Final = (
    "INSERT INTO runs (run_id, parent_run_id, root_run_id, lineage_kind, restart_number,"
    " parent_terminal_fingerprint, project_path, workflow_name, workflow_ref,"
    " workflow_source, definition_digest, definition_snapshot_hash, launch_options_hash,"
    " origin_session_id, execution_mode, status, paused, status_detail, revision,"
    " input_hash, created_at, updated_at)"
    f" VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'queued',0,'queued',{RESERVED_REVISION},?,?,?)"
)
_INSERT_QUEUE: Final = (
    "INSERT INTO run_queue (run_id, origin_session_id, status, generation, created_at,"
    f" updated_at) VALUES (?, ?, 'queued', {RESERVED_GENERATION}, ?, ?)"
)
_INSERT_BINDING: Final = (
    "INSERT INTO run_bindings (run_id, origin_session_id, execution_mode, created_at)"
    " VALUES (?, ?, ?, ?)"
)
_BUMP_RUN: Final = _run_sql()
_RUN_RUNNING: Final = _run_sql("status = 'running', status_detail = ?, finished_at = NULL")
_RUN_WAITING: Final = _run_sql("status = 'waiting', status_detail = ?, finished_at = ?")
_RUN_PAUSED: Final = _run_sql("paused = 1, paused_at = ?, status_detail = 'paused'")
_RUN_RESUMED: Final = _run_sql("paused = 0, paused_at = NULL, status_detail = ?")
_RUN_FINISHED: Final = _run_sql(
    "status = ?, status_detail = ?, finished_at = ?, final_output_hash = ?,"
    " error_hash = ?, error_code = ?"
)
_QUEUE_CLAIMED: Final = _queue_sql(
    "status = 'starting', generation = ?, owner_worker_epoch = ?,"
    " lease_expires_at = ?, error_code = NULL, error_message = NULL"
)
_QUEUE_RUNNING: Final = _queue_sql("status = 'running'")
_QUEUE_PARKED: Final = _queue_sql(
    "status = 'parked', owner_worker_epoch = NULL, lease_expires_at = NULL"
)
_QUEUE_FINISHED: Final = _queue_sql(
    "status = ?, owner_worker_epoch = NULL, lease_expires_at = NULL"
)
_QUEUE_DONE: Final = _queue_sql("status = 'done'")
_QUEUE_RESTARTED: Final = _queue_sql("status = 'starting', error_code = NULL, error_message = NULL")
_CHECKPOINT: Final = (
    "INSERT INTO run_checkpoints (run_id, node_id, created_at, updated_at)"
    " VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
    " node_id = excluded.node_id, continuation_run_id = NULL,"
    " updated_at = excluded.updated_at"
)
_CONTINUED: Final = (
    "UPDATE run_checkpoints SET continuation_run_id = ?, updated_at = ? WHERE run_id = ?"
)
_UPDATE: Final = (
    "INSERT INTO run_updates (run_id, sequence, request_id, attempt_id,"
    " update_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)"
)
_WORKER_ENDED: Final = (
    "UPDATE run_queue SET owner_worker_epoch = NULL, lease_expires_at = NULL,"
    " updated_at = ? WHERE run_id = ? AND owner_worker_epoch = ?"
)
_LEASE: Final = (
    "UPDATE run_queue SET lease_expires_at = ? WHERE run_id = ? AND owner_worker_epoch = ?"
)


def _reserved(event: RunReserved, at: int) -> list[Statement]:
    fingerprint = event.parent_terminal_fingerprint
    source = canonical.decode(event.workflow_source)
    statements: list[Statement] = [
        (
            _INSERT_RUN,
            (
                event.run_id,
                event.parent_run_id,
                event.root_run_id,
                event.lineage_kind,
                event.restart_number,
                None if fingerprint is None else bytes.fromhex(fingerprint),
                event.project_path,
                event.workflow_name,
                event.workflow_ref,
                source if isinstance(source, str) else bytes(event.workflow_source).decode(),
                event.definition_digest,
                json_hash(event.definition_snapshot),
                json_hash(event.launch_options),
                event.origin_session_id,
                event.execution_mode,
                json_hash(event.input),
                at,
                at,
            ),
        ),
        (_INSERT_QUEUE, (event.run_id, event.origin_session_id, at, at)),
    ]
    if event.origin_session_id is not None:
        statements.append(
            (
                _INSERT_BINDING,
                (event.run_id, event.origin_session_id, event.execution_mode, at),
            )
        )
    return statements


def _claimed(event: RunClaimed, at: int) -> list[Statement]:
    run_id = event.run_id
    return [
        (_BUMP_RUN, (at, run_id)),
        (
            _QUEUE_CLAIMED,
            (event.generation, event.worker_epoch, event.lease_expires_at, at, run_id),
        ),
    ]


def _running(
    queue_sql: str,
) -> Callable[[RunStarted | InteractionTimeoutStarted, int], list[Statement]]:
    """The run runs again with the event's detail, and its queue entry moves by ``queue_sql``."""

    def fold(event: RunStarted | InteractionTimeoutStarted, at: int) -> list[Statement]:
        run_id = event.run_id
        return [(_RUN_RUNNING, (event.detail, at, run_id)), (queue_sql, (at, run_id))]

    return fold


def _waiting(event: RunWaiting, at: int) -> list[Statement]:
    run_id = event.run_id
    statements: list[Statement] = [
        (_RUN_WAITING, (event.detail, at, at, run_id)),
        (_QUEUE_PARKED, (at, run_id)),
    ]
    if event.checkpoint_node_id is not None:
        statements.append((_CHECKPOINT, (run_id, event.checkpoint_node_id, at, at)))
    return statements


def _finished(event: RunFinished, at: int) -> list[Statement]:
    run_id = event.run_id
    return [
        (
            _RUN_FINISHED,
            (
                event.status,
                event.detail,
                at,
                json_hash(event.final_output),
                json_hash(event.error),
                event.error_code,
                at,
                run_id,
            ),
        ),
        (_QUEUE_FINISHED, (event.queue_status, at, run_id)),
    ]


def _continued(event: RunQueueDoneForContinuation, at: int) -> list[Statement]:
    run_id = event.run_id
    return [
        (_BUMP_RUN, (at, run_id)),
        (_QUEUE_DONE, (at, run_id)),
        (_CONTINUED, (event.continuation_run_id, at, run_id)),
    ]


def _worker_message(event: WorkerMessageRecorded, _at: int) -> list[Statement]:
    lease = event.lease_expires_at
    if lease is None:
        return []
    return [(_LEASE, (lease, event.run_id, event.worker_epoch))]


def _bumped(event: AttemptStarted | AttemptChanged | DeadlineShifted, at: int) -> list[Statement]:
    return [(_BUMP_RUN, (at, event.run_id))]


_RUN_TABLES: Final = ("run_updates", "run_checkpoints", "run_bindings", "run_queue", "runs")
"""This read model's tables of a run's own rows, which a prune deletes with the run (ADR 0107)."""

HANDLERS: Final = handlers(
    each(RunReserved, _reserved),
    each(RunClaimed, _claimed),
    each(RunStarted, _running(_QUEUE_RUNNING)),
    each(RunWaiting, _waiting),
    on(RunPaused, _RUN_PAUSED, lambda event, at: (event.paused_at, at, event.run_id)),
    on(RunResumed, _RUN_RESUMED, lambda event, at: (event.detail, at, event.run_id)),
    each(RunFinished, _finished),
    each(RunQueueDoneForContinuation, _continued),
    on(
        RunUpdatePublished,
        _UPDATE,
        lambda event, at: (
            event.run_id,
            event.sequence,
            event.request_id,
            event.attempt_id,
            json_hash(event.update),
            at,
        ),
    ),
    on(WorkerEnded, _WORKER_ENDED, lambda event, at: (at, event.run_id, event.worker_epoch)),
    each(WorkerMessageRecorded, _worker_message),
    on(
        RunLeaseRenewed,
        _LEASE,
        lambda event, _at: (event.lease_expires_at, event.run_id, event.worker_epoch),
    ),
    each(
        RunLeasesRenewed,
        lambda event, _at: [
            (_LEASE, (event.lease_expires_at, run_id, epoch)) for run_id, epoch in event.claims
        ],
    ),
    each(InteractionTimeoutStarted, _running(_QUEUE_RESTARTED)),
    each(AttemptStarted, _bumped),
    each(AttemptChanged, _bumped),
    each(DeadlineShifted, _bumped),
    pruned(*(f"DELETE FROM {table} WHERE run_id IN ({{}})" for table in _RUN_TABLES)),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Fold run lifecycle events into the run tables."""
    return dispatch(HANDLERS, entry)
