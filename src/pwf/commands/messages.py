"""Creating and cancelling workflow messages (DOMAIN §5.6, §9.2, §9.4, §12.1).

Ids follow §4; order numbers are ``1 + max`` over every message of the
target session.  Creating an existing id returns it unchanged when its
identity matches and refuses otherwise.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

import msgspec

from pwf import canonical
from pwf.commands import Context, refuse
from pwf.commands.ids import message_id, message_key
from pwf.commands.rows import MESSAGE, MessageRow, select
from pwf.commands.views import json_bytes
from pwf.events import MessageCancelled, MessageCreated

if TYPE_CHECKING:
    from pwf.commands.rows import RequestRow
    from pwf.events.interactions import MessageKind

__all__ = ["CONTENT_SCHEMA", "cancel_source", "content", "ensure", "ensure_interaction_message"]

CONTENT_SCHEMA: Final = "pi-workflows.workflow-message-content.v1"
TRIGGERS_TURN: Final[dict[MessageKind, bool]] = {
    "step": True,
    "terminal": True,
    "followUp": True,
    "decision": False,
    "notification": False,
}


def content(kind: MessageKind, text: str, details: dict[str, object]) -> dict[str, object]:
    """The message content envelope; ``triggerTurn`` follows the kind (0.16.1)."""
    return {
        "content": text,
        "customType": f"pi-workflows.{kind}",
        "details": details,
        "display": True,
        "schema": CONTENT_SCHEMA,
        "triggerTurn": TRIGGERS_TURN[kind],
    }


def ensure(  # noqa: PLR0913 - a message's identity has this many parts
    ctx: Context,
    *,
    kind: MessageKind,
    source_id: str,
    key: str,
    run_id: str,
    session_id: str,
    text: str,
    details: dict[str, object],
) -> str:
    """Create the message for (kind, source, key) unless it exists; return its id."""
    mid = message_id(kind, source_id, key)
    body = canonical.encode(content(kind, text, {**details, "workflowMessageId": mid}))
    existing = ctx.fetch(MESSAGE, mid)
    if existing is not None:
        identity = (run_id, session_id, kind, source_id, hashlib.sha256(body).digest())
        if identity != (
            existing.run_id,
            existing.target_session_id,
            existing.kind,
            existing.source_id,
            existing.content_hash,
        ):
            raise refuse(f"Workflow message idempotency conflict: {mid}")
        return mid
    if kind == "step" and ctx.one(
        "SELECT 1 FROM workflow_messages WHERE source_id = ? AND kind = 'step'"
        " AND status = 'pending'",
        source_id,
    ):
        raise refuse(f"Workflow step source already has a pending message: {source_id}")
    order = ctx.value(
        "SELECT coalesce(max(order_number), 0) + 1 FROM workflow_messages"
        " WHERE target_session_id = ?",
        session_id,
    )
    ctx.emit(
        MessageCreated(
            workflow_message_id=mid,
            run_id=run_id,
            target_session_id=session_id,
            kind=kind,
            source_id=source_id,
            content=msgspec.Raw(body),
            order_number=order,
        )
    )
    return mid


_PENDING_OF_SOURCE: Final = select(
    MessageRow, "WHERE source_id = ? AND status = 'pending' ORDER BY order_number"
)


def cancel_source(ctx: Context, source_id: str, kinds: tuple[str, ...] | None = None) -> None:
    """Cancel the pending messages of a source, of the given kinds (all when None)."""
    for row in ctx.fetch_all(_PENDING_OF_SOURCE, source_id):
        if kinds is None or row.kind in kinds:
            ctx.emit(
                MessageCancelled(
                    workflow_message_id=row.workflow_message_id,
                    run_id=row.run_id,
                    target_session_id=row.target_session_id,
                )
            )


def ensure_interaction_message(ctx: Context, request: RequestRow, reason: str) -> str:
    """The step (or decision) message of a request at its current revision (§9.2)."""
    kind: MessageKind = "decision" if request.kind == "decision" else "step"
    stored = json_bytes(ctx, request.contract_hash)
    if stored is None:
        raise refuse("Workflow blob is missing")
    contract = canonical.decode(stored)
    details: dict[str, object] = {
        "contract": contract,
        "requestId": request.request_id,
        "revision": request.revision,
        "runId": request.run_id,
    }
    if kind == "step":
        details["reason"] = reason
    prompt = contract.get("prompt") if isinstance(contract, dict) else None
    text = prompt if isinstance(prompt, str) and prompt.strip() else f"Workflow {kind} request"
    return ensure(
        ctx,
        kind=kind,
        source_id=request.request_id,
        key=message_key(request.revision, reason),
        run_id=request.run_id,
        session_id=request.target_session_id,
        text=text,
        details=details,
    )
