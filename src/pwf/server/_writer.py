"""One writer thread that owns the database and commits decisions in groups.

The event loop never touches SQLite.  It hands each piece of work to
:class:`Writer` and awaits the future it returns (or gets a callback).  The
thread takes every piece that arrived while it was busy, in arrival order,
and decides them one after another inside one write transaction: each in
its own savepoint (a failing one rolls back alone) and its own batch (the log
is the one that one transaction per command writes).  Work that arrives
while the group is being decided joins it, after everything before it, until
the queue is empty or the group holds :data:`MAX_GROUP` (ADR 0052); then the
group commits.  Only after the commit are their futures
settled, so an answer is never sent for work that is not durable; a whole
group is handed back to the event loop with one ``call_soon_threadsafe``
(one wake-up of the loop, not one per request).  Work
marked ``alone`` (file effects that copy the database, prune) closes the
group before it and runs in its own transactions.  ``read`` work runs
outside any write transaction, against committed state.

How a group runs is the store's (its unit of work, ADR 0087): the writer
hands it the group's work and gets one outcome each.  A client request
(``Writer.call``'s) is marked :class:`~pwf.store.unit.Repeatable`: all it
changes is in the transaction, so a store may run it again (a SQLite file
runs the requests that lead a group without savepoints and, when one fails
after writing, the group again with them, ADR 0061).  Work from
:meth:`Writer.submit` (timers, the supervisor) and ``alone`` work is
:class:`~pwf.store.unit.OnceOnly`, never run twice.  The writer counts
nothing itself: :attr:`Writer.observe` is told what metrics and tests count.

A group about to commit with an empty queue may wait a little for its
siblings (ADR 0065), as PostgreSQL's ``commit_delay`` does when at least
``commit_siblings`` other transactions are active: a connection answered
within the last :data:`SIBLING_WINDOW` seconds that has nothing in the group
is likely to send again at once (a client with one request outstanding), so
the group waits, at most :data:`COMMIT_DELAY` seconds in all, for the next
request and decides it before committing.  With no such connection (a lone
client, the timers) nothing waits.  Waiting only lets later arrivals join
behind the earlier ones, so arrival order is unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import queue
import threading
import time
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from pwf.store.unit import OnceOnly, Repeatable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pwf.host.served import ServedHost
    from pwf.store import EventStore, StoreTransaction
    from pwf.store.unit import Observe, Work

__all__ = ["COMMIT_DELAY", "GROUP_SECONDS", "MAX_GROUP", "SIBLING_WINDOW", "Writer"]

T = TypeVar("T")
MAX_GROUP: Final = 64
"""At most this many decisions share one transaction, so one commit never waits on too many.

A connection holds at most 64 unanswered requests, and a client with one
outstanding request sends one at a time, so only several pipelining
connections at once make groups this large: then the cap bounds how long
another connection's request, taken in turn, waits for its commit (ADR 0074).
"""
GROUP_SECONDS: Final = 0.05
"""A group takes no more work once its decisions took this long (seconds), so a flood of slow
ones (a deep run list page at a million events) keeps other connections' answers waiting at
most about this long per group, not :data:`MAX_GROUP` slow decisions (ADR 0125)."""
COMMIT_DELAY: Final = 0.002
"""A group waits at most this long in all (seconds) for siblings before it commits."""
SIBLING_WINDOW: Final = 0.005
"""A connection answered this recently (seconds) is a sibling: likely to send again at once."""


@dataclass(slots=True, eq=False)
class _Job(Generic[T]):
    """One piece of work for the writer thread, with how it is answered and run."""

    work: Callable[[ServedHost], T]
    done: Callable[[T | None, BaseException | None], None]
    loop: asyncio.AbstractEventLoop
    _: KW_ONLY
    alone: bool
    read: bool
    marked: type[Repeatable[Any] | OnceOnly[Any]] = OnceOnly
    """How the store may run it: :class:`Repeatable` when all it changes is in the
    transaction (a client request), else :class:`OnceOnly`."""
    source: object = None
    """Who asked (a connection), or None: the siblings a group may wait for."""
    duty: bool = False
    """The host's own work: it goes before every client job still queued."""


Settled = tuple[_Job[Any], object, "BaseException | None"]


_WAKE: Final = object()
"""What :meth:`_Lanes.get` gives instead of a client job while a duty waits."""


class _Lanes:
    """The queued work: the duties, then the client jobs, one lane per source, taken in turn.

    The event loop puts, the writer thread takes.  A job from each source
    that has any is taken in turn, so a source that queued many jobs (a
    flooding connection, up to its bound of unanswered requests) does not
    keep another's one job waiting behind all of them; within a source the
    order is arrival order.  Jobs with no source (the reads of subscriptions,
    state reads, verdict polls) share one lane.
    """

    def __init__(self) -> None:
        self._ready = threading.Condition(threading.Lock())
        self._lanes: dict[object, collections.deque[_Job[object]]] = {}
        self._turns: collections.deque[object] = collections.deque()
        self.duties: collections.deque[_Job[object]] = collections.deque()
        self._closed = False

    def put(self, job: _Job[object]) -> None:
        """Queue ``job``: a duty goes before every client job."""
        with self._ready:
            if job.duty:
                self.duties.append(job)
            else:
                lane = self._lanes.get(job.source)
                if lane is None:
                    lane = self._lanes[job.source] = collections.deque()
                    self._turns.append(job.source)
                lane.append(job)
            self._ready.notify()

    def close(self) -> None:
        """Once everything queued is taken, :meth:`get` gives None."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def next_duties(self) -> list[_Job[object]]:
        """The waiting duties for one group: an ``alone`` or ``read`` one by itself."""
        with self._ready:
            duties = self.duties
            if not duties:
                return []
            group = [duties.popleft()]
            if group[0].alone or group[0].read:
                return group
            while duties and not (duties[0].alone or duties[0].read):
                group.append(duties.popleft())
            return group

    def get(self, timeout: float | None = None) -> _Job[object] | object | None:
        """The next client job in turn; :data:`_WAKE` while a duty waits; None once closed.

        ``timeout`` 0 does not wait; None waits for ever.

        Raises:
            queue.Empty: nothing came within ``timeout``.
        """
        with self._ready:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                if self.duties:
                    return _WAKE
                turns = self._turns
                if turns:
                    source = turns.popleft()
                    lane = self._lanes[source]
                    job = lane.popleft()
                    if lane:
                        turns.append(source)
                    else:
                        del self._lanes[source]
                    return job
                if self._closed:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise queue.Empty
                self._ready.wait(left)


def _hand_back(outcomes: list[Settled], after: Callable[[], None] | None = None) -> None:
    """Give every decided job of a group to the event loop that queued it, in one call each.

    ``after`` runs on that loop once the callbacks ran.
    """
    loop = outcomes[0][0].loop
    if all(job.loop is loop for job, _, _ in outcomes):
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(_settle_all, outcomes, after)
        return
    for outcome in outcomes:
        with contextlib.suppress(RuntimeError):
            outcome[0].loop.call_soon_threadsafe(_settle_all, [outcome], after)


def _settle_all(outcomes: list[Settled], after: Callable[[], None] | None = None) -> None:
    """On the loop: each job's callback, in the group's order; one that raises stops no other."""
    for job, value, error in outcomes:
        try:
            job.done(value, error)
        except Exception as problem:  # noqa: BLE001 - reported as the loop reports a callback's
            job.loop.call_exception_handler(
                {"message": "a writer callback raised", "exception": problem}
            )
    if after is not None:
        after()


def _settle(future: asyncio.Future[Any], value: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class Writer:
    """The thread that owns the store and the served host."""

    def __init__(
        self,
        open_host: Callable[[], tuple[EventStore, ServedHost]],
        *,
        commit_delay: float = COMMIT_DELAY,
        sibling_window: float = SIBLING_WINDOW,
        group_seconds: float = GROUP_SECONDS,
    ) -> None:
        """Start the thread; it opens the store itself, since a connection stays in its thread."""
        self._open = open_host
        self._lanes = _Lanes()
        self._carry: _Job[object] | None = None
        self._delay = commit_delay
        self._group_seconds = group_seconds
        self._window = sibling_window
        self._answered: dict[object, float] = {}
        """Each source answered within the window: when its last group was handed back."""
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.host: ServedHost | None = None
        self.settled = 0
        """Jobs that may have written, settled so far: a publish looks again only when it moved."""
        self.observe: Observe | None = None
        """A metrics hook, told ``"group"`` at each group's commit, ``"redone"`` when a group
        ran again, ``"waited"`` for each request a group waited for (tests count them)."""
        self.committed: Callable[[int, float], None] | None = None
        """Told each group's size and seconds from its start to its commit's return (metrics)."""
        self.written: Callable[[], None] | None = None
        """Called on the event loop once a job that may have written settled, after its callback
        (the views' publish wakes on it, ADR 0078)."""
        self._thread = threading.Thread(target=self._run, name="pwf-writer", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    def submit(
        self,
        work: Callable[[ServedHost], T],
        *,
        alone: bool = False,
        read: bool = False,
        duty: bool = False,
    ) -> asyncio.Future[T]:
        """Queue ``work``; the future settles once it is decided and committed.

        ``duty``: the host's own work, decided before any client job still queued.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        job: _Job[Any] = _Job(
            work, functools.partial(_settle, future), loop, alone=alone, read=read, duty=duty
        )
        self._lanes.put(job)
        return future

    def duty(self, work: Callable[[ServedHost], T]) -> asyncio.Future[T]:
        """:meth:`submit` the host's own ``work`` (a duty)."""
        return self.submit(work, duty=True)

    def call(
        self,
        work: Callable[[ServedHost], T],
        done: Callable[[T | None, BaseException | None], None],
        *,
        alone: bool = False,
        source: object = None,
    ) -> None:
        """Queue ``work``; ``done(value, error)`` runs on the loop once it is committed.

        The served connections' path: no future and no task per request.
        ``work`` changes nothing but the transaction, so a group may run it
        again after rolling back (a client request's decision).  ``source``
        names who asked (the connection): once answered, it is a sibling a
        group may wait for for :data:`SIBLING_WINDOW`.
        """
        job = _Job(
            work,
            done,
            asyncio.get_running_loop(),
            alone=alone,
            read=False,
            marked=OnceOnly if alone else Repeatable,  # alone: file work, run once
            source=source,
        )
        self._lanes.put(job)  # type: ignore[arg-type]

    @property
    def alive(self) -> bool:
        """Whether the thread still runs (the health endpoint asks)."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Finish the queued work, close the store and end the thread."""
        self._lanes.close()
        self._thread.join()

    def _run(self) -> None:
        try:
            store, host = self._open()
        except BaseException as error:  # noqa: BLE001 - handed to the starting thread
            self._failure = error
            self._ready.set()
            return
        self.host = host
        self._ready.set()
        try:
            while (group := self._next_group()) is not None:
                if group:
                    self._decide(host, store, group)
        finally:
            store.close()

    def _next_group(self) -> list[_Job[object]] | None:
        """The waiting duties; else the next job and every one queued behind it.

        A group of client work stops before an ``alone`` or ``read`` job.
        """
        duties = self._lanes.next_duties()
        if duties:
            return duties
        first = self._carry if self._carry is not None else self._lanes.get()
        self._carry = None
        if first is None:
            return None
        if not isinstance(first, _Job):  # a duty came: it is taken next
            return []
        return [first]

    def _extend(self, group: list[_Job[object]]) -> bool:
        """Add the next job queued now, unless it is ``alone`` or ``read``; was one added?

        One at a time, as the group's decisions go: jobs not yet taken stay
        in their lanes, taken in turn for the next group.
        """
        if group[0].duty or self._carry is not None or len(group) >= MAX_GROUP:
            return False
        if self._lanes.duties:
            return False
        try:
            job = self._lanes.get(0)
        except queue.Empty:
            return False
        return self._take(group, job)

    def _take(self, group: list[_Job[object]], job: _Job[object] | object | None) -> bool:
        """Add ``job`` to the group; an ``alone``, ``read`` or closing one stops it instead."""
        if not isinstance(job, _Job):  # closing (None), or a duty waits: this group closes
            return False
        if job.alone or job.read:
            self._carry = job
            return False
        group.append(job)
        return True

    def _gather(self, group: list[_Job[object]], deadline: float) -> bool:
        """Wait until ``deadline`` for one more job, if a sibling is expected; was one added?

        Nothing waits behind an ``alone`` or ``read`` job, nor in a full group.
        """
        now = time.monotonic()
        if (
            self._carry is not None
            or self._lanes.duties
            or group[0].duty
            or len(group) >= MAX_GROUP
            or now >= deadline
            or not self._expecting(group, now)
        ):
            return False
        try:
            job = self._lanes.get(deadline - now)
        except queue.Empty:
            return False
        if not self._take(group, job):
            return False
        self._tell("waited")
        return True

    def _tell(self, event: str) -> None:
        """Tell the metrics hook, if any, of ``event``."""
        if self.observe is not None:
            self.observe(event)

    def _expecting(self, group: list[_Job[object]], now: float) -> bool:
        """Is a sibling expected: a source answered within the window, with nothing in ``group``?"""
        if not self._answered:
            return False
        cutoff = now - self._window
        present = {job.source for job in group}
        return any(at >= cutoff and source not in present for source, at in self._answered.items())

    def _remember(self, group: list[_Job[object]]) -> None:
        """The group's sources were just answered; forget those answered before the window."""
        now = time.monotonic()
        cutoff = now - self._window
        answered = {source: at for source, at in self._answered.items() if at >= cutoff}
        for job in group:
            if job.source is not None:
                answered[job.source] = now
        self._answered = answered

    def _decide(self, host: ServedHost, store: EventStore, group: list[_Job[object]]) -> None:
        if group[0].alone or group[0].read:
            job = group[0]
            after = None if job.read else self.written
            try:
                value = job.work(host)
            except Exception as error:  # noqa: BLE001 - the caller answers with it
                self.settled += 0 if job.read else 1
                _hand_back([(job, None, error)], after)
            else:
                self.settled += 0 if job.read else 1
                _hand_back([(job, value, None)], after)
            return
        began = time.perf_counter()
        outcomes = store.run_group(self._works(host, group), self._tell)
        # A store stops taking work only when its transaction failed: the jobs
        # queued behind the last it took share that failure.
        outcomes += outcomes[-1:] * (len(group) - len(outcomes))
        self._tell("group")
        self.settled += 1
        if self.committed is not None:
            self.committed(len(group), time.perf_counter() - began)
        settled = [(job, *outcome) for job, outcome in zip(group, outcomes, strict=True)]
        _hand_back(settled, self.written)
        self._remember(group)

    def _works(self, host: ServedHost, group: list[_Job[object]]) -> Iterator[Work[object]]:
        """The group's work for the store, and what joins it while it is decided.

        With the queue empty, it waits a little for expected siblings (ADR 0065).
        """
        deadline: float | None = None
        taken = 0
        began = time.monotonic()
        while True:
            if taken == len(group) and time.monotonic() - began >= self._group_seconds:
                return  # slow decisions: the group commits, the rest wait for the next (ADR 0125)
            if taken == len(group) and not self._extend(group):
                if deadline is None:  # the first time it has nothing left
                    deadline = time.monotonic() + self._delay
                if not self._gather(group, deadline):
                    return
            job = group[taken]
            taken += 1
            yield job.marked(functools.partial(_decide, host, job.work))


def _decide(host: ServedHost, work: Callable[[ServedHost], T], tx: StoreTransaction) -> T:
    """One job of a group, in the group's transaction: each decision is its own batch there."""
    host.shared = tx
    try:
        return work(host)
    finally:
        host.shared = None
