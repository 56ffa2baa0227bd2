"""Model turns: the message a turn binds to, its start and end, and what an end means.

DOMAIN §5.6, §5.7, §10.  Imports commands (sessions among them), events
and errors.  Every deadline move is one ``attempt.deadline_shifted`` event
computed from ``ctx.now``; projectors only copy its numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands import Context, Result, refuse
from pwf.commands.deadlines import begin_turn_shift
from pwf.commands.messages import cancel_source, ensure_interaction_message
from pwf.commands.payload import members
from pwf.commands.rows import (
    MESSAGE,
    REQUEST,
    TURN,
    MessageRow,
    Query,
    RequestRow,
    TurnRow,
    fields,
    select,
)
from pwf.commands.runcontrol import cancel_request, finish_run
from pwf.commands.runs import get_run, live_owner, queue_of
from pwf.commands.sessions import session_check
from pwf.events import (
    InteractionRevised,
    RunPaused,
    TurnEnded,
    TurnStarted,
    one_of,
)
from pwf.events.sessions import STOP_REASONS
from pwf.protocol.schemas import Turn, receipt

if TYPE_CHECKING:
    from pwf.events.sessions import StopReason
    from pwf.protocol.client import ClientRequest

__all__ = [
    "end_turn",
    "latest_turn",
    "message_of",
    "open_message",
    "report_turn",
    "turn_record",
]

UNPRODUCTIVE_LIMIT: Final = 3
UNPRODUCTIVE_ERROR: Final = "Workflow step ended three times without a valid submission"


_OPEN_COLUMNS: Final = ", ".join(f"m.{name}" for name in fields(MessageRow))
_OPEN_MESSAGE: Final = Query(
    MessageRow,
    "SELECT * FROM ("  # noqa: S608 - constants
    f"SELECT * FROM (SELECT {_OPEN_COLUMNS} FROM interactive_requests r"
    " CROSS JOIN workflow_messages m ON m.source_id = r.request_id"
    " JOIN runs ON runs.run_id = m.run_id"
    " WHERE r.status = 'pending' AND m.kind = 'step' AND m.target_session_id = ?"
    " AND m.status = 'sent' AND NOT runs.paused ORDER BY m.order_number DESC LIMIT 1)"
    f" UNION ALL SELECT * FROM (SELECT {_OPEN_COLUMNS} FROM workflow_messages m"
    " INDEXED BY workflow_messages_unread_idx"
    " JOIN runs ON runs.run_id = m.run_id"
    " LEFT JOIN interactive_requests r ON r.request_id = m.source_id"
    " WHERE m.target_session_id = ? AND m.status = 'sent'"
    " AND m.kind IN ('terminal', 'followUp')"
    " AND (m.latest_turn_state IS NULL OR m.latest_turn_state = 'started')"
    " ORDER BY m.order_number DESC LIMIT 1))"
    " ORDER BY order_number DESC LIMIT 1",
)
"""§5.6 in one statement, from the few messages that can bind (ADR 0085).

A step binds while its request is pending and its run is not paused, so the
step side leads from the pending requests; a terminal or follow-up message
binds while its latest turn (kept on the message) is missing or open, which
``workflow_messages_unread_idx`` holds alone.  The newer of the two wins.
"""


def open_message(ctx: Context, session_id: str) -> MessageRow | None:
    """§5.6: the newest sent message a new model turn binds to.

    A step message binds while its request is pending and its run is not
    paused; a terminal or follow-up message while its latest turn is
    missing or still open.  Both are searches of the messages that can
    bind, bounded by them rather than by the session's history (ADR 0085).
    """
    return ctx.fetch(_OPEN_MESSAGE, session_id, session_id)


_LATEST_TURN: Final = select(
    TurnRow,
    "WHERE workflow_message_id = ? ORDER BY started_at DESC, workflow_turn_id DESC LIMIT 1",
)


def latest_turn(ctx: Context, message_id: str) -> TurnRow | None:
    """The newest turn on a message, or None."""
    return ctx.fetch(_LATEST_TURN, message_id)


def turn_record(row: TurnRow) -> dict[str, object]:
    """A turn as receipts show it: the receipt's fields are the row's columns, name for name."""
    return receipt(Turn(**row._asdict()))


def message_of(ctx: Context, message_id: str) -> MessageRow | None:
    """The workflow message of that id, or None."""
    return ctx.fetch(MESSAGE, message_id)


def _request_of(ctx: Context, message: MessageRow) -> RequestRow | None:
    return ctx.fetch(REQUEST, message.source_id)


def _turn(ctx: Context, turn_id: str) -> TurnRow | None:
    return ctx.fetch(TURN, turn_id)


def _turn_payload(payload: dict[str, object]) -> tuple[str, str, str, str]:
    names = ("workflowMessageId", "workflowTurnId", "runId", "targetSessionId", "coordinatorEpoch")
    for name in names:
        value = payload.get(name)
        if not isinstance(value, str) or not value:
            raise refuse(f"Workflow turn {name} must be non-empty text")
    state = payload.get("state")
    if state not in ("started", "ended"):
        raise refuse("Workflow turn state must be started or ended")
    return (
        str(payload["workflowMessageId"]),
        str(payload["workflowTurnId"]),
        str(payload["runId"]),
        str(state),
    )


def report_turn(ctx: Context, request: ClientRequest) -> Result:
    """``workflowTurn.report`` (§11.2)."""
    payload = members(request.payload)
    message_id, turn_id, run_id, state = _turn_payload(payload)
    if state == "started":
        session_id = session_check(ctx, payload, turns=True)
        row = _start_turn(ctx, session_id, message_id, turn_id, run_id)
    else:
        stop, response_entry = _end_report(payload)
        session_id = session_check(ctx, payload, turns=True)
        row = _end_turn(ctx, session_id, message_id, turn_id, run_id, stop, response_entry)
    return Result(receipt=turn_record(row), run_id=run_id)


def _end_report(payload: dict[str, object]) -> tuple[StopReason, str | None]:
    """An ended turn's ``stopReason`` and ``responseSessionEntryId``, checked before the session."""
    stop = one_of(payload.get("stopReason"), STOP_REASONS)
    if stop is None:
        raise refuse("Workflow turn stopReason is invalid")
    response_entry = payload.get("responseSessionEntryId")
    if response_entry is not None and not isinstance(response_entry, str):
        raise refuse("Workflow turn responseSessionEntryId must be text or null")
    return stop, response_entry


def _start_turn(
    ctx: Context, session_id: str, message_id: str, turn_id: str, run_id: str
) -> TurnRow:
    existing = _turn(ctx, turn_id)
    run = get_run(ctx, run_id)
    if existing is None and run is not None and run.paused:
        raise refuse("A paused workflow cannot start a model turn")
    opened = open_message(ctx, session_id)
    if opened is None or opened.workflow_message_id != message_id:
        raise refuse("Workflow turn start does not match the open workflow message")
    if existing is not None:
        same = (existing.workflow_message_id, existing.run_id, existing.target_session_id)
        if same != (message_id, run_id, session_id):
            raise refuse(f"Workflow turn identity conflict: {turn_id}")
        return existing
    message = _turnable(ctx, message_id, run_id, session_id)
    if message.kind == "step":
        request = _request_of(ctx, message)
        if request is None:
            raise refuse("Pending workflow interaction timeout is missing")
        begin_turn_shift(ctx, request)
        cancel_source(ctx, message.source_id, ("step",))
    ctx.emit(
        TurnStarted(
            workflow_turn_id=turn_id,
            workflow_message_id=message_id,
            run_id=run_id,
            target_session_id=session_id,
        )
    )
    started = _turn(ctx, turn_id)
    assert started is not None
    return started


def _turnable(ctx: Context, message_id: str, run_id: str, session_id: str) -> MessageRow:
    """The message a new turn starts on: it exists, matches, is sent and has no open turn."""
    message = message_of(ctx, message_id)
    if message is None:
        raise refuse(f"Workflow message not found: {message_id}")
    if (message.run_id, message.target_session_id) != (run_id, session_id):
        raise refuse("Workflow turn does not match its message")
    if message.status != "sent":
        raise refuse("Workflow turn requires a sent message")
    if ctx.one(
        "SELECT 1 FROM workflow_turns WHERE workflow_message_id = ? AND state = 'started'",
        message_id,
    ):
        # At most one started turn per message (§5.7); the original's index refuses it.
        raise refuse(f"Workflow message already has a started turn: {message_id}")
    return message


def _end_turn(  # noqa: PLR0913, PLR0917 - the report's members
    ctx: Context,
    session_id: str,
    message_id: str,
    turn_id: str,
    run_id: str,
    stop: StopReason,
    response_entry: str | None,
) -> TurnRow:
    existing = _turn(ctx, turn_id)
    if existing is None:
        raise refuse(f"Workflow turn not found: {turn_id}")
    same = (existing.workflow_message_id, existing.run_id, existing.target_session_id)
    if same != (message_id, run_id, session_id):
        raise refuse(f"Workflow turn identity conflict: {turn_id}")
    if existing.state == "ended":
        if (existing.stop_reason, existing.response_session_entry_id) != (
            stop,
            response_entry,
        ):
            raise refuse("Workflow turn end report conflicts with its saved result")
        return existing
    end_turn(ctx, existing, stop, response_entry)
    ended = _turn(ctx, turn_id)
    assert ended is not None
    return ended


def end_turn(ctx: Context, turn: TurnRow, stop: StopReason, response_entry: str | None) -> None:
    """Save a turn's end, then apply the turn-end consequences (§9.6)."""
    ctx.emit(
        TurnEnded(
            workflow_turn_id=turn.workflow_turn_id,
            workflow_message_id=turn.workflow_message_id,
            run_id=turn.run_id,
            target_session_id=turn.target_session_id,
            stop_reason=stop,
            response_session_entry_id=response_entry,
        )
    )
    _turn_end_consequences(ctx, turn, stop)


def _pause_parked(ctx: Context, run_id: str) -> None:
    run = get_run(ctx, run_id)
    queue = queue_of(ctx, run_id)
    if run is not None and run.paused:
        return
    pausable = (
        run is not None
        and queue is not None
        and queue.status == "parked"
        and not live_owner(ctx, run_id)
        and run.status in ("running", "waiting")
        and ctx.one(
            "SELECT 1 FROM interactive_requests WHERE run_id = ? AND status = 'pending'", run_id
        )
    )
    if not pausable:
        raise refuse("Interrupted workflow turn could not pause its exact parked run")
    ctx.emit(RunPaused(run_id=run_id, paused_at=ctx.now))


def _turn_end_consequences(ctx: Context, turn: TurnRow, stop: StopReason) -> None:
    """§9.6 steps 2-7 for a step message's request."""
    message = message_of(ctx, turn.workflow_message_id)
    if message is None or message.kind != "step":
        return
    request = _request_of(ctx, message)
    if request is None or request.status != "pending":
        return
    if stop == "aborted":
        _pause_parked(ctx, request.run_id)
        cancel_source(ctx, request.request_id, ("step",))
        return
    run = get_run(ctx, request.run_id)
    validating = ctx.one(
        "SELECT 1 FROM interactive_submissions WHERE request_id = ? AND outcome = 'validating'",
        request.request_id,
    )
    if run is None or run.paused or validating:
        return
    count = request.unproductive_turn_ends + 1
    revision = request.revision + 1
    ctx.emit(
        InteractionRevised(
            request_id=request.request_id,
            run_id=request.run_id,
            revision=revision,
            reason="reminder",
            unproductive_turn_ends=count,
        )
    )
    if count < UNPRODUCTIVE_LIMIT:
        fresh = _request_of(ctx, message)
        assert fresh is not None
        ensure_interaction_message(ctx, fresh, "reminder")
        return
    fresh = _request_of(ctx, message)
    assert fresh is not None
    cancel_request(ctx, fresh, UNPRODUCTIVE_ERROR, ("step",))
    if run.status not in ("running", "waiting"):
        raise refuse("Workflow run could not fail after three unproductive turns")
    finish_run(
        ctx,
        request.run_id,
        status="failed",
        detail=UNPRODUCTIVE_ERROR,
        error=UNPRODUCTIVE_ERROR,
        error_code="unproductiveTurns",
    )
