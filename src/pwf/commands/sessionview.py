"""What a session shows and the session-scoped controls (DOMAIN §5.6, §5.8, §5.9, §12.2).

The session view (reservation or retained terminal, next eligible message),
``view.session.watch``, ``sessionView.clearTerminal`` and ``run.restart``.
Imports commands, events and errors; follow-ups are in
:mod:`pwf.commands.followups`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from pwf.commands import Context, Result, refuse
from pwf.commands.ids import restart_run_id, terminal_source_id
from pwf.commands.payload import members, optional_text, text
from pwf.commands.rows import (
    FOLLOW_UP,
    MessageRow,
    Query,
    RunRow,
    TerminalViewRow,
    fields,
    select,
)
from pwf.commands.runs import (
    LIVE_QUEUE,
    TERMINAL,
    get_run,
    reserve,
    revision_of,
    template_of,
)
from pwf.commands.sessions import attach, coordinator, session_check
from pwf.commands.turns import latest_turn, open_message
from pwf.commands.views import json_bytes, stored_json
from pwf.events import TerminalCleared
from pwf.protocol.schemas import Cleared, Restarted, Subscribed, receipt

if TYPE_CHECKING:
    from pwf.commands import Row
    from pwf.protocol.client import ClientRequest

__all__ = [
    "clear_terminal",
    "current_run_id",
    "next_message",
    "reservation",
    "retained_terminal",
    "run_restart",
    "session_view",
    "view_session_watch",
]

RETAIN_MS: Final = 60_000
RESTART_LIMIT: Final = 3


# ------------------------------------------------------------------ the run a session shows


_RESERVATION: Final = Query(
    RunRow,
    f"SELECT {', '.join(f'r.{name}' for name in fields(RunRow))}"  # noqa: S608 - constants
    " FROM run_queue q CROSS JOIN runs r ON r.run_id = q.run_id"
    f" WHERE q.status IN ({', '.join(repr(status) for status in LIVE_QUEUE)})"
    " AND r.origin_session_id = ? ORDER BY r.created_at DESC, r.run_id DESC LIMIT 1",
)


def reservation(ctx: Context, session_id: str) -> RunRow | None:
    """The newest run of the session whose queue entry is still live (a parked run counts).

    Live is every status but ``done``, ``failed`` and ``cancelled``, named
    one by one, so SQLite leads from the live queue entries (work in
    progress) rather than walking every run the session ever started
    (ADR 0085).
    """
    return ctx.fetch(_RESERVATION, session_id)


_TERMINAL_RUN: Final = f"r.status IN ({', '.join(repr(status) for status in TERMINAL)})"
_RETAINED_BRANCH: Final = (
    "SELECT * FROM (SELECT {columns} FROM workflow_messages m{index}"  # noqa: S608
    " JOIN runs r ON r.run_id = m.run_id WHERE m.target_session_id = ? AND {rows}"
    f" AND {_TERMINAL_RUN} AND NOT coalesce(m.run_id = ? AND ? >= m.created_at, 0)"
    " ORDER BY m.order_number DESC LIMIT 1)"
)
_RETAINED: Final = Query(
    MessageRow,
    "SELECT * FROM ("  # noqa: S608 - constants
    + " UNION ALL ".join(
        _RETAINED_BRANCH.format(
            columns=", ".join(f"m.{name}" for name in fields(MessageRow)), index=index, rows=rows
        )
        for index, rows in (
            ("", "m.status = 'pending' AND m.kind = 'terminal'"),
            (
                " INDEXED BY workflow_messages_unread_idx",
                (
                    "m.status = 'sent' AND m.kind IN ('terminal', 'followUp')"
                    " AND (m.latest_turn_state IS NULL OR m.latest_turn_state = 'started')"
                    " AND m.kind = 'terminal'"
                ),
            ),
            (
                " INDEXED BY workflow_messages_read_terminal_idx",
                (
                    "m.status = 'sent' AND m.kind = 'terminal' AND m.latest_turn_state = 'ended'"
                    " AND m.latest_turn_ended_at > ?"
                ),
            ),
        )
    )
    + ") ORDER BY order_number DESC LIMIT 1",
)
"""The newest terminal message of a session its view still shows, in one statement.

Its rules: the run has finished; the session did not clear it
(``session_terminal_views`` names the run, cleared at or after the
message); and the message is pending, or sent and its latest turn is
missing, started, or ended less than ``RETAIN_MS`` ago.  Each of the three
is a search of the messages it can hold (the pending ones, those of
``workflow_messages_unread_idx``, those of
``workflow_messages_read_terminal_idx`` that ended within the retention),
so it is bounded by them, not by the session's history (ADR 0085).
"""


_CLEARED: Final = select(TerminalViewRow, "WHERE target_session_id = ?")


def retained_terminal(ctx: Context, session_id: str) -> MessageRow | None:
    """§5.9: the terminal message whose run the session still shows, if any."""
    cleared = ctx.fetch(_CLEARED, session_id)
    run_id = None if cleared is None else cleared.cleared_run_id
    cleared_at = None if cleared is None else cleared.cleared_at
    rule = (session_id, run_id, cleared_at)
    return ctx.fetch(_RETAINED, *rule, *rule, session_id, ctx.now - RETAIN_MS, run_id, cleared_at)


def current_run_id(ctx: Context, session_id: str) -> str | None:
    """The run the session view is about: the reservation, else the retained terminal's run."""
    reserved = reservation(ctx, session_id)
    if reserved is not None:
        return reserved.run_id
    retained = retained_terminal(ctx, session_id)
    return None if retained is None else retained.run_id


# ------------------------------------------------------------------ next message


def _eligible(ctx: Context, message: Row) -> bool:
    kind = message["kind"]
    if kind == "notification":
        return True
    if kind in ("step", "decision"):
        row = ctx.one(
            "SELECT r.status, runs.paused FROM interactive_requests r"
            " JOIN runs ON runs.run_id = r.run_id WHERE r.request_id = ?",
            message["source_id"],
        )
        if row is None or row["status"] != "pending":
            return False
        return kind == "decision" or not row["paused"]
    if kind == "terminal":
        return bool(
            ctx.value("SELECT status FROM runs WHERE run_id = ?", message["run_id"]) in TERMINAL
        )
    return _follow_up_eligible(ctx, message)


_CHILD: Final = select(RunRow, "WHERE parent_run_id = ? ORDER BY created_at DESC, run_id DESC")
_LATEST_TERMINAL: Final = select(
    MessageRow, "WHERE source_id = ? AND kind = 'terminal' ORDER BY order_number DESC LIMIT 1"
)


def _leaf(ctx: Context, run_id: str) -> RunRow | None:
    run = get_run(ctx, run_id)
    while run is not None:
        child = ctx.fetch(_CHILD, run.run_id)
        if child is None:
            return run
        run = child
    return None


def _ended(ctx: Context, message_id: str | None) -> bool:
    if message_id is None:
        return False
    turn = latest_turn(ctx, message_id)
    return turn is not None and turn.state == "ended"


def _follow_up_eligible(ctx: Context, message: Row) -> bool:
    """§5.6 followUp rules: after the chain's leaf completed and its result was read."""
    follow_up = ctx.fetch(FOLLOW_UP, message["source_id"])
    if follow_up is None or follow_up.status != "queued":
        return False
    leaf = _leaf(ctx, follow_up.run_id)
    if leaf is None or leaf.status != "completed":
        return False
    terminal = ctx.value(
        "SELECT workflow_message_id FROM workflow_messages WHERE source_id = ? AND status = 'sent'"
        " ORDER BY order_number DESC LIMIT 1",
        terminal_source_id(leaf.run_id),
    )
    if not _ended(ctx, terminal):
        return False
    for earlier in ctx.all(
        "SELECT f.status, m.workflow_message_id FROM workflow_follow_ups f"
        " LEFT JOIN workflow_messages m ON m.source_id = f.follow_up_id"
        " WHERE f.run_id = ? AND f.order_number < ?",
        follow_up.run_id,
        follow_up.order_number,
    ):
        if earlier["status"] == "queued" and not _ended(ctx, earlier["workflow_message_id"]):
            return False
    busy = ctx.one(
        "SELECT 1 FROM run_bindings b JOIN runs r ON r.run_id = b.run_id"
        " WHERE b.origin_session_id = ? AND r.status IN ('queued', 'running', 'waiting')",
        message["target_session_id"],
    )
    return busy is None


def next_message(ctx: Context, session_id: str) -> Row | None:
    """The first pending message of the session, in order, that is eligible now."""
    for message in ctx.all(
        "SELECT * FROM workflow_messages WHERE target_session_id = ? AND status = 'pending'"
        " ORDER BY order_number",
        session_id,
    ):
        if _eligible(ctx, message):
            return message
    return None


def _message_view(ctx: Context, message: Row) -> dict[str, object]:
    return {
        "content": stored_json(ctx, message["content_hash"]),
        "kind": message["kind"],
        "orderNumber": message["order_number"],
        "runId": message["run_id"],
        "workflowMessageId": message["workflow_message_id"],
    }


def _run_view(ctx: Context, run: RunRow) -> dict[str, object]:
    """The session's run; a started turn on a step or terminal message shows it running (§11.2)."""
    turning = ctx.one(  # led by the run's turns, never by every message of a kind (ADR 0077)
        "SELECT 1 FROM workflow_turns t JOIN workflow_messages m"
        " ON m.workflow_message_id = t.workflow_message_id"
        " WHERE t.run_id = ? AND t.state = 'started' AND +m.kind IN ('step', 'terminal')",
        run.run_id,
    )
    status = "running" if turning and run.status == "waiting" else run.status
    return {"paused": bool(run.paused), "runId": run.run_id, "status": status}


def session_view(ctx: Context, session_id: str, epoch: str | None) -> dict[str, object]:
    """The session snapshot a coordinator or viewer is sent."""
    row = coordinator(ctx, session_id)
    upcoming = next_message(ctx, session_id)
    offered = row is None or (row.coordinator_epoch == epoch and bool(row.branch_reported))
    run_id = current_run_id(ctx, session_id)
    run = None if run_id is None else get_run(ctx, run_id)
    opened = open_message(ctx, session_id)
    return {
        "coordinatorEpoch": None if row is None else row.coordinator_epoch,
        "nextMessage": _message_view(ctx, upcoming) if upcoming is not None and offered else None,
        "openMessageId": None if opened is None else opened.workflow_message_id,
        "run": None if run is None else _run_view(ctx, run),
        "targetSessionId": session_id,
    }


def view_session_watch(ctx: Context, request: ClientRequest) -> Result:
    """``view.session.watch`` ``{subscriptionId, sessionId, coordinator?}`` (HOST.md §2.4).

    The checks run in the original's order.  Direct mode has no connection to
    keep the subscription on, so after its id is checked only the coordinator
    is installed (for ``connectionId`` when given, else the client id); the
    snapshot itself is :func:`session_view`.
    """
    if not isinstance(request.payload, dict):
        raise refuse("view.session.watch payload must be an object")
    payload = request.payload
    session_id = text(payload, "sessionId")
    text(payload, "subscriptionId")
    wanted = payload.get("coordinator", False)
    if wanted is True:
        connection = ctx.connection or optional_text(payload, "connectionId") or request.client_id
        epoch = attach(ctx, session_id, connection)
        return Result(receipt=receipt(Subscribed(coordinator_epoch=epoch, subscribed=True)))
    if wanted is False:
        return Result(receipt=receipt(Subscribed(subscribed=True)))
    raise refuse("view.session.watch coordinator must be a boolean")


# ------------------------------------------------------------------ terminal views


def clear_terminal(ctx: Context, request: ClientRequest) -> Result:
    """``sessionView.clearTerminal`` (§8)."""
    payload = members(request.payload)
    session_id = session_check(ctx, payload)
    retained = retained_terminal(ctx, session_id) if reservation(ctx, session_id) is None else None
    if retained is None:
        return Result(outcome="adopted", receipt=receipt(Cleared(cleared=False)))
    if request.run_id is not None and request.run_id != retained.run_id:
        return Result(
            outcome="rejected",
            error=f"Retained terminal workflow does not match run {request.run_id}",
        )
    ctx.emit(TerminalCleared(target_session_id=session_id, run_id=retained.run_id))
    return Result(
        receipt=receipt(Cleared(cleared=True, run_id=retained.run_id)), run_id=retained.run_id
    )


# ------------------------------------------------------------------ restart


def _terminal_details(ctx: Context, message: MessageRow) -> dict[str, object]:
    content = stored_json(ctx, message.content_hash)
    details = content.get("details") if isinstance(content, dict) else None
    return details if isinstance(details, dict) else {}


def _restart_refusal(  # noqa: PLR0911 - one return per check, in the original order
    ctx: Context, session_id: str, source: RunRow, payload: dict[str, object]
) -> str | MessageRow:
    """Checks 2-8 of §12.2 in order; the terminal message when they pass."""
    if source.origin_session_id != session_id or source.execution_mode != "interactive":
        return "Workflow run belongs to another Pi session"
    if source.status == "cancelled":
        return "An explicitly cancelled workflow cannot be restarted"
    if source.restart_number >= RESTART_LIMIT:
        return f"Workflow restart limit reached ({RESTART_LIMIT} restarts)"
    message_id = text(payload, "workflowMessageId")
    latest = ctx.fetch(_LATEST_TERMINAL, terminal_source_id(source.run_id))
    if (
        latest is None
        or latest.workflow_message_id != message_id
        or latest.target_session_id != session_id
        or latest.status != "sent"
    ):
        return "Workflow terminal result is stale or was replaced"
    if current_run_id(ctx, session_id) != source.run_id:
        return "Workflow terminal result is no longer current"
    turn = latest_turn(ctx, message_id)
    if turn is None:
        return "Workflow restart requires a terminal model turn"
    turn_id = payload.get("workflowTurnId")
    if turn_id is not None and turn_id != turn.workflow_turn_id:
        return "Workflow terminal turn is stale"
    terminal = _terminal_details(ctx, latest).get("terminal")
    if isinstance(terminal, dict) and terminal.get("status") == "cancelled":
        return "An explicitly cancelled workflow cannot be restarted"
    return latest


def _earlier_restart(ctx: Context, source: RunRow, fingerprint: str) -> Result | None:
    """Checks 9 and 10 of §12.2: the same outcome restarted in the chain, or this run already."""
    if ctx.one(
        "SELECT 1 FROM runs WHERE root_run_id = ? AND parent_terminal_fingerprint = ?",
        source.root_run_id,
        bytes.fromhex(fingerprint),
    ):
        return Result(
            outcome="rejected",
            error="The same terminal outcome already occurred in this restart chain",
            run_id=source.run_id,
        )
    child = ctx.fetch(_RESTART_CHILD, source.run_id)
    if child is not None:
        return Result(
            outcome="adopted",
            receipt=receipt(Restarted(parent_run_id=source.run_id, run_id=child.run_id)),
            run_id=source.run_id,
        )
    return None


_RESTART_CHILD: Final = select(RunRow, "WHERE parent_run_id = ? AND lineage_kind = 'restart'")


def run_restart(ctx: Context, request: ClientRequest) -> Result:
    """``run.restart`` (§12.2): the eleven checks in their order, then the restart run."""
    payload = members(request.payload)
    session_id = session_check(ctx, payload)
    source_id = request.run_id
    if source_id is None:
        raise refuse("run.restart requires runId")
    source = get_run(ctx, source_id)
    if source is None:
        return Result(
            outcome="notFound", error=f"Workflow run not found: {source_id}", run_id=source_id
        )
    checked = _restart_refusal(ctx, session_id, source, payload)
    if isinstance(checked, str):
        return Result(outcome="rejected", error=checked, run_id=source_id)
    fingerprint = _terminal_details(ctx, checked).get("terminalFingerprint")
    assert isinstance(fingerprint, str)
    earlier = _earlier_restart(ctx, source, fingerprint)
    if earlier is not None:
        return earlier
    run_id = restart_run_id(checked.workflow_message_id)
    reserve(
        ctx,
        run_id=run_id,
        template=template_of(
            ctx, source, msgspec.Raw(json_bytes(ctx, source.input_hash) or b"null")
        ),
        parent_id=source_id,
        lineage="restart",
        restart_number=source.restart_number + 1,
        fingerprint=fingerprint,
    )
    restarted = Restarted(
        parent_run_id=source_id, restart_number=source.restart_number + 1, run_id=run_id
    )
    return Result(receipt=receipt(restarted), revision=revision_of(ctx, run_id), run_id=source_id)
