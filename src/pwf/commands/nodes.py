"""Worker operations on node attempts and their interactions (§9, §14).

``node.started``, ``node.finished``, ``node.failed``, ``interaction.request``,
``store.createHumanDecisionRequest``, ``interaction.accept``,
``interaction.reject`` and ``notification.request``.  Imports commands,
events, protocol and errors; :mod:`pwf.commands.workers` guards them and
routes worker messages to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from pwf import canonical
from pwf.commands import Context, Result, refuse
from pwf.commands.ids import interaction_request_id, notification_id
from pwf.commands.interactions import create_request, finish_validation, get_request
from pwf.commands.messages import ensure
from pwf.commands.payload import members, members_or_none, positive_int, text
from pwf.commands.rows import (
    ATTEMPT,
    AttemptRow,
    Query,
    RequestRow,
    SubmissionOfAttemptRow,
    select,
)
from pwf.commands.runs import get_run
from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    InteractionConsumed,
    RunWaiting,
    WorkerEnded,
)

if TYPE_CHECKING:
    from pwf.events.interactions import RequestKind
    from pwf.protocol.worker import WorkerMessage

__all__ = [
    "create_decision",
    "interaction_accept",
    "interaction_reject",
    "interaction_request",
    "node_failed",
    "node_finished",
    "node_started",
    "notification_request",
]

WAITING_FOR_SESSION: Final = "waiting for origin Pi session"


_RUN_ATTEMPT: Final = select(AttemptRow, "WHERE attempt_id = ? AND run_id = ?")
_UNCONSUMED: Final = select(
    RequestRow, "WHERE attempt_id = ? AND status = 'settled' AND consumed_at IS NULL"
)
_SUBMISSIONS: Final = Query(
    SubmissionOfAttemptRow,
    "SELECT s.submission_id, s.outcome, r.request_id, r.attempt_id"
    " FROM interactive_submissions s JOIN interactive_requests r"
    " ON r.request_id = s.request_id WHERE r.run_id = ?"
    " ORDER BY s.submitted_at, s.submission_id",
)


def _attempt(ctx: Context, message: WorkerMessage) -> AttemptRow:
    if message.attempt_id is None:
        raise refuse(f"{message.operation} requires attemptId")
    row = ctx.fetch(_RUN_ATTEMPT, message.attempt_id, message.run_id)
    if row is None:
        raise refuse(f"Workflow node attempt not found: {message.attempt_id}")
    return row


def _unfinished(ctx: Context, message: WorkerMessage) -> AttemptRow:
    """The message's attempt, which must not have ended yet."""
    row = _attempt(ctx, message)
    if row.status in ("completed", "failed", "timed_out", "cancelled"):
        raise refuse(f"Workflow node attempt already finished: {row.attempt_id}")
    return row


def node_started(ctx: Context, message: WorkerMessage) -> Result:
    """``node.started``: a new attempt of a node; its deadline is ``now + timeoutMs``."""
    payload = members(message.payload)
    if message.attempt_id is None:
        raise refuse("node.started requires attemptId")
    node_id = text(payload, "nodeId")
    if ctx.one("SELECT 1 FROM node_attempts WHERE attempt_id = ?", message.attempt_id):
        raise refuse(f"Workflow node attempt already exists: {message.attempt_id}")
    if ctx.one(
        "SELECT 1 FROM node_attempts WHERE run_id = ?"
        " AND status IN ('pending', 'running', 'waiting')",
        message.run_id,
    ):
        raise refuse("Workflow run already has an active node attempt")
    timeout = positive_int(payload.get("timeoutMs"))
    number = 1 + int(
        ctx.value(
            "SELECT coalesce(max(attempt_number), 0) FROM node_attempts"
            " WHERE run_id = ? AND node_id = ?",
            message.run_id,
            node_id,
        )
    )
    ctx.emit(
        AttemptStarted(
            run_id=message.run_id,
            attempt_id=message.attempt_id,
            node_id=node_id,
            attempt_number=number,
            deadline_at=None if timeout is None else ctx.now + timeout,
        )
    )
    return Result(receipt={"attemptId": message.attempt_id, "attemptNumber": number})


def node_finished(ctx: Context, message: WorkerMessage) -> Result:
    """``node.finished``: the attempt completed; a settled request of it is consumed."""
    attempt = _unfinished(ctx, message)
    payload = members_or_none(message.payload)
    ctx.emit(
        AttemptChanged(
            run_id=message.run_id,
            attempt_id=attempt.attempt_id,
            status="completed",
            output=canonical.raw(payload.get("output")),
        )
    )
    request = ctx.fetch(_UNCONSUMED, attempt.attempt_id)
    if request is not None:
        ctx.emit(InteractionConsumed(request_id=request.request_id, run_id=message.run_id))
    return Result(receipt={"attemptId": attempt.attempt_id, "status": "completed"})


def node_failed(ctx: Context, message: WorkerMessage) -> Result:
    """``node.failed``: the attempt failed (or timed out)."""
    attempt = _unfinished(ctx, message)
    payload = members_or_none(message.payload)
    status: Literal["timed_out", "failed"] = (
        "timed_out" if payload.get("timedOut") is True else "failed"
    )
    ctx.emit(AttemptChanged(run_id=message.run_id, attempt_id=attempt.attempt_id, status=status))
    return Result(receipt={"attemptId": attempt.attempt_id, "status": status})


def _park_for_interaction(ctx: Context, message: WorkerMessage, attempt: AttemptRow) -> None:
    ctx.emit(AttemptChanged(run_id=message.run_id, attempt_id=attempt.attempt_id, status="waiting"))
    ctx.emit(RunWaiting(run_id=message.run_id, detail=WAITING_FOR_SESSION))
    ctx.emit(WorkerEnded(run_id=message.run_id, worker_epoch=message.worker_epoch, status="exited"))


def interaction_request(ctx: Context, message: WorkerMessage) -> Result:
    """``interaction.request`` (§9.1): create or re-ensure the request, then park the run."""
    payload = members(message.payload)
    kind: RequestKind = "assistant" if payload.get("kind") == "assistant" else "agent"
    return _request_and_park(ctx, message, kind, payload, "an interaction")


def create_decision(ctx: Context, message: WorkerMessage) -> Result:
    """``store.createHumanDecisionRequest``: a decision request (id = decisionId), then park."""
    payload = members(message.payload)
    return _request_and_park(ctx, message, "decision", payload, "a decision")


def _request_and_park(
    ctx: Context,
    message: WorkerMessage,
    kind: RequestKind,
    payload: dict[str, object],
    what: str,
) -> Result:
    """Create or re-ensure the attempt's request of ``kind``, then park on it while pending.

    A decision's id is its ``decisionId``; any other request's is derived from its attempt.
    """
    attempt = _unfinished(ctx, message)
    run = get_run(ctx, message.run_id)
    assert run is not None
    if run.origin_session_id is None:
        raise refuse(f"Workflow run has no origin Pi session for {what}")
    request_id = (
        text(payload, "decisionId")
        if kind == "decision"
        else interaction_request_id(message.run_id, attempt.attempt_id)
    )
    row = create_request(
        ctx,
        request_id=request_id,
        run_id=message.run_id,
        attempt_id=attempt.attempt_id,
        session_id=run.origin_session_id,
        kind=kind,
        contract=payload.get("contract"),
    )
    # Park the run when its request is pending; a consumed or cancelled one changes nothing.
    current = get_request(ctx, row.request_id)
    assert current is not None
    if current.status == "pending":
        _park_for_interaction(ctx, message, attempt)
    receipt = {"requestId": row.request_id, "revision": current.revision, "status": current.status}
    return Result(receipt=receipt)


def _validating(ctx: Context, message: WorkerMessage) -> SubmissionOfAttemptRow:
    payload = members_or_none(message.payload)
    wanted = payload.get("submissionId")
    for row in ctx.fetch_all(_SUBMISSIONS, message.run_id):
        if row.submission_id == wanted or (wanted is None and row.outcome == "validating"):
            return row
    raise refuse("Interactive submission is not awaiting validation")


def interaction_accept(ctx: Context, message: WorkerMessage) -> Result:
    """``interaction.accept``: the submission is accepted and settles its request."""
    row = _validating(ctx, message)
    receipt = finish_validation(ctx, row.submission_id, "accepted", {"status": "accepted"})
    return Result(receipt={"receipt": receipt, "submissionId": row.submission_id})


def interaction_reject(ctx: Context, message: WorkerMessage) -> Result:
    """``interaction.reject``: the submission is rejected; the run parks waiting again (§9.3)."""
    payload = members(message.payload)
    error = text(payload, "error")
    row = _validating(ctx, message)
    receipt = finish_validation(
        ctx, row.submission_id, "rejected", {"error": error, "status": "rejected"}
    )
    attempt = ctx.fetch(ATTEMPT, row.attempt_id)
    if attempt is not None and attempt.status in ("running", "interrupted"):
        ctx.emit(AttemptChanged(run_id=message.run_id, attempt_id=row.attempt_id, status="waiting"))
    ctx.emit(RunWaiting(run_id=message.run_id, detail=error))
    ctx.emit(WorkerEnded(run_id=message.run_id, worker_epoch=message.worker_epoch, status="exited"))
    return Result(receipt={"receipt": receipt, "submissionId": row.submission_id})


def notification_request(ctx: Context, message: WorkerMessage) -> Result:
    """``notification.request``: queue a notification message for the run's session."""
    payload = members(message.payload)
    attempt = _attempt(ctx, message)
    index = positive_int(payload.get("notificationIndex"))
    if index is None:
        raise refuse("notificationIndex must be a positive integer")
    kind = payload.get("kind")
    if kind not in ("progress", "final"):
        raise refuse("Workflow notification kind must be progress or final")
    provenance = payload.get("provenance")
    if not isinstance(provenance, dict) or provenance.get("runId") != message.run_id:
        raise refuse("Workflow notification provenance does not match its run")
    run = get_run(ctx, message.run_id)
    assert run is not None
    if run.origin_session_id is None:
        raise refuse("Workflow run has no origin Pi session for a notification")
    source = notification_id(message.run_id, attempt.attempt_id, index)
    body = text(payload, "text")
    mid = ensure(
        ctx,
        kind="notification",
        source_id=source,
        key="initial",
        run_id=message.run_id,
        session_id=run.origin_session_id,
        text=body,
        details={"kind": kind, "notificationId": source, "provenance": provenance},
    )
    return Result(receipt={"notificationId": source, "workflowMessageId": mid})
