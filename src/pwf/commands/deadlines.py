"""Deadline accounting: SHIFT and the idle time it credits (DOMAIN §10.1-§10.3).

Imports commands, events and errors.  Every shift is one
``attempt.deadline_shifted`` event computed from ``ctx.now``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands import Context, refuse
from pwf.commands.rows import ATTEMPT, Query, TurnOfAttemptRow
from pwf.events import DeadlineShifted

if TYPE_CHECKING:
    from pwf.commands.rows import AttemptRow, RequestRow
    from pwf.events.sessions import ShiftCause

__all__ = ["begin_turn_shift", "resume_shift", "shift"]


def shift(ctx: Context, attempt: AttemptRow, idle_ms: int, cause: ShiftCause) -> None:
    """SHIFT (§10.1): move start and deadline later by ``idle_ms``; no-op when nothing moves."""
    if idle_ms <= 0 or attempt.deadline_at is None:
        return
    started = attempt.started_at
    ctx.emit(
        DeadlineShifted(
            run_id=attempt.run_id,
            attempt_id=attempt.attempt_id,
            idle_ms=idle_ms,
            from_deadline=attempt.deadline_at,
            to_deadline=attempt.deadline_at + idle_ms,
            from_started_at=started,
            to_started_at=None if started is None else started + idle_ms,
            cause=cause,
        )
    )


_TURN_OF_PENDING_STEP: Final = Query(
    TurnOfAttemptRow,
    "SELECT r.attempt_id, t.ended_at FROM workflow_turns t"
    " JOIN workflow_messages m ON m.workflow_message_id = t.workflow_message_id"
    " JOIN interactive_requests r ON r.request_id = m.source_id"
    " WHERE r.run_id = ? AND r.status = 'pending' AND m.kind = 'step'"
    " AND t.started_at <= ? AND (t.ended_at IS NULL OR t.ended_at > ?)"
    " ORDER BY t.started_at DESC, t.workflow_turn_id DESC LIMIT 1",
)


def begin_turn_shift(ctx: Context, request: RequestRow) -> None:
    """§10.2: credit the wait since the last ended step turn (or the start) before a new turn."""
    attempt = ctx.fetch(ATTEMPT, request.attempt_id)
    if request.status != "pending" or attempt is None:
        raise refuse("Pending workflow interaction timeout is missing")
    base = ctx.value(
        "SELECT max(t.ended_at) FROM workflow_turns t JOIN workflow_messages m"
        " ON m.workflow_message_id = t.workflow_message_id"
        " WHERE m.source_id = ? AND m.kind = 'step' AND t.state = 'ended'",
        request.request_id,
    )
    if base is None:
        base = attempt.started_at if attempt.started_at is not None else request.created_at
    shift(ctx, attempt, max(0, ctx.now - base), "turn.start")


def resume_shift(ctx: Context, run_id: str, paused_at: int) -> None:
    """§10.3: credit the part of the pause during which a step turn was still active."""
    turn = ctx.fetch(_TURN_OF_PENDING_STEP, run_id, paused_at, paused_at)
    if turn is None:
        return
    attempt = ctx.fetch(ATTEMPT, turn.attempt_id)
    assert attempt is not None
    ended = turn.ended_at if turn.ended_at is not None else ctx.now
    stopped = min(ctx.now, ended)
    shift(ctx, attempt, max(0, stopped - paused_at), "run.resume")
