"""``runs`` with ``run_queue``, ``run_bindings``, ``run_checkpoints`` and ``run_updates`` (§5.2).

Columns, CHECKs and the unique restart-parent index mirror the 0.16.1 schema;
foreign keys are left out so that a projection never depends on the order in
which read models are folded (ADR 0009).  ``revision`` counts the changes of
the run, its queue entry and its attempts: it is what a worker's
``expectedRevision`` is compared with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    DeadlineShifted,
    InteractionTimeoutStarted,
    RunClaimed,
    RunFinished,
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
from pwf.projections._sql import Sql, json_hash

if TYPE_CHECKING:
    from pwf.events import Entry

NAME: Final = "runs"
VERSION: Final = 1

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
    "CREATE INDEX IF NOT EXISTS runs_project_idx ON runs(project_path, created_at DESC)",
    "CREATE INDEX IF NOT EXISTS runs_status_idx ON runs(status, updated_at DESC)",
    "CREATE INDEX IF NOT EXISTS runs_parent_idx ON runs(parent_run_id)",
    "CREATE INDEX IF NOT EXISTS runs_root_idx ON runs(root_run_id)",
    "CREATE INDEX IF NOT EXISTS runs_origin_idx ON runs(origin_session_id, created_at)",
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
)

_BUMP: Final = "revision = revision + 1, updated_at = ?"


def _reserved(event: RunReserved, at: int) -> list[Sql]:
    statements = [
        Sql(
            "INSERT INTO runs (run_id, parent_run_id, root_run_id, lineage_kind, restart_number,"
            " parent_terminal_fingerprint, project_path, workflow_name, workflow_ref,"
            " workflow_source, definition_digest, definition_snapshot_hash, launch_options_hash,"
            " origin_session_id, execution_mode, status, paused, status_detail, revision,"
            " input_hash, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'queued',0,'queued',1,?,?,?)",
            (
                event.run_id,
                event.parent_run_id,
                event.root_run_id,
                event.lineage_kind,
                event.restart_number,
                None
                if event.parent_terminal_fingerprint is None
                else bytes.fromhex(event.parent_terminal_fingerprint),
                event.project_path,
                event.workflow_name,
                event.workflow_ref,
                event.workflow_source,
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
        Sql(
            "INSERT INTO run_queue (run_id, origin_session_id, status, created_at, updated_at)"
            " VALUES (?, ?, 'queued', ?, ?)",
            (event.run_id, event.origin_session_id, at, at),
        ),
    ]
    if event.origin_session_id is not None:
        statements.append(
            Sql(
                "INSERT INTO run_bindings (run_id, origin_session_id, execution_mode, created_at)"
                " VALUES (?, ?, ?, ?)",
                (event.run_id, event.origin_session_id, event.execution_mode, at),
            )
        )
    return statements


def _run(run_id: str, at: int, sets: str = "", params: tuple[object, ...] = ()) -> Sql:
    """Bump the run's revision, optionally changing more columns."""
    prefix = f"{sets}, " if sets else ""
    return Sql(f"UPDATE runs SET {prefix}{_BUMP} WHERE run_id = ?", (*params, at, run_id))


def _queue(run_id: str, at: int, sets: str, params: tuple[object, ...] = ()) -> Sql:
    return Sql(
        f"UPDATE run_queue SET {sets}, updated_at = ? WHERE run_id = ?", (*params, at, run_id)
    )


def _finished(event: RunFinished, at: int) -> list[Sql]:
    return [
        _run(
            event.run_id,
            at,
            "status = ?, status_detail = ?, finished_at = ?, final_output_hash = ?,"
            " error_hash = ?, error_code = ?",
            (
                event.status,
                event.detail,
                at,
                json_hash(event.final_output),
                json_hash(event.error),
                event.error_code,
            ),
        ),
        _queue(
            event.run_id,
            at,
            "status = ?, owner_worker_epoch = NULL, lease_expires_at = NULL",
            (event.queue_status,),
        ),
    ]


def apply(entry: Entry) -> list[Sql]:  # noqa: C901, PLR0911, PLR0912 - one branch per event type
    """Fold run lifecycle events into the run tables."""
    at = entry.at
    match entry.event:
        case RunReserved() as event:
            return _reserved(event, at)
        case RunClaimed(run_id=run_id, generation=generation, worker_epoch=epoch) as event:
            return [
                _run(run_id, at),
                _queue(
                    run_id,
                    at,
                    "status = 'starting', generation = ?, owner_worker_epoch = ?,"
                    " lease_expires_at = ?, error_code = NULL, error_message = NULL",
                    (generation, epoch, event.lease_expires_at),
                ),
            ]
        case RunStarted(run_id=run_id, detail=detail):
            return [
                _run(
                    run_id,
                    at,
                    "status = 'running', status_detail = ?, finished_at = NULL",
                    (detail,),
                ),
                _queue(run_id, at, "status = 'running'"),
            ]
        case RunWaiting(run_id=run_id, detail=detail, checkpoint_node_id=node_id):
            statements = [
                _run(
                    run_id,
                    at,
                    "status = 'waiting', status_detail = ?, finished_at = ?",
                    (detail, at),
                ),
                _queue(
                    run_id,
                    at,
                    "status = 'parked', owner_worker_epoch = NULL, lease_expires_at = NULL",
                ),
            ]
            if node_id is not None:
                statements.append(
                    Sql(
                        "INSERT INTO run_checkpoints (run_id, node_id, created_at, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
                        " node_id = excluded.node_id, continuation_run_id = NULL,"
                        " updated_at = excluded.updated_at",
                        (run_id, node_id, at, at),
                    )
                )
            return statements
        case RunPaused(run_id=run_id, paused_at=paused_at):
            return [
                _run(
                    run_id, at, "paused = 1, paused_at = ?, status_detail = 'paused'", (paused_at,)
                )
            ]
        case RunResumed(run_id=run_id, detail=detail):
            return [_run(run_id, at, "paused = 0, paused_at = NULL, status_detail = ?", (detail,))]
        case RunFinished() as event:
            return _finished(event, at)
        case RunQueueDoneForContinuation(run_id=run_id, continuation_run_id=child):
            return [
                _run(run_id, at),
                _queue(run_id, at, "status = 'done'"),
                Sql(
                    "UPDATE run_checkpoints SET continuation_run_id = ?, updated_at = ?"
                    " WHERE run_id = ?",
                    (child, at, run_id),
                ),
            ]
        case RunUpdatePublished() as event:
            return [
                Sql(
                    "INSERT INTO run_updates (run_id, sequence, request_id, attempt_id,"
                    " update_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        event.run_id,
                        event.sequence,
                        event.request_id,
                        event.attempt_id,
                        json_hash(event.update),
                        at,
                    ),
                )
            ]
        case WorkerEnded(run_id=run_id, worker_epoch=epoch):
            return [
                Sql(
                    "UPDATE run_queue SET owner_worker_epoch = NULL, lease_expires_at = NULL,"
                    " updated_at = ? WHERE run_id = ? AND owner_worker_epoch = ?",
                    (at, run_id, epoch),
                )
            ]
        case WorkerMessageRecorded(run_id=run_id, worker_epoch=epoch, lease_expires_at=lease):
            if lease is None:
                return []
            return [
                Sql(
                    "UPDATE run_queue SET lease_expires_at = ? WHERE run_id = ?"
                    " AND owner_worker_epoch = ?",
                    (lease, run_id, epoch),
                )
            ]
        case InteractionTimeoutStarted(run_id=run_id, detail=detail):
            return [
                _run(
                    run_id,
                    at,
                    "status = 'running', status_detail = ?, finished_at = NULL",
                    (detail,),
                ),
                _queue(run_id, at, "status = 'starting', error_code = NULL, error_message = NULL"),
            ]
        case (
            AttemptStarted(run_id=run_id)
            | AttemptChanged(run_id=run_id)
            | DeadlineShifted(run_id=run_id)
        ):
            return [_run(run_id, at)]
    return []
