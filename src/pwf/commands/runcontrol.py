"""Run control: pause, resume, cancel, and the end of a run (§5.2, §8, §12.3).

Imports commands (its runs room for reading runs), events, protocol and
errors.  Returned refusals are recorded with the command; raised ones
(``refuse``) are not (§7.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.commands import Context, Result, raw_or_missing, refuse
from pwf.commands.deadlines import resume_shift
from pwf.commands.ids import message_id, terminal_fingerprint, terminal_source_id
from pwf.commands.messages import cancel_source, ensure, ensure_interaction_message
from pwf.commands.rows import (
    REQUEST,
    AttemptRow,
    FollowUpRow,
    RequestRow,
    SubmissionRow,
    WorkerRow,
    select,
)
from pwf.commands.runs import (
    TERMINAL,
    get_run,
    live_owner,
    queue_of,
    require_run_id,
    revision_of,
)
from pwf.commands.views import stored_json
from pwf.events import (
    AttemptChanged,
    FollowUpClosed,
    InteractionCancelled,
    InteractionRevised,
    RunFinished,
    RunPaused,
    RunResumed,
    RunWaiting,
    SubmissionFinished,
    WorkerEnded,
)
from pwf.protocol.schemas import Cancelled, Paused, Resumed, receipt

if TYPE_CHECKING:
    from pwf.commands.rows import QueueRow, RunRow
    from pwf.events.runs import EndedQueueStatus, TerminalStatus
    from pwf.protocol.client import ClientRequest

__all__ = [
    "cancel_request",
    "ensure_terminal_message",
    "finish_run",
    "pending_requests",
    "resume_interaction",
    "run_cancel",
    "run_pause",
    "run_resume",
]

WAITING_DETAIL: Final = "waiting for origin-session input"
ACTIVE_ATTEMPT: Final = ("pending", "running", "waiting", "interrupted")
_QUEUE_AFTER: Final[dict[TerminalStatus, EndedQueueStatus]] = {
    "completed": "done",
    "cancelled": "cancelled",
}
"""Where a finished run's queue entry goes; every other terminal status fails it."""


_PENDING: Final = select(
    RequestRow, "WHERE run_id = ? AND status = 'pending' ORDER BY created_at, request_id"
)
_RUNNING_ATTEMPTS: Final = select(
    AttemptRow, "WHERE run_id = ? AND status IN ('pending', 'running')"
)
_ACTIVE_ATTEMPTS: Final = select(AttemptRow, "WHERE run_id = ? AND status IN (?, ?, ?, ?)")
_VALIDATING: Final = select(
    SubmissionRow,
    "WHERE request_id = ? AND outcome = 'validating' ORDER BY submitted_at, submission_id",
)
_QUEUED_FOLLOW_UPS: Final = select(
    FollowUpRow, "WHERE run_id = ? AND status = 'queued' ORDER BY order_number"
)
_SUPERVISED: Final = select(
    WorkerRow, "WHERE run_id = ? AND host_epoch = ? AND status IN ('starting', 'running')"
)


def pending_requests(ctx: Context, run_id: str) -> list[RequestRow]:
    """Pending interactive requests of a run, oldest first."""
    return ctx.fetch_all(_PENDING, run_id)


def _paused_receipt(run_id: str) -> dict[str, object]:
    return receipt(
        Paused(already_paused=False, detail="paused", paused=True, run_id=run_id, status="parked")
    )


def _run_and_queue(
    ctx: Context, request: ClientRequest, refusal: str
) -> tuple[str, RunRow, QueueRow] | Result:
    """The run a control request names and its queue entry, else ``refusal`` as the outcome."""
    run_id = require_run_id(request)
    run = get_run(ctx, run_id)
    queue = queue_of(ctx, run_id)
    if run is None or queue is None:
        return Result(outcome="rejected", error=refusal, run_id=run_id)
    return run_id, run, queue


def run_pause(ctx: Context, request: ClientRequest) -> Result:
    """``run.pause`` (§5.2, §8): stop an active worker, or pause a parked run."""
    found = _run_and_queue(ctx, request, "Run is not pausable")
    if isinstance(found, Result):
        return found
    run_id, run, queue = found
    epoch = queue.owner_worker_epoch
    if epoch is not None and queue.held(ctx.now) and queue.status in ("starting", "running"):
        _stop_worker(ctx, run, epoch, "paused")
        ctx.emit(RunPaused(run_id=run_id, paused_at=ctx.now))
        return Result(
            receipt=_paused_receipt(run_id), revision=revision_of(ctx, run_id), run_id=run_id
        )
    pausable = (
        queue.status == "parked"
        and not live_owner(ctx, run_id)
        and pending_requests(ctx, run_id)
        and run.status in ("running", "waiting")
    )
    if not pausable:
        return Result(outcome="rejected", error="Run is not pausable", run_id=run_id)
    if not run.paused:
        ctx.emit(RunPaused(run_id=run_id, paused_at=ctx.now))
    return Result(receipt=_paused_receipt(run_id), revision=revision_of(ctx, run_id), run_id=run_id)


def _stop_worker(ctx: Context, run: RunRow, worker_epoch: str, detail: str) -> None:
    """End the active worker and park the run (its attempt is interrupted)."""
    ctx.emit(WorkerEnded(run_id=run.run_id, worker_epoch=worker_epoch, status="cancelled"))
    for attempt in ctx.fetch_all(_RUNNING_ATTEMPTS, run.run_id):
        ctx.emit(
            AttemptChanged(run_id=run.run_id, attempt_id=attempt.attempt_id, status="interrupted")
        )
    ctx.emit(RunWaiting(run_id=run.run_id, detail=detail))


def resume_interaction(ctx: Context, run_id: str) -> None:
    """``resumePendingInteraction`` (§9.5): the oldest pending request gets a new message."""
    requests = pending_requests(ctx, run_id)
    if not requests:
        raise refuse("Pending workflow interaction is missing")
    request = requests[0]
    if request.kind == "decision":
        return
    cancel_source(ctx, request.request_id, ("step",))
    ctx.emit(
        InteractionRevised(
            request_id=request.request_id,
            run_id=run_id,
            revision=request.revision + 1,
            reason="resumed",
        )
    )
    fresh = ctx.fetch(REQUEST, request.request_id)
    assert fresh is not None
    ensure_interaction_message(ctx, fresh, "resumed")


def run_resume(ctx: Context, request: ClientRequest) -> Result:
    """``run.resume`` (§8): resume a paused parked interaction, or report what the run is doing."""
    found = _run_and_queue(ctx, request, "Run is not resumable")
    if isinstance(found, Result):
        return found
    run_id, run, queue = found
    parked = queue.status == "parked" and not live_owner(ctx, run_id)
    if parked and run.status == "waiting" and run.paused and pending_requests(ctx, run_id):
        paused_at = run.paused_at if run.paused_at is not None else run.updated_at
        ctx.emit(RunResumed(run_id=run_id, detail=WAITING_DETAIL))
        resume_shift(ctx, run_id, paused_at)
        resume_interaction(ctx, run_id)
        resumed = Resumed(
            already_running=False,
            detail=WAITING_DETAIL,
            paused=False,
            resumable=True,
            run_id=run_id,
            status="parked",
            waiting_for_interaction=True,
        )
        return Result(receipt=receipt(resumed), revision=revision_of(ctx, run_id), run_id=run_id)
    if live_owner(ctx, run_id):
        resumed = Resumed(
            active=True,
            already_running=True,
            detail=run.status_detail,
            resumable=False,
            run_id=run_id,
        )
        return Result(outcome="adopted", receipt=receipt(resumed), run_id=run_id)
    if parked and not run.paused and run.status not in TERMINAL:
        resumed = Resumed(
            already_running=False,
            detail=run.status_detail,
            generation=queue.generation,
            resumable=True,
            run_id=run_id,
        )
        return Result(receipt=receipt(resumed), revision=run.revision, run_id=run_id)
    return Result(outcome="rejected", error="Run is not resumable", run_id=run_id)


# ------------------------------------------------------------------ cancel and terminal results


def _serving_epoch(ctx: Context) -> int | None:
    """The epoch of the live served host, or None (direct mode, or no host table yet)."""
    if ctx.one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'host_state'") is None:
        return None
    epoch = ctx.value(
        "SELECT epoch FROM host_state WHERE host_id IS NOT NULL AND expires_at > ?", ctx.now
    )
    return None if epoch is None else int(epoch)


def _cancel_supervised(ctx: Context, run_id: str, worker: WorkerRow) -> Result:
    """§4.1 paths 1 and 2: cancel with the worker's claim, or ``claimLost`` when it is gone.

    Path 1 (the worker's process is attached): the row stays active, and the
    host stops the process after the commit and records the end as
    ``cancelled``.  Path 2 (claimed, not yet spawned): the pending start is
    dropped here, so the row ends ``cancelled`` and nothing is spawned.
    """
    run = get_run(ctx, run_id)
    queue = queue_of(ctx, run_id)
    if (
        run is None
        or queue is None
        or run.status in TERMINAL
        or queue.owner_worker_epoch != worker.worker_epoch
        or not queue.held(ctx.now)
    ):
        return Result(
            outcome="claimLost", error="Run claim was lost before cancellation", run_id=run_id
        )
    finish_run(ctx, run_id, status="cancelled", detail="cancelled", error="Workflow run cancelled")
    if worker.pid is None:
        ctx.emit(WorkerEnded(run_id=run_id, worker_epoch=worker.worker_epoch, status="cancelled"))
    return Result(
        receipt=receipt(Cancelled(run_id=run_id, status="cancelled")),
        revision=revision_of(ctx, run_id),
        run_id=run_id,
    )


def run_cancel(ctx: Context, request: ClientRequest) -> Result:
    """``run.cancel`` (HOST §4.1): a run this host's worker holds, else a run nobody holds.

    A run nobody holds is cancelled directly when its queue is ``queued`` or
    ``starting`` without an owner; any other non-terminal run without a live
    lease takes the stale path, which the event records as ``staleControl``.
    """
    run_id = require_run_id(request)
    epoch = _serving_epoch(ctx)
    worker = None
    if epoch is not None:
        worker = ctx.fetch(_SUPERVISED, run_id, epoch)
    if worker is not None:
        return _cancel_supervised(ctx, run_id, worker)
    run = get_run(ctx, run_id)
    if run is None or run.status in TERMINAL or live_owner(ctx, run_id):
        return Result(
            outcome="rejected", error="Run has a live owner or is already terminal", run_id=run_id
        )
    queue = queue_of(ctx, run_id)
    direct = (
        queue is not None
        and queue.status in ("queued", "starting")
        and queue.owner_worker_epoch is None
    )
    finish_run(ctx, run_id, status="cancelled", detail="cancelled", stale_control=not direct)
    return Result(
        receipt=receipt(Cancelled(run_id=run_id, status="cancelled")),
        revision=revision_of(ctx, run_id),
        run_id=run_id,
    )


def cancel_request(
    ctx: Context, request: RequestRow, reason: str, kinds: tuple[str, ...] | None = None
) -> None:
    """Cancel a pending request at revision + 1 for ``reason``.

    Its validating submission is rejected with that reason and its pending
    messages (of ``kinds``; all when None) are cancelled first.
    """
    for submission in ctx.fetch_all(_VALIDATING, request.request_id):
        ctx.emit(
            SubmissionFinished(
                submission_id=submission.submission_id,
                request_id=request.request_id,
                run_id=request.run_id,
                outcome="rejected",
                receipt=canonical.raw({"error": reason, "status": "rejected"}),
            )
        )
    cancel_source(ctx, request.request_id, kinds)
    ctx.emit(
        InteractionCancelled(
            request_id=request.request_id,
            run_id=request.run_id,
            revision=request.revision + 1,
            reason=reason,
        )
    )


def _close_interactions(ctx: Context, run_id: str, reason: str) -> None:
    for row in pending_requests(ctx, run_id):
        cancel_request(ctx, row, reason)


def finish_run(  # noqa: PLR0913 - the terminal facts
    ctx: Context,
    run_id: str,
    *,
    status: TerminalStatus,
    detail: str,
    final_output: object = canonical.MISSING,
    error: object = canonical.MISSING,
    error_code: str | None = None,
    reason: str | None = None,
    stale_control: bool = False,
) -> None:
    """End a run: close its interactions and attempts, leave the queue, post the terminal result."""
    _close_interactions(ctx, run_id, f"Workflow run {status}")
    for attempt in ctx.fetch_all(_ACTIVE_ATTEMPTS, run_id, *ACTIVE_ATTEMPT):
        ctx.emit(AttemptChanged(run_id=run_id, attempt_id=attempt.attempt_id, status="cancelled"))
    if status != "completed":
        _cancel_follow_ups(ctx, run_id)
    queue_status = _QUEUE_AFTER.get(status, "failed")
    ctx.emit(
        RunFinished(
            run_id=run_id,
            status=status,
            queue_status=queue_status,
            detail=detail,
            final_output=raw_or_missing(final_output),
            error=raw_or_missing(error),
            error_code=error_code,
            reason=reason,
            stale_control=stale_control,
        )
    )
    ensure_terminal_message(ctx, run_id, reason)


def _cancel_follow_ups(ctx: Context, run_id: str) -> None:
    """A failed, timed-out or cancelled source run cancels its queued follow-ups (§5.8)."""
    for row in ctx.fetch_all(_QUEUED_FOLLOW_UPS, run_id):
        ctx.emit(
            FollowUpClosed(
                follow_up_id=row.follow_up_id,
                run_id=run_id,
                status="cancelled",
                reason="Workflow run ended before delivery",
            )
        )
        cancel_source(ctx, row.follow_up_id)


def _earlier_outcomes(ctx: Context, run: RunRow) -> list[dict[str, object]]:
    chain: list[dict[str, object]] = []
    parent_id = run.parent_run_id
    while parent_id is not None:
        parent = get_run(ctx, parent_id)
        if parent is None:
            break
        if parent.status in TERMINAL:
            chain.append({"runId": parent_id, "status": parent.status})
        parent_id = parent.parent_run_id
    return list(reversed(chain))


def ensure_terminal_message(ctx: Context, run_id: str, reason: str | None) -> str | None:
    """The terminal result message of an interactive run with an origin session (§12.1)."""
    run = get_run(ctx, run_id)
    if run is None or run.execution_mode != "interactive" or run.origin_session_id is None:
        return None
    facts = {
        "error": stored_json(ctx, run.error_hash),
        "finalOutput": stored_json(ctx, run.final_output_hash),
        "input": stored_json(ctx, run.input_hash),
        "reason": reason,
        "status": run.status,
        "workflowRef": run.workflow_ref,
    }
    fingerprint = terminal_fingerprint(facts)
    source = terminal_source_id(run_id)
    terminal = {
        **facts,
        "earlierOutcomes": _earlier_outcomes(ctx, run),
        "restartNumber": run.restart_number,
        "runId": run_id,
        "schema": "pi-workflows.terminal-result.v1",
        "workflowName": run.workflow_name,
    }
    ensure(
        ctx,
        kind="terminal",
        source_id=source,
        key=fingerprint,
        run_id=run_id,
        session_id=run.origin_session_id,
        text=f"Workflow {run.workflow_name} {run.status}",
        details={"terminal": terminal, "terminalFingerprint": fingerprint},
    )
    return message_id("terminal", source, fingerprint)
