"""The operator's overview: counts, everything waiting with its diagnosis, contradictions.

:func:`overview` reads the live projections in one read transaction and
answers what ``pwf status`` prints and the served ``state.status`` returns:
the ``host.status`` counts (HOST §3.1, with ``lifecycleContradictions``),
every run that has not ended and every interaction that still waits, each
with the diagnosis of ``pwf explain`` (the same rules, ADR 0016), the seq
since which its first finding holds and how long ago that was, and the
run/queue pairs outside the allowed lifecycle table (ADR 0034).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from pwf.commands.views import host_counts
from pwf.explain import (
    Finding,
    clock,
    context,
    diagnose_interaction,
    diagnose_run,
    state_at,
)

if TYPE_CHECKING:
    from pwf.commands import Context, Row
    from pwf.store import EventStore

__all__ = [
    "ALLOWED_LIFECYCLE",
    "Contradiction",
    "Overview",
    "Waiting",
    "overview",
    "overview_receipt",
]

ALLOWED_LIFECYCLE: Final = {
    "queued": ("queued",),
    "running": ("starting", "running", "parked"),
    "waiting": ("parked",),
    "completed": ("done",),
    "failed": ("failed",),
    "timed_out": ("failed",),
    "cancelled": ("cancelled",),
}
"""Run status -> the queue statuses allowed with it (HOST §3.1 ``lifecycleContradictions``)."""

_OPEN_RUNS: Final = (
    "SELECT * FROM runs WHERE status NOT IN ('completed', 'failed', 'timed_out', 'cancelled')"
    " ORDER BY created_at, run_id"
)
_WAITING_INTERACTIONS: Final = (
    "SELECT * FROM interactive_requests WHERE status = 'pending'"
    " OR (status = 'settled' AND consumed_at IS NULL) ORDER BY created_at, request_id"
)
_PAIRS: Final = (
    "SELECT r.run_id AS run_id, r.status AS run_status, q.status AS queue_status"
    " FROM runs r JOIN run_queue q ON q.run_id = r.run_id"
    " ORDER BY r.created_at, r.run_id"
)


class Waiting(msgspec.Struct, frozen=True, rename="camel"):
    """One run or interaction that waits, with its diagnosis.

    ``rule``, ``summary`` and ``since_seq`` are those of the first finding;
    ``since_at`` is that seq's time and ``waiting_ms`` is ``now - since_at``.
    """

    subject: str
    id: str
    run_id: str
    status: str
    rule: str | None
    summary: str | None
    since_seq: int | None
    since_at: int | None
    waiting_ms: int | None
    diagnosis: tuple[Finding, ...]


class Contradiction(msgspec.Struct, frozen=True, rename="camel"):
    """A run whose queue status is outside the allowed table for its status."""

    run_id: str
    run_status: str
    queue_status: str


class Overview(msgspec.Struct, frozen=True, rename="camel"):
    """What ``pwf status`` shows: counts, waiting runs and interactions, contradictions."""

    head_seq: int
    now: int
    counts: dict[str, object]
    runs: tuple[Waiting, ...]
    interactions: tuple[Waiting, ...]
    contradictions: tuple[Contradiction, ...]

    @property
    def contradictory(self) -> bool:
        """Whether any run/queue pair is outside the allowed table."""
        return bool(self.contradictions)


def overview(store: EventStore, now: int | None = None) -> Overview:
    """The overview of the live database at ``now`` (default: the last event's time).

    Everything is read in one read transaction, so the counts, the waiting
    items and the contradictions describe one head.
    """
    with state_at(store, None) as (connection, last):
        ctx = context(connection, clock(store, last, now))
        contradictions = _contradictions(ctx)
        counts = {**host_counts(ctx), "lifecycleContradictions": len(contradictions)}
        runs = tuple(
            _waiting(ctx, "run", row, row["run_id"], diagnose_run(store, ctx, row, last))
            for row in ctx.all(_OPEN_RUNS)
        )
        interactions = tuple(
            _waiting(
                ctx,
                "interaction",
                row,
                row["request_id"],
                diagnose_interaction(store, ctx, row, last),
            )
            for row in ctx.all(_WAITING_INTERACTIONS)
        )
        return Overview(
            head_seq=last,
            now=ctx.now,
            counts=dict(sorted(counts.items())),
            runs=runs,
            interactions=interactions,
            contradictions=contradictions,
        )


def overview_receipt(store: EventStore, now: int) -> object:
    """``state.status``'s ``overview`` member: the overview as ``pwf status --json`` prints it."""
    return msgspec.to_builtins(overview(store, now))


def _contradictions(ctx: Context) -> tuple[Contradiction, ...]:
    return tuple(
        Contradiction(
            run_id=row["run_id"], run_status=row["run_status"], queue_status=row["queue_status"]
        )
        for row in ctx.all(_PAIRS)
        if row["queue_status"] not in ALLOWED_LIFECYCLE.get(row["run_status"], ())
    )


def _waiting(
    ctx: Context, subject: str, row: Row, subject_id: str, diagnosis: tuple[Finding, ...]
) -> Waiting:
    first = diagnosis[0] if diagnosis else None
    since_seq = None if first is None else first.since_seq
    since_at = None
    if since_seq is not None:
        value = ctx.value("SELECT at FROM events WHERE seq = ?", since_seq)
        since_at = None if value is None else int(value)
    return Waiting(
        subject=subject,
        id=subject_id,
        run_id=row["run_id"],
        status=row["status"],
        rule=None if first is None else first.rule,
        summary=None if first is None else first.summary,
        since_seq=since_seq,
        since_at=since_at,
        waiting_ms=None if since_at is None else max(0, ctx.now - since_at),
        diagnosis=diagnosis,
    )
