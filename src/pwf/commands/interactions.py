"""Interactive requests and submissions: create, submit, settle, update, answer (§5.4, §5.5, §9).

Imports commands, events and errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.commands import Context, Result, refuse
from pwf.commands.ids import continuation_run_id
from pwf.commands.messages import cancel_source, ensure_interaction_message
from pwf.commands.payload import members, text
from pwf.commands.rows import (
    ATTEMPT,
    CHECKPOINT,
    REQUEST,
    Query,
    RequestRow,
    StoredSubmissionRow,
)
from pwf.commands.runs import (
    get_run,
    live_owner,
    queue_of,
    require_run_id,
    reserve,
    revision_of,
    template_of,
)
from pwf.events import (
    InteractionRequested,
    InteractionSettled,
    RunUpdatePublished,
    SubmissionFinished,
    SubmissionRecorded,
)
from pwf.protocol.schemas import Continuation, Decided, Submitted, Updated, receipt

if TYPE_CHECKING:
    from pwf.events.interactions import RequestKind, SubmissionOutcome, Verdict
    from pwf.protocol.client import ClientRequest

__all__ = [
    "checkpoint_answer",
    "create_request",
    "decision_answer",
    "finish_validation",
    "interaction_submit",
    "interaction_update",
    "record_submission",
]


_STORED_SUBMISSION: Final = (
    "SELECT s.submission_id, s.request_id, s.payload_hash, s.outcome, b.content AS receipt"
    " FROM interactive_submissions s LEFT JOIN blobs b ON b.blob_hash = s.receipt_hash"
)
_SAME_KEY: Final = Query(
    StoredSubmissionRow, f"{_STORED_SUBMISSION} WHERE s.request_id = ? AND s.idempotency_key = ?"
)
_SUBMISSION: Final = Query(StoredSubmissionRow, f"{_STORED_SUBMISSION} WHERE s.submission_id = ?")


def get_request(ctx: Context, request_id: str) -> RequestRow | None:
    """The interactive request row, or None."""
    return ctx.fetch(REQUEST, request_id)


def create_request(  # noqa: PLR0913 - a request's identity has this many parts
    ctx: Context,
    *,
    request_id: str,
    run_id: str,
    attempt_id: str,
    session_id: str,
    kind: RequestKind,
    contract: object,
) -> RequestRow:
    """Create, re-ensure or reopen a request (§5.4 table, §9.1)."""
    contract_raw = canonical.raw(contract)
    existing = get_request(ctx, request_id)
    if existing is not None:
        if (existing.run_id, existing.attempt_id, existing.contract_hash) != (
            run_id,
            attempt_id,
            canonical.digest(contract),
        ):
            raise refuse(f"Interactive request conflicts: {request_id}")
        if existing.status == "pending":
            ensure_interaction_message(ctx, existing, "initial")
            return existing
        if existing.status != "settled" or existing.consumed_at is not None:
            return existing
        reopened = InteractionRequested(
            request_id=request_id,
            run_id=run_id,
            attempt_id=attempt_id,
            target_session_id=existing.target_session_id,
            kind=existing.kind,
            contract=contract_raw,
            revision=existing.revision + 1,
            reopened=True,
        )
        return _requested(ctx, reopened, "resumed")
    if ctx.one("SELECT 1 FROM interactive_requests WHERE attempt_id = ?", attempt_id):
        raise refuse(f"Interactive request conflicts: {request_id}")
    created = InteractionRequested(
        request_id=request_id,
        run_id=run_id,
        attempt_id=attempt_id,
        target_session_id=session_id,
        kind=kind,
        contract=contract_raw,
        revision=1,
    )
    return _requested(ctx, created, "initial")


def _requested(ctx: Context, event: InteractionRequested, reason: str) -> RequestRow:
    """Record a request (new or reopened) and ensure its message; the request as it now is."""
    ctx.emit(event)
    row = get_request(ctx, event.request_id)
    assert row is not None
    ensure_interaction_message(ctx, row, reason)
    return row


def settle(ctx: Context, request: RequestRow, submission_id: str) -> None:
    """Settle a pending request and cancel its step and decision messages (§9.4)."""
    ctx.emit(
        InteractionSettled(
            request_id=request.request_id,
            run_id=request.run_id,
            submission_id=submission_id,
            revision=request.revision + 1,
        )
    )
    cancel_source(ctx, request.request_id, ("step", "decision"))


REJECTED_DEFAULT: Final = "Workflow step output failed validation"
"""The error of a rejected submission whose receipt names none (HOST.md §6.3)."""


def record_submission(  # noqa: PLR0913 - a submission has this many facts
    ctx: Context,
    *,
    request: RequestRow,
    submission_id: str,
    key: str,
    expected_revision: int | None,
    value: object,
    outcome: SubmissionOutcome,
) -> Result | None:
    """Record a submission (§5.5); an adopted one returns its stored answer."""
    same_key = ctx.fetch(_SAME_KEY, request.request_id, key)
    if same_key is not None:
        return _adopted(request, same_key, value)
    if outcome == "validating" and ctx.one(
        "SELECT 1 FROM interactive_submissions WHERE request_id = ? AND outcome = 'validating'",
        request.request_id,
    ):
        raise refuse("Interactive submission validation is already active")
    if request.status != "pending" or (
        expected_revision is not None and expected_revision != request.revision
    ):
        raise refuse("Interactive request revision conflict")
    if ctx.one("SELECT 1 FROM interactive_submissions WHERE submission_id = ?", submission_id):
        raise refuse(f"Interactive submission already exists: {submission_id}")
    receipt = (
        canonical.raw(_plain_receipt(request, submission_id))
        if outcome == "accepted"
        else canonical.MISSING
    )
    ctx.emit(
        SubmissionRecorded(
            submission_id=submission_id,
            request_id=request.request_id,
            run_id=request.run_id,
            idempotency_key=key,
            request_revision=request.revision,
            payload=canonical.raw(value),
            outcome=outcome,
            receipt=receipt,
        )
    )
    if outcome == "accepted":
        settle(ctx, request, submission_id)
    return None


def _plain_receipt(request: RequestRow, submission_id: str) -> dict[str, object]:
    """A submission's plain receipt, as an accepted one records it: its request and its id."""
    return {"requestId": request.request_id, "submissionId": submission_id}


def _adopted(request: RequestRow, stored: StoredSubmissionRow, value: object) -> Result:
    """The answer to a retried submission, from the first one's stored state (HOST.md §6).

    A rejected first submission answers ``rejected`` with its stored receipt
    and error; any other is adopted with its stored receipt (ADR 0011).  The
    retry must carry the first one's value.
    """
    if stored.payload_hash != canonical.digest(value):
        raise refuse("Interactive submission idempotency key conflicts")
    receipt = (
        canonical.decode(stored.receipt)
        if stored.receipt is not None
        else _plain_receipt(request, stored.submission_id)
    )
    run_id = request.run_id
    if stored.outcome == "rejected":
        error = receipt.get("error") if isinstance(receipt, dict) else None
        return Result(
            outcome="rejected",
            receipt=receipt,
            error=error if isinstance(error, str) and error else REJECTED_DEFAULT,
            run_id=run_id,
        )
    return Result(outcome="adopted", receipt=receipt, run_id=run_id)


def finish_validation(
    ctx: Context, submission_id: str, outcome: Verdict, receipt: dict[str, object]
) -> object:
    """Finish a validating submission; idempotent when it already has ``outcome`` (§5.5).

    Returns the receipt: ``receipt`` when this call finishes it, else the stored one.
    """
    row = ctx.fetch(_SUBMISSION, submission_id)
    if row is None:
        raise refuse(f"Interactive submission not found: {submission_id}")
    if row.outcome == outcome and row.receipt is not None:
        return canonical.decode(bytes(row.receipt))
    if row.outcome != "validating":
        raise refuse("Interactive submission is not awaiting validation")
    request = get_request(ctx, row.request_id)
    assert request is not None
    ctx.emit(
        SubmissionFinished(
            submission_id=submission_id,
            request_id=row.request_id,
            run_id=request.run_id,
            outcome=outcome,
            receipt=canonical.raw(receipt),
        )
    )
    if outcome == "accepted":
        if request.status != "pending":
            raise refuse("Interactive request revision conflict")
        settle(ctx, request, submission_id)
    return receipt


# ------------------------------------------------------------------ client operations


def _answerable(
    ctx: Context, request: ClientRequest, payload: dict[str, object]
) -> RequestRow | Result:
    """The request a submit/update names, or the outcome that refuses it."""
    run_id = require_run_id(request)
    request_id = text(payload, "requestId")
    row = get_request(ctx, request_id)
    if row is None or row.run_id != run_id or row.kind == "decision":
        # Decisions are answered through decision.answer only (protected human answers).
        return Result(outcome="notFound", error=f"Interactive request not found: {request_id}")
    run = get_run(ctx, run_id)
    if run is not None and run.paused:
        return Result(outcome="conflict", error="Workflow run is paused")
    attempt = ctx.fetch(ATTEMPT, row.attempt_id)
    step = payload.get("step")
    if (
        payload.get("attempt") != row.attempt_id
        or attempt is None
        or (step is not None and step != attempt.node_id)
    ):
        return Result(outcome="conflict", error="Interactive request attempt is stale")
    return row


def _submitted(
    ctx: Context,
    request: ClientRequest,
    answered: RequestRow,
    value: object,
    outcome: SubmissionOutcome,
) -> tuple[str, Result | None]:
    """Record the submission a client request carries: its id, and the stored answer if adopted."""
    submission_id = text(members(request.payload), "submissionId")
    adopted = record_submission(
        ctx,
        request=answered,
        submission_id=submission_id,
        key=request.idempotency_key,
        expected_revision=request.expected_revision,
        value=value,
        outcome=outcome,
    )
    return submission_id, adopted


def interaction_submit(ctx: Context, request: ClientRequest) -> Result:
    """``interaction.submit``: record a validating submission; the response awaits the verdict."""
    payload = members(request.payload)
    found = _answerable(ctx, request, payload)
    if isinstance(found, Result):
        return found
    submission_id, adopted = _submitted(ctx, request, found, payload.get("value"), "validating")
    if adopted is not None:
        return adopted
    return Result(
        receipt=receipt(Submitted(request_id=found.request_id, submission_id=submission_id)),
        revision=found.revision,
        run_id=found.run_id,
        awaiting=submission_id,
    )


def interaction_update(ctx: Context, request: ClientRequest) -> Result:
    """``interaction.update``: publish a progress update on the run's trace."""
    payload = members(request.payload)
    found = _answerable(ctx, request, payload)
    if isinstance(found, Result):
        return found
    if found.status != "pending":
        return Result(outcome="conflict", error="Interactive request attempt is stale")
    if request.expected_revision != found.revision:
        return Result(outcome="conflict", error="Interactive request revision is stale")
    if live_owner(ctx, found.run_id):
        return Result(outcome="claimLost", error="Interactive run is not available for update")
    value = members(payload.get("value"), "value")
    sequence = 1 + int(
        ctx.value(
            "SELECT coalesce(max(sequence), 0) FROM run_updates WHERE run_id = ?", found.run_id
        )
    )
    update = value.get("update")
    ctx.emit(
        RunUpdatePublished(
            run_id=found.run_id,
            sequence=sequence,
            request_id=found.request_id,
            attempt_id=found.attempt_id,
            update=canonical.raw(update),
        )
    )
    updated = Updated(
        attempt_id=found.attempt_id,
        request_id=found.request_id,
        sequence=sequence,
        update=update,
    )
    return Result(receipt=receipt(updated), revision=sequence, run_id=found.run_id)


def checkpoint_answer(ctx: Context, request: ClientRequest) -> Result:
    """``checkpoint.answer``: continue a run parked at an ordinary checkpoint (§12.3)."""
    parent_id = require_run_id(request)
    payload = members(request.payload)
    parent = get_run(ctx, parent_id)
    if parent is None:
        return Result(outcome="notFound", error=f"Checkpoint run not found: {parent_id}")
    child_id = text(payload, "continuationRunId")
    checkpoint = ctx.fetch(CHECKPOINT, parent_id)
    queue = queue_of(ctx, parent_id)
    waiting = (
        checkpoint is not None
        and checkpoint.continuation_run_id is None
        and parent.status == "waiting"
        and queue is not None
        and queue.status == "parked"
    )
    if not waiting:
        if checkpoint is not None and checkpoint.continuation_run_id is not None:
            answered = Continuation(
                already_answered=True,
                detail="Checkpoint already answered",
                parent_run_id=parent_id,
                run_id=checkpoint.continuation_run_id,
            )
            return Result(outcome="adopted", receipt=receipt(answered), run_id=parent_id)
        if ctx.one(
            "SELECT 1 FROM interactive_requests WHERE run_id = ? AND kind = 'decision'"
            " AND status = 'pending'",
            parent_id,
        ):
            return Result(
                outcome="rejected", error="Protected human decisions require a human channel"
            )
        return Result(outcome="rejected", error="Workflow run is not waiting at a checkpoint")
    template = template_of(ctx, parent, canonical.raw(payload.get("input")))
    reserve(ctx, run_id=child_id, template=template, parent_id=parent_id, lineage="continuation",
            restart_number=parent.restart_number)  # fmt: skip
    child = get_run(ctx, child_id)
    assert child is not None
    return Result(
        receipt=receipt(
            Continuation(parent_run_id=parent_id, run_id=child_id, status=child.status)
        ),
        revision=revision_of(ctx, child_id),
        run_id=parent_id,
    )


def decision_answer(ctx: Context, request: ClientRequest) -> Result:
    """``decision.answer``: settle a decision and prepare its continuation run."""
    payload = members(request.payload)
    request_id = text(payload, "requestId")
    row = get_request(ctx, request_id)
    if row is None or row.kind != "decision":
        return Result(outcome="notFound", error=f"Decision request not found: {request_id}")
    parent = get_run(ctx, row.run_id)
    assert parent is not None
    if parent.paused:
        return Result(outcome="conflict", error="Workflow run is paused")
    response = payload.get("response")
    child_id = continuation_run_id(request_id)
    if row.status == "settled" or get_run(ctx, child_id) is not None:
        return Result(outcome="conflict", error="Another human decision answer already won")
    _, adopted = _submitted(ctx, request, row, response, "accepted")
    if adopted is not None:
        return adopted
    template = template_of(
        ctx, parent, canonical.raw({"decision": response, "requestId": request_id})
    )
    reserve(ctx, run_id=child_id, template=template, parent_id=row.run_id,
            lineage="continuation", restart_number=parent.restart_number)  # fmt: skip
    decided = Decided(
        decision=response, parent_run_id=row.run_id, request_id=request_id, run_id=child_id
    )
    return Result(receipt=receipt(decided), revision=revision_of(ctx, child_id), run_id=row.run_id)
