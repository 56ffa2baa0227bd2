"""Subscriptions on served connections and the events they push (HOST §2.1-§2.6, §2.12).

The payloads come from :mod:`pwf.views`, computed on the writer thread in
one read transaction against committed state; the event loop writes them.
A subscription sends only when its payload's hash changed, and ends on
unwatch, replacement or when its connection closes.

A publish covers every connection at once, after each response and on a
short timer, and costs nothing while nothing changed: it reads the
database only when the writer committed since the last one, a new
subscription waits for its first payload, the set of live workers changed,
or a deadline of the clock passed (a worker's lease, a session's retained
terminal).  Then it reads which runs and sessions the new events touched
and recomputes only the subscriptions that show them, each payload once
for all the connections that watch it (ADR 0078).

A connection backed up with unread bytes is left out of publishes until
its client has read them; the first publish after looks at all of its
subscriptions, so it is sent each payload that changed meanwhile, once,
with the next revision (ADR 0111).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Final, NamedTuple, cast

import msgspec

from pwf import canonical
from pwf.commands import Context, Result, refuse
from pwf.commands.sessionview import RETAIN_MS
from pwf.errors import CommandError, PwfError
from pwf.protocol.client import (
    ClientEvent,
    ClientResponse,
    collapse_error,
    encode_event,
    encode_line,
)
from pwf.protocol.schemas import Subscribed, receipt
from pwf.server._watches import WatchBound
from pwf.views import Subscription, subscription_of, unwatch_id
from pwf.views.subscriptions import (
    EVENTS,
    NOTHING,
    Changes,
    Shared,
    Subscriptions,
    changes_since,
    lapsed_leases,
    runs_touched,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable

    from pwf.host.served import ServedHost
    from pwf.protocol.client import ClientRequest
    from pwf.server._connections import Connection
    from pwf.server._writer import Writer

__all__ = ["PUBLISH_SECONDS", "SUBSCRIBING", "Views"]

log = logging.getLogger("pwf.server")

PUBLISH_SECONDS: Final = 0.02
"""How often the loop looks for a change no response announced (a worker's, the clock's)."""
EVERYTHING: Final = Changes(everything=True)
KINDS: Final = {event: kind for kind, event in EVENTS.items()}
"""The subscription kind of each event a publish sends (metrics)."""
_HOLE: Final = "\x00pwf payload\x00"
"""Stands for the payload while an event's own members are encoded (see :class:`_Lines`)."""
_HOLE_BYTES: Final = b'"payload":' + canonical.encode(_HOLE)


class _Lines:
    """The lines of one publish: each payload encoded once, whatever the watchers.

    Canonical JSON of an object is its members' canonical JSON in key
    order, so an event's line is its own members encoded around a hole,
    with the payload's canonical bytes put in the hole: the same bytes
    :func:`encode_event` gives, at the cost of one payload for every
    connection that watches it.  The line's size is checked as before.
    """

    def __init__(self, encoded: dict[int, bytes] | None = None) -> None:
        """Start from ``encoded``: payloads' canonical bytes by ``id``, made with their digests."""
        self._payloads: dict[int, bytes] = {} if encoded is None else encoded

    def line(self, event: ClientEvent) -> bytes:
        payload = event.payload
        encoded = self._payloads.get(id(payload))
        if encoded is None:
            encoded = self._payloads[id(payload)] = canonical.encode(payload)
        framed = encode_event(msgspec.structs.replace(event, payload=_HOLE))
        head, found, tail = framed.partition(_HOLE_BYTES)
        if not found:  # no hole (it cannot happen): encode the event whole
            return encode_line(encode_event(event))
        return encode_line(b"".join((head, b'"payload":', encoded, tail)))


SUBSCRIBING: Final = frozenset({"view.runs.watch", "view.run.watch", "view.run.unwatch"})
"""The operations answered here; the rest go to the host."""


def _read_only(_events: object) -> object:
    raise refuse("views append nothing")


def _read(host: ServedHost, now: int, work: Callable[[Context], object]) -> object:
    """``work`` over one read snapshot of the committed projections."""
    with host.store.snapshot() as reader:
        return work(Context(reader, _read_only, now))


class _Plan(NamedTuple):
    """What one publish must look at, decided on the loop before it reads."""

    everything: bool
    seen: int
    woke: frozenset[str]
    subscriptions: dict[str, Subscriptions]
    owed: frozenset[str]
    """Connections left out of publishes while backed up: all of theirs is looked at."""
    flipped: frozenset[str]
    """Runs whose worker started or stopped since the last publish."""
    lapsed: tuple[int, int] | None
    """When leases ran out since the last publish looked (after, until), if one may have."""


class _Published(NamedTuple):
    head: int
    changes: Changes
    events: dict[str, list[ClientEvent]]
    failed: dict[str, str]
    lease: int | None
    shared: Shared
    """The payloads computed, kept alive with their canonical bytes (:attr:`Shared.encoded`)."""


def _published(ctx: Context, plan: _Plan, live: Callable[[Context, str], bool]) -> _Published:
    """On the writer thread: what changed since ``plan.seen`` and the events it makes."""
    head = int(ctx.value("SELECT seq FROM _pwf_head") or 0)
    if plan.everything:
        changes = EVERYTHING
    elif head == plan.seen:
        changes = NOTHING
    else:
        changes = changes_since(ctx, plan.seen, head)
    if plan.woke and not changes.everything:
        changes = Changes(
            listed=changes.listed, runs=changes.runs, sessions=changes.sessions | plan.woke
        )
    lapsed = [] if plan.lapsed is None else lapsed_leases(ctx, *plan.lapsed)
    changes = runs_touched(ctx, {*plan.flipped, *lapsed}, changes)
    shared = Shared()
    events: dict[str, list[ClientEvent]] = {}
    failed: dict[str, str] = {}
    for connection_id, subscriptions in plan.subscriptions.items():
        looked = EVERYTHING if connection_id in plan.owed else changes
        try:
            events[connection_id] = subscriptions.publish(ctx, live, looked, shared)
        except PwfError as error:
            failed[connection_id] = str(error)
    lease = ctx.value(
        "SELECT min(lease_expires_at) FROM run_queue"
        " WHERE owner_worker_epoch IS NOT NULL AND lease_expires_at > ?",
        ctx.now,
    )
    return _Published(
        head,
        changes,
        events,
        failed,
        None if lease is None else int(lease),
        shared,
    )


class Views:
    """Every connection's subscriptions."""

    def __init__(
        self,
        writer: Writer,
        clock: Callable[[], int],
        live: Callable[[Context, str], bool],
        *,
        connections: set[Connection] | None = None,
        active: Callable[[], Collection[str]] | None = None,
    ) -> None:
        """Bind the writer (reads run on its thread), the clock and worker liveness.

        ``connections`` is the host's set of open connections, which every
        publish covers; ``active`` the runs with a supervised worker, when
        liveness comes from a supervisor rather than the log.
        """
        self.writer = writer
        self.clock = clock
        self.live = live
        self.connections: set[Connection] = set() if connections is None else connections
        self.active = active
        self.subscriptions: dict[str, Subscriptions] = {}
        self.bound = WatchBound()
        """How many subscriptions the host keeps, in all and per client process (ADR 0124)."""
        self.computed = 0
        """Payloads computed so far (the tests and the scale bench read it)."""
        self.pushes: dict[str, int] = {}
        """Events sent so far, by subscription kind (metrics)."""
        self.recompute_seconds = 0.0
        """Writer-thread time spent computing publishes' payloads so far (metrics)."""
        self._seen = -1
        """The head seq the last publish stood at; -1 before the first (everything is new)."""
        self._settled = -1
        self._live_runs: frozenset[str] = frozenset()
        self._wakes: dict[str, int] = {}
        """When each session's view may change by the clock alone (a retained terminal)."""
        self._lease: int | None = None
        """The first lease after :attr:`_looked` that runs out: a publish looks again then."""
        self._looked = 0
        """The clock when the last publish read (epoch ms): leases up to it were looked at."""
        self._running = False
        self._again = False
        self._fresh = False
        """A subscription was made since the last publish: it waits for its first payload."""
        self._owed: set[str] = set()
        """Connections left out of a publish while backed up (ADR 0111)."""
        self.changed = asyncio.Event()
        """Set when what a publish reads may have changed (:meth:`stir`); the publish timer
        waits on it instead of looking every :data:`PUBLISH_SECONDS` while no deadline of the
        clock is pending (:meth:`timed`)."""

    def stir(self) -> None:
        """Something a publish reads may have changed (ADR 0078 D2).

        A job that may have written settled, a subscription was made, or the
        runs with a supervised worker changed.
        """
        self.changed.set()

    def timed(self) -> bool:
        """Whether a deadline of the clock is pending: a publish must then look as time passes."""
        return bool(self._wakes) or self._lease is not None

    def _of(self, connection: Connection) -> Subscriptions:
        found = self.subscriptions.get(connection.id)
        if found is None:
            found = self.subscriptions[connection.id] = Subscriptions(connection.id)
        return found

    async def answer(self, connection: Connection, request: ClientRequest) -> ClientResponse:
        """``view.runs.watch``, ``view.run.watch`` and ``view.run.unwatch``."""
        try:
            if request.operation == "view.run.unwatch":
                self.bound.unwatch(self._of(connection), connection.peer, unwatch_id(request))
                return _answer(request, Result(receipt=receipt(Subscribed(subscribed=False))))
            wanted = await self.writer.submit(
                lambda host: _read(
                    host, self.clock(), lambda ctx: subscription_of(ctx, request, self.live)
                ),
                read=True,
            )
        except CommandError as error:
            return _answer(request, Result(outcome=error.outcome, error=str(error)))
        if isinstance(wanted, Result):
            return _answer(request, wanted)
        assert isinstance(wanted, Subscription)
        refused = self._watch(connection, wanted)
        if refused is not None:
            return _answer(request, Result(outcome="rejected", error=refused))
        return _answer(request, Result(receipt=receipt(Subscribed(subscribed=True))))

    def session_watch(
        self, connection: Connection, request: ClientRequest
    ) -> ClientResponse | None:
        """§2.4 step 3: the session subscription is added before the coordinator is checked.

        Its answer when the host keeps no more subscriptions (ADR 0124), else None.
        """
        wanted = _session_subscription(request)
        refused = None if wanted is None else self._watch(connection, wanted)
        return (
            None if refused is None else _answer(request, Result(outcome="rejected", error=refused))
        )

    def _watch(self, connection: Connection, wanted: Subscription) -> str | None:
        """Keep ``wanted`` for ``connection``; why not, when the bound refuses a new one."""
        refused = self.bound.watch(self._of(connection), connection.peer, wanted)
        if refused is None:
            self._fresh = True
            self.stir()
        return refused

    def watching(self, connection: Connection) -> bool:
        """Whether the connection has a subscription to publish."""
        return bool(self.subscriptions.get(connection.id))

    def caught_up(self, connection: Connection) -> None:
        """A backed-up connection was read: publish it what it was left out of."""
        if connection.id in self._owed:
            self._fresh = True
            self.stir()

    def forget(self, connection: Connection) -> None:
        """The connection closed: its subscriptions end with it."""
        self._owed.discard(connection.id)
        gone = self.subscriptions.pop(connection.id, None)
        if gone:
            self.bound.removed(connection.peer, len(gone))
        if not self.subscriptions:
            self._seen = -1  # nobody watches: whoever comes next starts afresh

    async def publish(self, connection: Connection) -> None:
        """After a response on ``connection``: publish every connection (the change is anyone's)."""
        known = self.connections
        await self.publish_all(known if connection in known else {*known, connection})

    async def publish_all(self, connections: set[Connection]) -> None:
        """Send every connection the events of its subscriptions whose payload changed.

        One publish runs at a time; one asked for meanwhile runs after it.
        """
        if self._running:
            self._again = True
            return
        self._running = True
        try:
            again = True
            while again:
                self._again = False
                await self._publish(connections)
                again = self._again
        finally:
            self._running = False

    def _quiet(self, now: int) -> bool:
        """Whether nothing a subscription shows can have changed since the last publish.

        It reads no database and walks no connection: the timer asks it often.
        """
        if self._fresh or self.writer.settled != self._settled:
            return False
        if self.active is not None and frozenset(self.active()) != self._live_runs:
            return False
        wakes = [*self._wakes.values(), *([] if self._lease is None else [self._lease])]
        return not wakes or now < min(wakes)

    async def _publish(self, connections: set[Connection]) -> None:
        now = self.clock()
        if self._quiet(now):
            return
        self._fresh = False
        watched = [c for c in list(connections) if not c.closed and self.subscriptions.get(c.id)]
        if not watched:
            self._seen = -1  # nobody watches: whoever comes next starts afresh
            return
        self._owed.update(c.id for c in watched if c.backed_up)
        watching = [c for c in watched if not c.backed_up]
        if not watching:
            return  # each is published once its client has read what waits
        settled = self.writer.settled
        live_runs = frozenset(self.active()) if self.active is not None else frozenset()
        lease_passed = self._lease is not None and now >= self._lease
        plan = _Plan(
            everything=self._seen < 0,
            seen=self._seen,
            woke=frozenset(s for s, at in self._wakes.items() if now >= at),
            subscriptions={c.id: self.subscriptions[c.id] for c in watching},
            owed=frozenset(c.id for c in watching if c.id in self._owed),
            flipped=live_runs ^ self._live_runs,
            lapsed=(self._looked, now) if lease_passed else None,
        )

        def recompute(host: ServedHost) -> object:
            began = time.perf_counter()
            try:
                return _read(host, now, lambda ctx: _published(ctx, plan, self.live))
            finally:
                self.recompute_seconds += time.perf_counter() - began

        try:
            found = await self.writer.submit(recompute, read=True)
        except PwfError as error:
            log.info("client view error: %s", error)
            return
        published = cast("_Published", found)
        self._owed -= plan.owed
        self._seen, self._settled, self._live_runs = published.head, settled, live_runs
        self._looked = now
        self._lease = published.lease
        self.computed += published.shared.computed
        self._touched(published.changes, plan.subscriptions.values(), now)
        self._push(watching, published)

    def _push(self, watching: list[Connection], published: _Published) -> None:
        """Write each connection its events; close one whose payloads could not be made."""
        lines = _Lines(published.shared.encoded)
        for connection in watching:
            problem = published.failed.get(connection.id)
            if problem is not None:
                connection.server.closing(connection, f"client view error: {problem}")
                connection.close()
                continue
            for event in published.events.get(connection.id, ()):
                connection.send(lines.line(event))
                kind = KINDS.get(event.event, event.event)
                self.pushes[kind] = self.pushes.get(kind, 0) + 1

    def _touched(self, changes: Changes, watched: Iterable[Subscriptions], now: int) -> None:
        """A session touched now may change by the clock alone once its terminal's turn ages out.

        Its view keeps a terminal whose turn ended less than ``RETAIN_MS`` ago;
        a turn's end touches the session, so a session touched at ``now`` is
        looked at again just after ``now + RETAIN_MS``, and no later deadline
        is kept for it.
        """
        sessions = {s for subs in watched for s in subs.sessions()}
        for session in sessions:
            if changes.everything or session in changes.sessions:
                self._wakes[session] = now + RETAIN_MS + 1
            elif self._wakes.get(session, now + 1) <= now:
                del self._wakes[session]
        for session in [s for s in self._wakes if s not in sessions]:
            del self._wakes[session]


def _session_subscription(request: ClientRequest) -> Subscription | None:
    """The session subscription ``view.session.watch`` asks for, if its ids are given."""
    payload = request.payload
    if not isinstance(payload, dict):
        return None
    session_id, subscription_id = payload.get("sessionId"), payload.get("subscriptionId")
    if isinstance(session_id, str) and session_id and isinstance(subscription_id, str):
        return Subscription(subscription_id, "session", session_id) if subscription_id else None
    return None


def _answer(request: ClientRequest, result: Result) -> ClientResponse:
    return ClientResponse(
        request_id=request.request_id,
        outcome=result.outcome,
        receipt=result.receipt,
        error=None if result.error is None else collapse_error(result.error),
    )
