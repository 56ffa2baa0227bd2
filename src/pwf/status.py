"""The operator's overview: counts, everything waiting with its diagnosis, contradictions.

:func:`overview` reads the live projections in one read transaction and
answers what ``pwf status`` prints and the served ``state.status`` returns:
the ``host.status`` counts (HOST §3.1, with ``lifecycleContradictions``),
the runs that have not ended and the interactions not yet consumed, each
with the diagnosis of ``pwf explain`` (the same rules, ADR 0016), the seq
since which its first finding holds and how long ago that was, and the
run/queue pairs outside the allowed lifecycle table (ADR 0034).  Each list
is cut at a limit and counted in full by aggregate queries (ADR 0079).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from pwf.commands.views import host_counts
from pwf.explain import (
    Finding,
    context,
    diagnose_interaction,
    diagnose_run,
    state_at,
)
from pwf.views.status import ALLOWED_LIFECYCLE, allowed_pair
from pwf.views.status import contradictions as outside_count

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pwf.commands import Context, Row
    from pwf.store import EventStore

__all__ = [
    "ALLOWED_LIFECYCLE",
    "Contradiction",
    "Overview",
    "Parts",
    "Waiting",
    "overview",
    "overview_parts",
    "overview_receipt",
]

LIMIT: Final = 20
"""Items each list shows by default; the counts above them cover the whole set (ADR 0079)."""

ENDED: Final = ("completed", "failed", "timed_out", "cancelled")
"""Run statuses that end a run: the runs list names every run with another status."""

_NOT_ENDED: Final = "status IN ('queued', 'running', 'waiting')"
"""The statuses that are not in :data:`ENDED` (the runs table's CHECK allows no other); an
``IN`` list lets SQLite read them through ``runs_status_idx``."""
_UNCONSUMED: Final = (
    "interactive_requests INDEXED BY interactive_requests_open_idx"
    " WHERE status = 'pending' OR (status = 'settled' AND consumed_at IS NULL)"
)
"""The requests not yet consumed, read from the partial index of exactly them: left to choose,
SQLite read the settled ones by ``status`` and walked every answered request (ADR 0095)."""
_OPEN_RUN_IDS: Final = f"SELECT run_id FROM runs WHERE {_NOT_ENDED} ORDER BY created_at, run_id"  # noqa: S608 - constants
_OPEN_RUN_COUNTS: Final = (
    f"SELECT status, count(*) AS n FROM runs WHERE {_NOT_ENDED} GROUP BY status"  # noqa: S608 - constants
)
_WAITING_INTERACTION_IDS: Final = (
    f"SELECT request_id FROM {_UNCONSUMED}"  # noqa: S608 - constants
    " ORDER BY created_at, request_id"
)
_WAITING_INTERACTION_COUNTS: Final = (
    f"SELECT status, count(*) AS n FROM {_UNCONSUMED} GROUP BY status"  # noqa: S608 - constants
)


_OUTSIDE: Final = (
    "FROM runs r JOIN run_queue q ON q.run_id = r.run_id"
    f" WHERE NOT ({allowed_pair('r.status', 'q.status')})"
)
"""The run/queue pairs outside HOST §3.1's lifecycle table (one table: :mod:`pwf.views.status`)."""
_PAIRS: Final = (
    "SELECT r.run_id AS run_id, r.status AS run_status, q.status AS queue_status "
    + _OUTSIDE
    + " ORDER BY r.created_at, r.run_id"
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
    """What ``pwf status`` shows: counts, the open runs and interactions, contradictions.

    ``runs`` lists runs that have not ended (any status but completed,
    failed, timed_out and cancelled) and ``interactions`` those not yet
    consumed (pending, or settled and unconsumed), oldest first, at most
    ``limit`` of each; ``open_runs`` and ``open_interactions`` count each
    whole set by status, so a list that stops short says how many more there
    are.  ``counts`` are ``host.status``'s, whose ``waitingRuns`` counts only
    runs whose status is ``waiting``: a part of the runs list, not its length.
    """

    head_seq: int
    now: int
    limit: int | None
    counts: dict[str, object]
    open_runs: dict[str, int]
    open_interactions: dict[str, int]
    runs: tuple[Waiting, ...]
    interactions: tuple[Waiting, ...]
    contradictions: tuple[Contradiction, ...]

    @property
    def contradictory(self) -> bool:
        """Whether any run/queue pair is outside the allowed table."""
        return bool(self.contradictions)

    @property
    def runs_total(self) -> int:
        """How many runs have not ended (the whole set ``runs`` lists the first of)."""
        return sum(self.open_runs.values())

    @property
    def interactions_total(self) -> int:
        """How many interactions are not consumed (the set ``interactions`` lists)."""
        return sum(self.open_interactions.values())


class Parts(NamedTuple):
    """An overview whose lists are read one item at a time.

    ``head`` has every member but empty ``runs`` and ``interactions``; the
    iterators give them, each item read and diagnosed when it is asked for,
    inside the read transaction that :func:`overview_parts` holds open.
    """

    head: Overview
    runs: Iterator[Waiting]
    interactions: Iterator[Waiting]


def _head(ctx: Context, last: int, limit: int | None) -> Overview:
    """The overview's counts and contradictions, its lists still empty."""
    outside = outside_count(ctx)
    contradictions = tuple(
        Contradiction(
            run_id=row["run_id"], run_status=row["run_status"], queue_status=row["queue_status"]
        )
        for row in (ctx.all(_PAIRS + _bound(limit)) if outside else ())
    )
    counts = {**host_counts(ctx), "lifecycleContradictions": outside}
    return Overview(
        head_seq=last,
        now=ctx.now,
        limit=limit,
        counts=dict(sorted(counts.items())),
        open_runs=_by_status(ctx, _OPEN_RUN_COUNTS),
        open_interactions=_by_status(ctx, _WAITING_INTERACTION_COUNTS),
        runs=(),
        interactions=(),
        contradictions=contradictions,
    )


def _bound(limit: int | None) -> str:
    return "" if limit is None else f" LIMIT {int(limit)}"


@contextmanager
def overview_parts(store: EventStore, now: int, limit: int | None = LIMIT) -> Iterator[Parts]:
    """The overview at ``now`` with its lists as iterators, each cut at ``limit`` (None: all).

    Everything is read in one read transaction, so the counts, the listed
    items and the contradictions describe one head.  Counts come from
    aggregate queries and the ``runs`` read model's kept totals (ADR 0094);
    the lists hold only ids until an item is read, and only the listed items
    are diagnosed, so the cost follows ``limit`` and the memory one item,
    not the number of open runs.
    """
    with state_at(store, None) as (connection, last):
        ctx = context(connection, now)
        head = _head(ctx, last, limit)
        run_ids = [row["run_id"] for row in ctx.all(_OPEN_RUN_IDS + _bound(limit))]
        request_ids = [
            row["request_id"] for row in ctx.all(_WAITING_INTERACTION_IDS + _bound(limit))
        ]
        runs = (
            _waiting(ctx, "run", row, row["run_id"], diagnose_run(store, ctx, row, last))
            for row in _rows(ctx, "SELECT * FROM runs WHERE run_id = ?", run_ids)
        )
        interactions = (
            _waiting(
                ctx,
                "interaction",
                row,
                row["request_id"],
                diagnose_interaction(store, ctx, row, last),
            )
            for row in _rows(
                ctx, "SELECT * FROM interactive_requests WHERE request_id = ?", request_ids
            )
        )
        yield Parts(head, runs, interactions)


def overview(store: EventStore, now: int, limit: int | None = LIMIT) -> Overview:
    """The overview of the live database at ``now``, each list cut at ``limit`` (None: all)."""
    with overview_parts(store, now, limit) as parts:
        return msgspec.structs.replace(
            parts.head, runs=tuple(parts.runs), interactions=tuple(parts.interactions)
        )


def _rows(ctx: Context, sql: str, keys: list[str]) -> Iterator[Row]:
    for key in keys:
        row = ctx.one(sql, key)
        if row is not None:
            yield row


def overview_receipt(store: EventStore, now: int) -> object:
    """``state.status``'s ``overview`` member: what ``pwf status --json`` prints, same bound."""
    return msgspec.to_builtins(overview(store, now))


def _by_status(ctx: Context, sql: str) -> dict[str, int]:
    return {row["status"]: int(row["n"]) for row in sorted(ctx.all(sql), key=lambda r: r["status"])}


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
