"""The decisions of a served host: its claim, recovery, connections and stop (HOST §1).

Imports the command path and commands.  :class:`ServedHost` is the
:class:`~pwf.host.Host` of ``pwf serve``: it records under the host's actor
and epoch, and its gate answers executed and maintenance commands
``unavailable`` once it is stopping or its claim is gone (DOMAIN §7.3).  The
process, the socket and the clock are :mod:`pwf.server`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from pwf.commands import refuse
from pwf.commands.hostclaim import (
    Claim,
    acquire,
    holds,
    is_live,
    orphan_workers,
    previous,
    release,
    renew,
)
from pwf.commands.sessions import detach, recover_turns
from pwf.events import Actor, Cause
from pwf.host import Host
from pwf.host._context import context
from pwf.store import EventStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context, Row
    from pwf.store import StoreTransaction

__all__ = ["STOPPING", "Identity", "Recovery", "ServedHost"]

STOPPING: Final = "Workflow host is stopping"


class Identity(NamedTuple):
    """Who the host process is: its host id, pid and process start identity."""

    host_id: str
    pid: int
    start_identity: str


class Recovery(NamedTuple):
    """What starting after the previous host changed (HOST §1.7, DOMAIN §10.6)."""

    epoch: int
    unclean: bool
    heartbeat: int | None
    orphaned_workers: int
    recovered_attempts: int
    detached_coordinators: int


class ServedHost(Host[EventStore]):
    """A host that holds the claim and answers connections."""

    def __init__(
        self,
        store: EventStore,
        identity: Identity,
        *,
        new_epoch: Callable[[], str] | None = None,
    ) -> None:
        """Bind the store and the process identity; nothing is claimed yet."""
        super().__init__(store, actor=Actor(type="host", id=identity.host_id), new_epoch=new_epoch)
        self.identity = identity
        self.claim: Claim | None = None
        self.stopping = False
        self.gate = self._closed
        self._host_row: tuple[StoreTransaction, Row | None] | None = None
        """The host row as a group's transaction read it; only this host's claim events move it."""

    def _closed(self, ctx: Context) -> str | None:
        """Why commands are refused now: stopping, no claim, or the claim was lost.

        In a group's transaction the host row is read once: the write lock is
        held, and only :meth:`start`, :meth:`renew` and :meth:`release` write
        it, each forgetting the row it read.  Each request still checks the
        lease against its own ``now``.
        """
        claim = self.claim
        if self.stopping or claim is None:
            return STOPPING
        group = self.shared
        if group is None:
            live = is_live(ctx, claim)
        else:
            cached = self._host_row
            if cached is None or cached[0] is not group:
                cached = self._host_row = (group, previous(ctx))
            live = holds(cached[1], claim, ctx.now)
        return None if live else STOPPING

    def _ctx(self, tx: StoreTransaction, now: int, operation: str) -> Context:
        return context(tx, now, self.actor, Cause(operation=operation), self.mint)

    def start(self, token_hash: str, lease_ms: int, now: int) -> Recovery:
        """Take the claim, then recover from the host before it, in one transaction.

        HOST §1.5 steps 5-7.  Lease expiry and worker orphaning happen only
        when the previous row still names another host (an unclean exit);
        the model-turn recovery of §10.6 runs after any earlier host, with
        its last heartbeat when it did not release.  Coordinators left by
        earlier connections are detached: no connection of this host owns them.

        Raises:
            CommandError: a live host owns the claim, or the lease is not positive.
        """
        who = self.identity
        self._host_row = None
        with self.transaction() as tx:
            ctx = self._ctx(tx, now, "host.start")
            before = previous(ctx)
            claim = acquire(
                ctx,
                host_id=who.host_id,
                token_hash=token_hash,
                pid=who.pid,
                identity=who.start_identity,
                lease_ms=lease_ms,
            )
            unclean = before is not None and before["host_id"] not in (None, who.host_id)
            heartbeat = before["heartbeat_at"] if unclean and before is not None else None
            orphaned = orphan_workers(ctx, claim.epoch) if unclean else 0
            recovered = recover_turns(ctx, heartbeat) if before is not None else 0
            detached = self._detach_where(ctx, None)
        self.claim = claim
        self.host_epoch = claim.epoch
        return Recovery(claim.epoch, unclean, heartbeat, orphaned, recovered, detached)

    def renew(self, lease_ms: int, now: int) -> None:
        """The heartbeat.

        Raises:
            CommandError: "Pi Workflows host claim lost".
        """
        claim = self.claim
        if claim is None:
            raise refuse("Pi Workflows host claim lost")
        self._host_row = None
        try:
            with self.transaction() as tx:
                renew(self._ctx(tx, now, "host.heartbeat"), claim, lease_ms)
        finally:
            self._host_row = None

    def detach_connection(self, connection_id: str, now: int) -> int:
        """A connection closed: detach every coordinator it held (§1.16, §10.5)."""
        with self.transaction() as tx:
            return self._detach_where(self._ctx(tx, now, "session.detach"), connection_id)

    def release(self, now: int) -> bool:
        """Stop: detach every coordinator, then give the claim up; False if it was not ours.

        Nothing is touched when the claim went to another host meanwhile.
        """
        claim, self.claim = self.claim, None
        self._host_row = None
        if claim is None:
            return False
        with self.transaction() as tx:
            ctx = self._ctx(tx, now, "host.stop")
            row = previous(ctx)
            if row is None or row["epoch"] != claim.epoch or row["host_id"] != claim.host_id:
                return False
            self._detach_where(ctx, None)
            return release(ctx, claim)

    @staticmethod
    def _detach_where(ctx: Context, connection_id: str | None) -> int:
        rows = ctx.all(
            "SELECT target_session_id, coordinator_epoch, connection_id FROM session_coordinators"
            " ORDER BY target_session_id"
        )
        count = 0
        for row in rows:
            if connection_id is None or row["connection_id"] == connection_id:
                count += detach(ctx, row["target_session_id"], row["coordinator_epoch"])
        return count
