"""Status reads over the projections: ``state.status`` counts, ``host.status`` (HOST §2.16, §3.1).

``host.status`` of a served host adds what only the process knows (its
listener, connections and active workers); those come in as
:class:`Live`.  pwf records no controllers, decisions, settings scopes or
effects, so their counts are 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pwf.isotime import iso_utc
from pwf.projections.run_totals import ALLOWED_LIFECYCLE, allowed_pair

if TYPE_CHECKING:
    from pwf.commands import Context

__all__ = [
    "ALLOWED_LIFECYCLE",
    "Live",
    "allowed_pair",
    "contradictions",
    "served_host_status",
    "state_counts",
]


class Live(NamedTuple):
    """What the host process knows about itself at the moment of a ``host.status``."""

    socket_available: bool
    active_workers: int
    connected_clients: int


def _count(ctx: Context, sql: str, *params: object) -> int:
    return int(ctx.value(sql, *params) or 0)


def state_counts(ctx: Context) -> dict[str, int]:
    """The ``counts`` of ``state.status`` (§2.16); ``activeLeases``: run claims live at ``now``."""
    return {
        "activeLeases": _count(
            ctx,
            "SELECT count(*) FROM run_queue WHERE owner_worker_epoch IS NOT NULL"
            " AND lease_expires_at > ?",
            ctx.now,
        ),
        "controllers": 0,
        "decisions": 0,
        "pendingFollowUps": _count(
            ctx, "SELECT count(*) FROM workflow_follow_ups WHERE status = 'queued'"
        ),
        "pendingInteractions": _count(
            ctx, "SELECT count(*) FROM interactive_requests WHERE status = 'pending'"
        ),
        "resources": _count(ctx, "SELECT count(*) FROM runs"),
        "runs": _count(ctx, "SELECT count(*) FROM runs"),
        "settingsScopes": 0,
        "unsettledEffects": 0,
    }


def contradictions(ctx: Context) -> int:
    """Run/queue pairs outside the allowed lifecycle table, as HOST §3.1 defines them.

    Every run's pair counts; the ``runs`` read model keeps the count as its
    rows change (``runs_totals``, ADR 0094), so this is one lookup.
    """
    return _count(ctx, "SELECT contradictions FROM runs_totals WHERE id = 1")


def _iso(ms: int | None) -> str | None:
    """Milliseconds since the epoch as JavaScript's ``toISOString`` writes them, or None."""
    return None if ms is None else iso_utc(ms)


def served_host_status(ctx: Context, live: Live) -> dict[str, object]:
    """Exactly the members of HOST §3.1, for a served host."""
    row = ctx.one("SELECT * FROM host_state WHERE id = 1")
    running = row is not None and row["host_id"] is not None and row["expires_at"] > ctx.now
    return {
        "activeControllerWorkers": 0,
        "activeWorkers": live.active_workers,
        "ambiguousEffects": 0,
        "connectedClients": live.connected_clients,
        "epoch": None if row is None else row["epoch"],
        "expiredClaims": _count(
            ctx,
            "SELECT count(*) FROM run_queue WHERE status NOT IN ('done', 'failed', 'cancelled')"
            " AND owner_worker_epoch IS NOT NULL AND lease_expires_at <= ?",
            ctx.now,
        ),
        "expiresAt": None if row is None else _iso(row["expires_at"]),
        "heartbeatAt": None if row is None else _iso(row["heartbeat_at"]),
        "lifecycleContradictions": contradictions(ctx),
        "parkedRuns": _count(ctx, "SELECT count(*) FROM run_queue WHERE status = 'parked'"),
        "pendingControllers": 0,
        "pendingInteractions": _count(
            ctx, "SELECT count(*) FROM interactive_requests WHERE status = 'pending'"
        ),
        "queuedRuns": _count(ctx, "SELECT count(*) FROM run_queue WHERE status = 'queued'"),
        "runningRuns": _count(
            ctx, "SELECT count(*) FROM run_queue WHERE status IN ('starting', 'running')"
        ),
        "socketAvailable": live.socket_available,
        "startedAt": None if row is None else _iso(row["started_at"]),
        "state": "running" if running else "stale",
        "waitingRuns": _count(ctx, "SELECT count(*) FROM runs WHERE status = 'waiting'"),
    }
