"""The host claim: acquire, renew, release, and what a new epoch does to the old one.

DOMAIN §5.1 and HOST §1.7-§1.8.  Imports commands, events and errors.  The
token is made at the edge; only its SHA-256 reaches a decider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pwf.commands import refuse
from pwf.events import HostClaimed, HostReleased, HostRenewed, WorkerEnded

if TYPE_CHECKING:
    from pwf.commands import Context, Row

__all__ = ["Claim", "acquire", "holds", "is_live", "orphan_workers", "previous", "release", "renew"]


class Claim(NamedTuple):
    """What identifies one host's claim; every renewal and release must match all of it."""

    epoch: int
    host_id: str
    token_hash: str
    pid: int
    process_start_identity: str


def previous(ctx: Context) -> Row | None:
    """The host row before this start, or None for a database never served.

    A database never served has no ``host_state`` table at all (its first
    host event makes it).
    """
    if not ctx.value("SELECT count(*) FROM sqlite_master WHERE name = 'host_state'"):
        return None
    return ctx.one("SELECT * FROM host_state WHERE id = 1")


def is_live(ctx: Context, claim: Claim) -> bool:
    """Whether ``claim`` is still the live claim at ``ctx.now``."""
    return holds(previous(ctx), claim, ctx.now)


def holds(row: Row | None, claim: Claim, now: int) -> bool:
    """Whether the host row ``row`` (:func:`previous`) is ``claim``, live at ``now``."""
    return (
        row is not None
        and row["epoch"] == claim.epoch
        and row["host_id"] == claim.host_id
        and row["token_hash"] is not None
        and bytes(row["token_hash"]).hex() == claim.token_hash
        and row["pid"] == claim.pid
        and row["process_start_identity"] == claim.process_start_identity
        and row["expires_at"] > now
    )


def acquire(  # noqa: PLR0913 - one argument per claim member
    ctx: Context, *, host_id: str, token_hash: str, pid: int, identity: str, lease_ms: int
) -> Claim:
    """Take the claim with the next epoch (§5.1 Acquire).

    Raises:
        CommandError: the lease is not positive, or a live host owns the claim.
    """
    if lease_ms <= 0:
        raise refuse("Host lease duration must be positive")
    row = previous(ctx)
    if row is not None and row["host_id"] is not None and row["expires_at"] > ctx.now:
        raise refuse(f"A live Pi Workflows host already owns epoch {row['epoch']}")
    epoch = (0 if row is None else int(row["epoch"])) + 1
    ctx.emit(
        HostClaimed(
            epoch=epoch,
            host_id=host_id,
            token_hash=token_hash,
            pid=pid,
            process_start_identity=identity,
            expires_at=ctx.now + lease_ms,
        )
    )
    return Claim(epoch, host_id, token_hash, pid, identity)


def renew(ctx: Context, claim: Claim, lease_ms: int) -> None:
    """The heartbeat (§5.1 Renew).

    Raises:
        CommandError: the claim is no longer this host's, or its lease ran out.
    """
    if not is_live(ctx, claim):
        raise refuse("Pi Workflows host claim lost")
    ctx.emit(HostRenewed(epoch=claim.epoch, expires_at=ctx.now + lease_ms))


def release(ctx: Context, claim: Claim) -> bool:
    """Give the claim up; False when it was not (or no longer) exactly this claim."""
    row = previous(ctx)
    if (
        row is None
        or row["epoch"] != claim.epoch
        or row["host_id"] != claim.host_id
        or bytes(row["token_hash"]).hex() != claim.token_hash
    ):
        return False
    ctx.emit(HostReleased(epoch=claim.epoch))
    return True


def orphan_workers(ctx: Context, epoch: int) -> int:
    """§1.7: workers of earlier host epochs that were still active become ``orphaned``."""
    rows = ctx.all(
        "SELECT worker_epoch, run_id FROM run_workers WHERE host_epoch IS NOT NULL"
        " AND host_epoch < ? AND status IN ('starting', 'running') ORDER BY worker_epoch",
        epoch,
    )
    for row in rows:
        ctx.emit(
            WorkerEnded(run_id=row["run_id"], worker_epoch=row["worker_epoch"], status="orphaned")
        )
    return len(rows)
