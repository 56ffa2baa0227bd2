"""Follow-ups: prompts queued on a run for its origin session (DOMAIN §5.8, §8).

``followUp.queue`` and ``followUp.remove``.  A queued follow-up becomes a
``followUp`` message, offered once the run's chain has finished and its
terminal message's turn has ended.  Imports commands, events and errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.commands import Context, Result, refuse
from pwf.commands.ids import session_request_id
from pwf.commands.messages import cancel_source, ensure
from pwf.commands.payload import members, text
from pwf.commands.rows import FOLLOW_UP, FollowUpRow, RunRow, select
from pwf.commands.runs import get_run
from pwf.commands.sessions import session_check
from pwf.events import FollowUpClosed, FollowUpQueued
from pwf.protocol.schemas import FollowUp, receipt

if TYPE_CHECKING:
    from pwf.protocol.client import ClientRequest

__all__ = ["follow_up_queue", "follow_up_remove"]

MAX_PROMPT_BYTES: Final = 65_536


def _follow_up_id(run_id: str, request_id: str) -> str:
    aggregate = f"{run_id}:{request_id}"
    return "follow_up-" + canonical.text_hex_digest(f"follow_up\0{aggregate}")[:40]


_BY_REQUEST: Final = select(FollowUpRow, "WHERE run_id = ? AND request_id = ?")


def _follow_up_receipt(row: FollowUpRow) -> dict[str, object]:
    return receipt(
        FollowUp(
            follow_up_id=row.follow_up_id,
            order=row.order_number,
            run_id=row.run_id,
            state=row.status,
        )
    )


def _origin_run(
    ctx: Context, request: ClientRequest
) -> tuple[dict[str, object], str, RunRow] | Result:
    """The payload, its checked session and the run it names, or the outcome that refuses it."""
    payload = members(request.payload)
    session_id = session_check(ctx, payload)
    run_id = request.run_id
    if run_id is None:
        raise refuse(f"{request.operation} requires runId")
    run = get_run(ctx, run_id)
    if run is None:
        return Result(outcome="notFound", error=f"Workflow run not found: {run_id}", run_id=run_id)
    if run.origin_session_id != session_id:
        return Result(
            outcome="rejected", error="Workflow run belongs to another Pi session", run_id=run_id
        )
    return payload, session_id, run


def _prompt(payload: dict[str, object]) -> str:
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise refuse("Workflow follow-up prompt must be a non-empty string")
    if len(prompt.encode("utf-8", "surrogatepass")) > MAX_PROMPT_BYTES:
        raise refuse(f"Workflow follow-up prompt cannot exceed {MAX_PROMPT_BYTES} bytes")
    return prompt


def follow_up_queue(ctx: Context, request: ClientRequest) -> Result:
    """``followUp.queue`` (§5.8)."""
    found = _origin_run(ctx, request)
    if isinstance(found, Result):
        return found
    payload, session_id, run = found
    prompt = _prompt(payload)
    request_id = session_request_id(request.client_id, request.idempotency_key)
    existing = ctx.fetch(_BY_REQUEST, run.run_id, request_id)
    if existing is not None:
        return Result(outcome="adopted", receipt=_follow_up_receipt(existing), run_id=run.run_id)
    if run.status not in ("running", "waiting"):
        raise refuse(f"Workflow run {run.run_id} does not accept changes with status {run.status}")
    follow_up_id = _follow_up_id(run.run_id, request_id)
    order = 1 + int(
        ctx.value(
            "SELECT coalesce(max(order_number), 0) FROM workflow_follow_ups WHERE run_id = ?",
            run.run_id,
        )
    )
    ctx.emit(
        FollowUpQueued(
            follow_up_id=follow_up_id,
            run_id=run.run_id,
            request_id=request_id,
            order_number=order,
            target_session_id=session_id,
            actor_type="session",
            actor_id=session_id,
            source_type="client",
            prompt=prompt,
        )
    )
    ensure(
        ctx,
        kind="followUp",
        source_id=follow_up_id,
        key="initial",
        run_id=run.run_id,
        session_id=session_id,
        text=prompt,
        details={"followUpId": follow_up_id, "order": order, "runId": run.run_id},
    )
    row = ctx.fetch(FOLLOW_UP, follow_up_id)
    assert row is not None
    return Result(receipt=_follow_up_receipt(row), run_id=run.run_id)


def follow_up_remove(ctx: Context, request: ClientRequest) -> Result:
    """``followUp.remove`` (§5.8); its refusals are raised, so they are not recorded."""
    found = _origin_run(ctx, request)
    if isinstance(found, Result):
        return found
    payload, _, run = found
    follow_up_id = text(payload, "followUpId")
    row = ctx.fetch(FOLLOW_UP, follow_up_id)
    if row is None or row.run_id != run.run_id:
        raise refuse(f"Workflow follow-up is not part of run {run.run_id}")
    if row.status == "cancelled":
        raise refuse("A cancelled workflow follow-up cannot be removed")
    if row.status == "queued":
        if ctx.one(
            "SELECT 1 FROM workflow_messages WHERE source_id = ? AND status = 'sent'", follow_up_id
        ):
            raise refuse("A sent workflow follow-up cannot be removed")
        ctx.emit(
            FollowUpClosed(
                follow_up_id=follow_up_id,
                run_id=run.run_id,
                status="removed",
                reason="Removed before delivery",
            )
        )
        cancel_source(ctx, follow_up_id)
    return Result(
        receipt=receipt(FollowUp(follow_up_id=follow_up_id, run_id=run.run_id, state="removed")),
        run_id=run.run_id,
    )
