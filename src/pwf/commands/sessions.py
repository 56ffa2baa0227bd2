"""Sessions: their coordinators, whether they may act, and host recovery of their turns.

DOMAIN §5.13, §9.6, §10.6.  Imports commands, events and errors.  Model
turns are in :mod:`pwf.commands.turns` and branch reports in
:mod:`pwf.commands.branches`.  Every deadline move is one
``attempt.deadline_shifted`` event computed from ``ctx.now``; projectors only
copy its numbers.
"""

from __future__ import annotations

from typing import Final

from pwf.commands import Context, refuse
from pwf.commands.deadlines import shift
from pwf.commands.payload import text
from pwf.commands.rows import (
    ATTEMPT,
    AttemptRow,
    CoordinatorRow,
    LatestStartRow,
    Query,
    fields,
    select,
)
from pwf.events import (
    AttemptChanged,
    CoordinatorAttached,
    CoordinatorDetached,
)

__all__ = [
    "attach",
    "coordinator",
    "detach",
    "live_coordinator",
    "recover_turns",
    "session_check",
    "session_inactive",
    "session_resumed",
]


def coordinator(ctx: Context, session_id: str) -> CoordinatorRow | None:
    """The session's live coordinator row, or None."""
    return ctx.fetch(_COORDINATOR, session_id)


def live_coordinator(ctx: Context, payload: dict[str, object]) -> CoordinatorRow:
    """§5.13: the coordinator of the payload's session, on this connection, at the payload's epoch.

    A served request must come on the coordinator's own connection and name
    its live epoch, as the original's ``requireSessionCoordinator`` checks
    both: an epoch seen by another connection (its snapshot shows the live
    one to every watcher) does not make that connection the coordinator.
    Direct mode has no connection (``ctx.connection`` is None): there the
    epoch, returned only to the request that attached it, is the whole
    credential (ADR 0014 D6, ADR 0072).
    """
    session_id = text(payload, "targetSessionId")
    epoch = text(payload, "coordinatorEpoch")
    row = coordinator(ctx, session_id)
    if (
        row is None
        or row.coordinator_epoch != epoch
        or (ctx.connection is not None and row.connection_id != ctx.connection)
    ):
        raise refuse("Workflow session coordinator was replaced")
    return row


def session_check(ctx: Context, payload: dict[str, object], *, turns: bool = False) -> str:
    """§5.13: the payload's epoch must be the session's live one, its branch reported."""
    row = live_coordinator(ctx, payload)
    session_id = str(row.target_session_id)
    if not row.branch_reported:
        if turns:
            raise refuse("Workflow branch must be reported before model turns")
        raise refuse("Workflow session branch must be reported before session control")
    return session_id


def attach(ctx: Context, session_id: str, connection_id: str) -> str:
    """Install a new coordinator epoch for the session, fencing the previous one."""
    previous = coordinator(ctx, session_id)
    if previous is not None and previous.connection_id != connection_id:
        # A later version marks the session's turns inactive when another
        # connection takes over (DOMAIN §15.16); the fenced one can no longer report.
        session_inactive(ctx, session_id)
    epoch = ctx.mint("session-epoch-")
    ctx.emit(
        CoordinatorAttached(
            target_session_id=session_id, coordinator_epoch=epoch, connection_id=connection_id
        )
    )
    return epoch


def detach(ctx: Context, session_id: str, epoch: str | None = None) -> bool:
    """The coordinator's connection closed: §10.5 inactive, then no coordinator."""
    row = coordinator(ctx, session_id)
    if row is None or (epoch is not None and row.coordinator_epoch != epoch):
        return False
    session_inactive(ctx, session_id)
    ctx.emit(
        CoordinatorDetached(target_session_id=session_id, coordinator_epoch=row.coordinator_epoch)
    )
    return True


_OPEN_TURN_ATTEMPTS: Final = Query(
    AttemptRow,
    f"SELECT DISTINCT {', '.join(f'a.{name}' for name in fields(AttemptRow))}"  # noqa: S608
    " FROM node_attempts a"
    " JOIN interactive_requests r ON r.attempt_id = a.attempt_id"
    " JOIN workflow_messages m ON m.source_id = r.request_id AND +m.kind = 'step'"
    " JOIN workflow_turns t ON t.workflow_message_id = m.workflow_message_id"
    " WHERE r.target_session_id = ? AND r.status = 'pending' AND t.state = 'started'"
    " AND a.status IN ('pending', 'running', 'waiting', 'interrupted')"
    " ORDER BY a.attempt_id",
)
_LATEST_STARTS: Final = Query(
    LatestStartRow,
    "SELECT a.attempt_id, max(t.started_at) AS latest_start FROM node_attempts a"
    " JOIN interactive_requests r ON r.attempt_id = a.attempt_id"
    " JOIN workflow_messages m ON m.source_id = r.request_id AND +m.kind = 'step'"
    " JOIN workflow_turns t ON t.workflow_message_id = m.workflow_message_id"
    " WHERE r.status = 'pending' AND t.state = 'started'"
    " AND a.status IN ('pending', 'running', 'waiting', 'interrupted')"
    " GROUP BY a.attempt_id ORDER BY a.attempt_id",
)
_COORDINATOR: Final = select(CoordinatorRow, "WHERE target_session_id = ?")


def _open_turn_attempts(ctx: Context, session_id: str) -> list[AttemptRow]:
    """Unfinished attempts of pending requests of the session that have a started step turn.

    A finished attempt keeps its end status: only the statuses host recovery
    moves (§10.6) can become ``interrupted``.  The session's pending requests
    lead the join; ``+m.kind`` keeps every step message from leading (ADR 0077).
    """
    return ctx.fetch_all(_OPEN_TURN_ATTEMPTS, session_id)


def session_inactive(ctx: Context, session_id: str) -> None:
    """§10.5: attempts with an open step turn become ``interrupted`` (no shift yet)."""
    for attempt in _open_turn_attempts(ctx, session_id):
        if attempt.status != "interrupted":
            ctx.emit(
                AttemptChanged(
                    run_id=attempt.run_id, attempt_id=attempt.attempt_id, status="interrupted"
                )
            )


def session_resumed(ctx: Context, session_id: str) -> None:
    """§10.5: on the new coordinator's first report, credit the time the session was away."""
    for attempt in _open_turn_attempts(ctx, session_id):
        if attempt.status == "interrupted":
            shift(ctx, attempt, max(0, ctx.now - attempt.updated_at), "session.resumed")
            ctx.emit(
                AttemptChanged(
                    run_id=attempt.run_id, attempt_id=attempt.attempt_id, status="waiting"
                )
            )


def recover_turns(ctx: Context, heartbeat: int | None) -> int:
    """§10.6 host recovery: credit the host's downtime to attempts with open step turns.

    The pending requests lead the join, as in :func:`_open_turn_attempts`.
    """
    rows = ctx.fetch_all(_LATEST_STARTS)
    for row in rows:
        attempt = ctx.fetch(ATTEMPT, row.attempt_id)
        assert attempt is not None
        if attempt.status == "interrupted" or heartbeat is None:
            inactive_at = attempt.updated_at
        else:
            inactive_at = max(heartbeat, row.latest_start)
        shift(ctx, attempt, max(0, ctx.now - inactive_at), "host.recovery")
        ctx.emit(
            AttemptChanged(
                run_id=attempt.run_id, attempt_id=attempt.attempt_id, status="interrupted"
            )
        )
    return len(rows)
