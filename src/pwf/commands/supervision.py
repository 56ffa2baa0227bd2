"""What a served host decides about the worker processes it supervises (HOST §4.1, §7).

Imports commands and events.  A supervised worker's row names the host
epoch that started it; the process behind it is the served host's, so its
pid, its end and what happens to the run after it are recorded here, as
events, when the host reports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands import Context, refuse
from pwf.commands.interactions import finish_validation
from pwf.commands.runs import TERMINAL, get_run, queue_of
from pwf.commands.workers import CLAIM_CANDIDATES, claimable, park
from pwf.events import RunLeasesRenewed, WorkerAttached, WorkerEnded
from pwf.events.runs import MOST_CLAIMS

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from pwf.commands import Row
    from pwf.events.runs import WorkerEnd

__all__ = [
    "DIAGNOSTIC_BYTES",
    "attach_process",
    "launchable",
    "recover_abandoned",
    "renew_claim",
    "renew_claims",
    "supervised_worker",
    "worker_gone",
]

DIAGNOSTIC_BYTES: Final = 65_536
"""A worker's stderr is kept up to this many bytes as its diagnostic (HOST §7.4)."""


def _active(ctx: Context, worker_epoch: str) -> Row | None:
    return ctx.one(
        "SELECT * FROM run_workers WHERE worker_epoch = ? AND status IN ('starting', 'running')",
        worker_epoch,
    )


def attach_process(
    ctx: Context, run_id: str, worker_epoch: str, pid: int, start_identity: str
) -> None:
    """The worker's process started: record its pid and start identity (§7.3).

    Raises:
        CommandError: "Worker epoch is not starting: {epoch}".
    """
    row = _active(ctx, worker_epoch)
    if row is None or row["status"] != "starting" or row["pid"] is not None:
        raise refuse(f"Worker epoch is not starting: {worker_epoch}")
    ctx.emit(
        WorkerAttached(
            run_id=run_id, worker_epoch=worker_epoch, pid=pid, start_identity=start_identity
        )
    )


def supervised_worker(ctx: Context, run_id: str, host_epoch: int) -> Row | None:
    """The active worker row of ``run_id`` that host epoch ``host_epoch`` supervises, if any."""
    return ctx.one(
        "SELECT * FROM run_workers WHERE run_id = ? AND host_epoch = ?"
        " AND status IN ('starting', 'running')",
        run_id,
        host_epoch,
    )


def worker_gone(  # noqa: PLR0913 - the facts of one exit
    ctx: Context,
    run_id: str,
    worker_epoch: str,
    status: WorkerEnd,
    *,
    exit_code: int | None = None,
    signal: str | None = None,
    diagnostic: str | None = None,
) -> str:
    """A supervised worker's process ended: finish its row, then exit recovery (§7.11).

    Returns what happened: ``finished`` (a message had already ended the
    worker; nothing changes), ``ended`` (the row is finished; the run needs
    nothing: it ended, waits, or its claim went elsewhere) or ``parked``
    (the run was parked for a new worker epoch, after rejecting a
    submission that was still validating).
    """
    if _active(ctx, worker_epoch) is None:
        return "finished"
    ctx.emit(
        WorkerEnded(
            run_id=run_id,
            worker_epoch=worker_epoch,
            status=status,
            exit_code=exit_code,
            signal=signal,
            diagnostic=diagnostic,
        )
    )
    run = get_run(ctx, run_id)
    queue = queue_of(ctx, run_id)
    if run is None or queue is None or run.status in TERMINAL or run.status == "waiting":
        return "ended"
    if queue.owner_worker_epoch not in (None, worker_epoch):
        return "ended"
    error = f"Workflow worker {status} before it completed interaction validation"
    validating = ctx.all(
        "SELECT s.submission_id FROM interactive_submissions s JOIN interactive_requests r"
        " ON r.request_id = s.request_id WHERE r.run_id = ? AND s.outcome = 'validating'",
        run_id,
    )
    for row in validating:
        finish_validation(
            ctx, row["submission_id"], "rejected", {"error": error, "status": "rejected"}
        )
    park(ctx, run_id, error if validating else f"Workflow worker {status}")
    return "parked"


def launchable(ctx: Context, busy: Collection[str], most: int | None = None) -> list[str]:
    """The runs a supervising host should start a worker for, in the order of §7.1.

    First runs whose submission waits for validation (oldest submission
    first), then queued runs and claimable parked runs, oldest first; never
    one in ``busy`` (the host's active set) or with a live lease.  The
    first ``most`` of them, or all.  Of the queued and parked runs, as many
    are read as could be skipped before ``most`` are chosen, unless more
    were: runs queued faster than workers start are not all read at each claim.
    """
    validating = ctx.all(
        "SELECT r.run_id FROM interactive_submissions s JOIN interactive_requests r"
        " ON r.request_id = s.request_id WHERE s.outcome = 'validating'"
        " ORDER BY s.submitted_at, s.submission_id"
    )
    bound = -1 if most is None else most + len(busy) + len(validating)
    candidates = ctx.all(f"{CLAIM_CANDIDATES} LIMIT ?", bound)
    chosen = _chosen(ctx, [row["run_id"] for row in [*validating, *candidates]], busy, most)
    if most is not None and len(chosen) < most and len(candidates) == bound:
        return launchable(ctx, busy)[:most]  # more were skipped than the bound allowed for
    return chosen


def _chosen(ctx: Context, run_ids: list[str], busy: Collection[str], most: int | None) -> list[str]:
    """The first ``most`` of ``run_ids`` a worker may be started for (all with None)."""
    chosen: list[str] = []
    for run_id in run_ids:
        if len(chosen) == most:
            break
        if run_id in busy or run_id in chosen:
            continue
        run = get_run(ctx, run_id)
        queue = queue_of(ctx, run_id)
        if run is None or queue is None:
            continue
        if queue.owner_worker_epoch is not None and queue.held(ctx.now):
            continue
        if claimable(ctx, run, queue) or _validating(ctx, run_id):
            chosen.append(run_id)
    return chosen


def _validating(ctx: Context, run_id: str) -> bool:
    return (
        ctx.one(
            "SELECT 1 FROM interactive_submissions s JOIN interactive_requests r"
            " ON r.request_id = s.request_id WHERE r.run_id = ? AND s.outcome = 'validating'",
            run_id,
        )
        is not None
    )


def renew_claim(ctx: Context, run_id: str, worker_epoch: str, lease_ms: int) -> None:
    """The heartbeat renews the claim of a run its worker still holds (§1.9).

    Raises:
        CommandError: "Run claim expired" when the lease lapsed, moved or the run ended.
    """
    if renew_claims(ctx, [(run_id, worker_epoch)], lease_ms):
        raise refuse("Run claim expired")


def renew_claims(ctx: Context, held: Sequence[tuple[str, str]], lease_ms: int) -> list[str]:
    """One heartbeat's renewals of ``(run, worker epoch)`` claims, in one event (ADR 0118, 0119).

    A claim is renewed while its worker still owns the run's queue entry
    under an unexpired lease and the run has not ended; the others are
    returned, by run, and the rest renewed all the same, every one to
    ``now + lease_ms``.  One event a run and heartbeat was most of what a
    served host wrote while nothing happened.
    """
    refused: list[str] = []
    renewed: dict[tuple[str, str], None] = {}
    for run_id, worker_epoch in held:
        queue = queue_of(ctx, run_id)
        if (
            queue is None
            or queue.owner_worker_epoch != worker_epoch
            or not queue.held(ctx.now)
            or queue.status in ("done", "failed", "cancelled")
        ):
            refused.append(run_id)
        else:
            renewed[run_id, worker_epoch] = None
    claims = tuple(renewed)
    for first in range(0, len(claims), MOST_CLAIMS):
        ctx.emit(
            RunLeasesRenewed(
                claims=claims[first : first + MOST_CLAIMS], lease_expires_at=ctx.now + lease_ms
            )
        )
    return refused


def recover_abandoned(ctx: Context) -> list[str]:
    """Park runs left running with no live worker, so a new epoch claims them (§7.13).

    After an unclean host exit the old epoch's workers are ``orphaned`` and
    their runs keep a running queue entry that nobody owns; they are parked
    as exit recovery would have parked them.
    """
    rows = ctx.all(
        "SELECT q.run_id FROM run_queue q JOIN runs r ON r.run_id = q.run_id"
        " WHERE q.status IN ('starting', 'running') AND r.status IN ('queued', 'running')"
        " AND (q.owner_worker_epoch IS NULL OR q.lease_expires_at <= ?)"
        " AND NOT EXISTS (SELECT 1 FROM run_workers w WHERE w.run_id = q.run_id"
        " AND w.status IN ('starting', 'running'))"
        " ORDER BY q.created_at, q.run_id",
        ctx.now,
    )
    for row in rows:
        park(ctx, row["run_id"], "Workflow worker orphaned")
    return [row["run_id"] for row in rows]
