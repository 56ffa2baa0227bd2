"""The session view a session subscription is sent (HOST §2.13).

Built on the session rules of :mod:`pwf.commands.sessionview` (the
reservation, the retained terminal, the next eligible message) and
:mod:`pwf.commands.turns` (the open message), read through a command
context.  ``connection`` is the connection the view is for: it decides
whether the session's coordinator is this viewer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands.rows import (
    PENDING_OF_SESSION,
    STARTED_TURN_OF_MESSAGE,
    MessageRow,
    RequestRow,
    select,
)
from pwf.commands.sessions import coordinator
from pwf.commands.sessionview import current_run_id, next_message
from pwf.commands.turns import open_message, turn_record
from pwf.commands.views import view_value
from pwf.views._paging import forward_page
from pwf.views.runs import direct_live, run_view

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context

__all__ = ["SESSION_VIEW_SCHEMA", "session_view"]

SESSION_VIEW_SCHEMA: Final = "pi-workflows.session-view.v1"


_MESSAGES: Final = select(MessageRow, "WHERE target_session_id = ? ORDER BY order_number")


def _interaction(ctx: Context, row: RequestRow) -> dict[str, object]:
    return {
        "attemptId": row.attempt_id,
        "contract": view_value(ctx, row.contract_hash),
        "createdAt": row.created_at,
        "kind": row.kind,
        "requestId": row.request_id,
        "revision": row.revision,
        "runId": row.run_id,
        "status": row.status,
        "targetSessionId": row.target_session_id,
        "updatedAt": row.updated_at,
    }


def _message(ctx: Context, row: MessageRow) -> dict[str, object]:
    return {
        "content": view_value(ctx, row.content_hash),
        "createdAt": row.created_at,
        "kind": row.kind,
        "orderNumber": row.order_number,
        "piSessionEntryId": row.pi_session_entry_id,
        "runId": row.run_id,
        "sourceId": row.source_id,
        "status": row.status,
        "targetSessionId": row.target_session_id,
        "updatedAt": row.updated_at,
        "workflowMessageId": row.workflow_message_id,
    }


def _coordinator_view(
    ctx: Context, session_id: str, connection: str | None, epoch: str | None
) -> dict[str, object] | None:
    """Null without a coordinator; else its epoch, whether it is this viewer, and the report."""
    row = coordinator(ctx, session_id)
    if row is None:
        return None
    active = (connection is not None and row.connection_id == connection) or (
        epoch is not None and row.coordinator_epoch == epoch
    )
    return {
        "active": active,
        "branchReportRequired": not row.branch_reported,
        "epoch": row.coordinator_epoch,
    }


def session_view(
    ctx: Context,
    session_id: str,
    *,
    connection: str | None = None,
    epoch: str | None = None,
    live: Callable[[Context, str], bool] = direct_live,
) -> dict[str, object]:
    """``pi-workflows.session-view.v1`` for the viewer on ``connection`` (or holding ``epoch``)."""
    seat = _coordinator_view(ctx, session_id, connection, epoch)
    run_id = current_run_id(ctx, session_id)
    pending = ctx.fetch_all(PENDING_OF_SESSION, session_id)
    messages = ctx.fetch_all(_MESSAGES, session_id)
    offered = seat is None or (seat["active"] and not seat["branchReportRequired"])
    upcoming = next_message(ctx, session_id) if offered else None
    opened = open_message(ctx, session_id)
    open_turn = None
    if opened is not None:
        open_turn = ctx.fetch(STARTED_TURN_OF_MESSAGE, opened.workflow_message_id)
    return {
        "branchReportRequired": False if seat is None else seat["branchReportRequired"],
        "coordinatorActive": False if seat is None else seat["active"],
        "coordinatorEpoch": None if seat is None else seat["epoch"],
        "nextWorkflowMessageId": None if upcoming is None else upcoming["workflow_message_id"],
        "openWorkflowMessageId": None if opened is None else opened.workflow_message_id,
        "openWorkflowTurn": None if open_turn is None else turn_record(open_turn),
        "pendingInteractionStart": 0,
        "pendingInteractionTotal": len(pending),
        "pendingInteractions": forward_page(pending, lambda row: _interaction(ctx, row)),
        "run": None if run_id is None else run_view(ctx, run_id, live=live),
        "schema": SESSION_VIEW_SCHEMA,
        "sessionId": session_id,
        "workflowMessageStart": 0,
        "workflowMessageTotal": len(messages),
        "workflowMessageWindowComplete": True,
        "workflowMessages": [_message(ctx, row) for row in messages],
    }
