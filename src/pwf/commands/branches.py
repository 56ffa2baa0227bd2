"""Branch reports: a coordinator says which messages its session shows (DOMAIN §11).

Imports commands (sessions and turns among them), events and errors.
A message the branch shows is marked sent with its entry as evidence; an idle
branch with nothing pending proves the session's open turns lost, and a sent
request message it does not show is presented again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands import Context, Result, refuse
from pwf.commands.messages import cancel_source, ensure_interaction_message
from pwf.commands.payload import members, text
from pwf.commands.rows import PENDING_OF_SESSION, REQUEST, MessageRow, TurnRow, select
from pwf.commands.sessions import live_coordinator, session_resumed
from pwf.commands.turns import end_turn, message_of
from pwf.events import (
    BranchReported,
    MessageSent,
)
from pwf.protocol.schemas import BranchRecorded, receipt

if TYPE_CHECKING:
    from pwf.protocol.client import ClientRequest

__all__ = ["report_branch"]


def _entries(payload: dict[str, object]) -> dict[str, str]:
    entries = payload.get("entries")
    if not isinstance(entries, list):
        raise refuse("Workflow branch entries must be an array")
    found: dict[str, str] = {}
    for item in entries:
        if not isinstance(item, dict):
            raise refuse("Workflow branch entries must be objects")
        message_id = text(item, "workflowMessageId")
        entry_id = text(item, "piSessionEntryId")
        if message_id in found:
            raise refuse("Workflow branch report has duplicate messages")
        found[message_id] = entry_id
    return found


def _flag(payload: dict[str, object], name: str) -> bool:
    value = payload.get(name)
    if not isinstance(value, bool):
        raise refuse(f"{name} must be a boolean")
    return value


_STARTED_TURNS: Final = select(
    TurnRow,
    "WHERE target_session_id = ? AND state = 'started' ORDER BY started_at, workflow_turn_id",
)
_OF_SOURCE: Final = select(MessageRow, "WHERE source_id = ?")


def report_branch(ctx: Context, request: ClientRequest) -> Result:
    """``workflowMessage.reportBranch`` (§11.1)."""
    payload = members(request.payload)
    entries = _entries(payload)
    is_idle = _flag(payload, "isIdle")
    has_pending = _flag(payload, "hasPendingMessages")
    row = live_coordinator(ctx, payload)
    session_id, epoch = row.target_session_id, row.coordinator_epoch
    if not row.branch_reported:
        session_resumed(ctx, session_id)
    _evidence(ctx, session_id, entries)
    if is_idle and not has_pending:
        _idle(ctx, session_id, entries)
    ctx.emit(
        BranchReported(
            target_session_id=session_id,
            coordinator_epoch=epoch,
            is_idle=is_idle,
            has_pending_messages=has_pending,
        )
    )
    return Result(receipt=receipt(BranchRecorded(coordinator_epoch=epoch, recorded=True)))


def _evidence(ctx: Context, session_id: str, entries: dict[str, str]) -> None:
    for message_id, entry_id in entries.items():
        message = message_of(ctx, message_id)
        if message is None or message.target_session_id != session_id:
            raise refuse(f"Workflow branch report contains an unknown message: {message_id}")
        if message.status == "sent":
            if message.pi_session_entry_id != entry_id:
                raise refuse("Workflow message has conflicting Pi session entry evidence")
            continue
        ctx.emit(
            MessageSent(
                workflow_message_id=message_id,
                run_id=message.run_id,
                target_session_id=session_id,
                pi_session_entry_id=entry_id,
            )
        )


def _idle(ctx: Context, session_id: str, entries: dict[str, str]) -> None:
    """An idle branch proves open turns lost; unseen sent requests are presented again."""
    for turn in ctx.fetch_all(_STARTED_TURNS, session_id):
        end_turn(ctx, turn, "lost", None)
    for request in ctx.fetch_all(PENDING_OF_SESSION, session_id):
        messages = ctx.fetch_all(_OF_SOURCE, request.request_id)
        sent = any(message.status == "sent" for message in messages)
        seen = any(message.workflow_message_id in entries for message in messages)
        if sent and not seen:
            cancel_source(ctx, request.request_id)
            fresh = ctx.fetch(REQUEST, request.request_id)
            assert fresh is not None
            reason = "initial" if fresh.kind == "decision" else "resumed"
            ensure_interaction_message(ctx, fresh, reason)
