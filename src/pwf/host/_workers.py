"""Worker messages and worker launch (DOMAIN §14, HOST §7).

Imports commands, events, protocol and the host's context room.  A worker
message runs in one write transaction: the early checks of §14 (epoch,
ownership, replay of the same message id), then the handler in a
savepoint, and the batch ends with ``worker.message_recorded`` (ADR 0008
D6), which renews the lease while the worker still owns its run.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final, TypeVar

from pwf.commands import Result, raw_or_missing
from pwf.commands.processes import PROCESS_OPERATIONS, process_operation
from pwf.commands.workers import WORKER_OPERATIONS, check_worker, launch_run, run_revision
from pwf.errors import BlobConflictError, CommandError
from pwf.events import Actor, Cause, WorkerMessageRecorded, one_of
from pwf.events.runs import WORKER_OUTCOME_MEMBERS
from pwf.host._context import cause_of, context, guarded, refusal
from pwf.projections.blobs import BLOB_CONFLICT
from pwf.protocol.worker import WorkerResponse

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context
    from pwf.commands.processes import ProcessFacts
    from pwf.events.runs import WorkerOutcome
    from pwf.host import Host
    from pwf.protocol.worker import LaunchEnvelope, WorkerMessage
    from pwf.store import EventStore

__all__ = ["LEASE_MS", "launch", "supervise", "worker"]

T = TypeVar("T")
LEASE_MS: Final = 30_000


def launch(
    host: Host[EventStore], run_id: str, now: int, host_epoch: int | None = None
) -> LaunchEnvelope:
    """Claim a queued or resumable parked run for a new worker and return its envelope."""
    with host.transaction() as tx:
        cause = Cause(operation="worker.launch")
        ctx = context(tx, now, Actor(type="host", id=host.actor.id), cause)
        try:
            with tx.savepoint():
                return launch_run(ctx, run_id, host.new_epoch(), LEASE_MS, host_epoch)
        except sqlite3.IntegrityError as error:
            raise refusal(error) from None


def supervise(
    host: Host[EventStore], operation: str, now: int, decide: Callable[[Context], T]
) -> T:
    """One decision about supervised worker processes, in its own batch."""
    with host.transaction() as tx:
        ctx = context(tx, now, host.actor, Cause(operation=operation))
        try:
            with tx.savepoint():
                return decide(ctx)
        except sqlite3.IntegrityError as error:
            raise refusal(error) from None


def worker(
    host: Host[EventStore], message: WorkerMessage, now: int, facts: ProcessFacts | None = None
) -> WorkerResponse:
    """Answer one worker message; a blob conflict found while recording rejects it.

    ``facts`` are the supervising host's about the pid a ``process.*`` message names.
    """
    try:
        return _answer(host, message, now, facts)
    except BlobConflictError:
        if host.shared is not None:
            raise
        return WorkerResponse(
            message_id=message.message_id, outcome="rejected", error=BLOB_CONFLICT
        )


def _answer(
    host: Host[EventStore], message: WorkerMessage, now: int, facts: ProcessFacts | None
) -> WorkerResponse:
    with host.transaction() as tx:
        ctx = context(tx, now, Actor(type="system", id=message.worker_epoch), cause_of(message))
        early = check_worker(ctx, message)
        if early is not None:
            return early
        answered = guarded(tx, lambda: _result(ctx, message, facts))
        if isinstance(answered, CommandError):
            outcome: WorkerOutcome = "rejected"
            result = Result(outcome="rejected", error=str(answered))
        else:
            outcome, result = answered
        revision = _record(ctx, message, result, outcome, now)
    return WorkerResponse(
        message_id=message.message_id,
        outcome=result.outcome,
        revision=revision,
        result=result.receipt,
        error=result.error,
    )


def _result(
    ctx: Context, message: WorkerMessage, facts: ProcessFacts | None
) -> tuple[WorkerOutcome, Result]:
    """The handler's result, whose outcome must be one a worker response carries (DOMAIN §14)."""
    if message.operation in PROCESS_OPERATIONS:
        result = process_operation(ctx, message, facts)
    else:
        handler = WORKER_OPERATIONS.get(message.operation)
        if handler is None:
            raise CommandError("Unknown worker operation")
        result = handler(ctx, message)
    outcome = one_of(result.outcome, WORKER_OUTCOME_MEMBERS)
    if outcome is None:
        raise CommandError(f"A worker message cannot be answered {result.outcome}")
    return outcome, result


def _record(
    ctx: Context, message: WorkerMessage, result: Result, outcome: WorkerOutcome, now: int
) -> int | None:
    """Stage ``worker.message_recorded``; return the revision it names."""
    revision = result.revision if result.revision is not None else run_revision(ctx, message.run_id)
    lease = now + LEASE_MS if result.outcome in ("accepted", "adopted") else None
    ctx.emit(
        WorkerMessageRecorded(
            run_id=message.run_id,
            worker_epoch=message.worker_epoch,
            message_id=message.message_id,
            operation=message.operation,
            fingerprint=message.fingerprint,
            outcome=outcome,
            revision=revision,
            result=raw_or_missing(result.receipt),
            error=result.error,
            lease_expires_at=lease if _still_owner(ctx, message) else None,
        )
    )
    return revision


def _still_owner(ctx: Context, message: WorkerMessage) -> bool:
    owner = ctx.value("SELECT owner_worker_epoch FROM run_queue WHERE run_id = ?", message.run_id)
    return bool(owner == message.worker_epoch)
