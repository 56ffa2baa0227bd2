"""Interaction deadlines that passed: selection and the start of the timeout (DOMAIN §10.7).

Imports commands, events and errors.  The server polls this every 2 s;
``pwf expire`` runs it once at a given time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands.rows import REQUEST, ExpiringRow, Query
from pwf.commands.runcontrol import cancel_request
from pwf.commands.runs import live_owner
from pwf.events import InteractionTimeoutStarted

if TYPE_CHECKING:
    from pwf.commands import Context

__all__ = ["begin_timeouts", "candidates"]

DETAIL: Final = "finishing expired interaction deadline"
EXPIRED: Final = "Workflow node model-turn deadline expired"


_CANDIDATES: Final = Query(
    ExpiringRow,
    "SELECT r.request_id, r.run_id, r.attempt_id, r.target_session_id, r.revision,"
    " a.deadline_at, a.status AS attempt_status FROM interactive_requests r"
    " JOIN runs ON runs.run_id = r.run_id"
    " JOIN run_queue q ON q.run_id = r.run_id"
    " JOIN node_attempts a ON a.attempt_id = r.attempt_id"
    " WHERE r.status = 'pending' AND runs.paused = 0 AND a.deadline_at IS NOT NULL"
    " AND a.deadline_at <= ? AND q.status NOT IN ('done', 'failed', 'cancelled')"
    " AND EXISTS (SELECT 1 FROM workflow_messages m JOIN workflow_turns t"
    " ON t.workflow_message_id = m.workflow_message_id"
    " WHERE m.source_id = r.request_id AND m.kind = 'step' AND t.state = 'started')"
    " ORDER BY a.deadline_at, r.run_id, r.target_session_id, r.request_id",
)


def candidates(ctx: Context) -> list[ExpiringRow]:
    """Pending requests past their deadline with a started step turn, earliest deadline first."""
    return ctx.fetch_all(_CANDIDATES, ctx.now)


def begin_timeouts(ctx: Context) -> list[tuple[str, str]]:
    """Begin the timeout of every selectable (run, session); return what was started.

    Skipped, as pwf decides for §15.2: runs with a live worker, attempts that
    are ``interrupted``, sessions without a live coordinator, and runs whose
    session already has another queued, starting or running run.
    """
    started: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for row in candidates(ctx):
        key = (row.run_id, row.target_session_id)
        if key in seen:
            continue
        seen.add(key)
        if live_owner(ctx, row.run_id) or row.attempt_status == "interrupted":
            continue
        if not ctx.one(
            "SELECT 1 FROM session_coordinators WHERE target_session_id = ?",
            row.target_session_id,
        ):
            continue
        if ctx.one(
            "SELECT 1 FROM run_queue q JOIN runs r ON r.run_id = q.run_id"
            " WHERE r.origin_session_id = ? AND q.run_id != ?"
            " AND q.status IN ('queued', 'starting', 'running')",
            row.target_session_id,
            row.run_id,
        ):
            # Another run holds the session's one active slot; this one waits its turn.
            continue
        _begin(ctx, row)
        started.append(key)
    return started


def _begin(ctx: Context, row: ExpiringRow) -> None:
    # The request is cancelled but none of its messages is (§10.7, §9.4's table).
    request = ctx.fetch(REQUEST, row.request_id)
    assert request is not None
    cancel_request(ctx, request, EXPIRED, ())
    ctx.emit(
        InteractionTimeoutStarted(
            run_id=row.run_id,
            request_id=row.request_id,
            attempt_id=row.attempt_id,
            detail=DETAIL,
        )
    )
