"""One writer thread that owns the database and commits decisions in groups.

The event loop never touches SQLite.  It hands each piece of work to
:class:`Writer` and awaits the future it returns.  The thread takes every
piece that arrived while it was busy, in arrival order, and decides them one
after another inside one write transaction: each in its own savepoint (a
failing one rolls back alone) and its own batch (the log is the one that one
transaction per command writes).  Only after the commit are their futures
settled, so an answer is never sent for work that is not durable.  Work
marked ``alone`` (file effects that copy the database, prune) closes the
group before it and runs in its own transactions.  ``read`` work runs
outside any write transaction, against committed state.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.host.served import ServedHost
    from pwf.store.sqlite import SqliteStore

__all__ = ["MAX_GROUP", "Writer"]

T = TypeVar("T")
MAX_GROUP: Final = 256
"""At most this many decisions share one transaction, so one commit never waits on too many."""


class _Job(Generic[T]):
    __slots__ = ("alone", "future", "loop", "read", "work")

    def __init__(
        self,
        work: Callable[[ServedHost], T],
        future: asyncio.Future[T],
        loop: asyncio.AbstractEventLoop,
        *,
        alone: bool,
        read: bool,
    ) -> None:
        self.work = work
        self.future = future
        self.loop = loop
        self.alone = alone
        self.read = read

    def settle(self, value: object, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            self.loop.call_soon_threadsafe(_settle, self.future, value, error)


def _settle(future: asyncio.Future[Any], value: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class Writer:
    """The thread that owns the store and the served host."""

    def __init__(self, open_host: Callable[[], tuple[SqliteStore, ServedHost]]) -> None:
        """Start the thread; it opens the store itself, since a connection stays in its thread."""
        self._open = open_host
        self._queue: queue.SimpleQueue[_Job[object] | None] = queue.SimpleQueue()
        self._carry: _Job[object] | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.host: ServedHost | None = None
        self.groups = 0
        """Transactions committed so far (the group-commit test reads it)."""
        self._thread = threading.Thread(target=self._run, name="pwf-writer", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    def submit(
        self, work: Callable[[ServedHost], T], *, alone: bool = False, read: bool = False
    ) -> asyncio.Future[T]:
        """Queue ``work``; the future settles once it is decided and committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Job(work, future, loop, alone=alone, read=read))  # type: ignore[arg-type]
        return future

    def close(self) -> None:
        """Finish the queued work, close the store and end the thread."""
        self._queue.put(None)
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
                self._decide(host, store, group)
        finally:
            store.close()

    def _next_group(self) -> list[_Job[object]] | None:
        """The next job and every one queued behind it, up to an ``alone`` one."""
        first = self._carry if self._carry is not None else self._queue.get()
        self._carry = None
        if first is None:
            return None
        group = [first]
        if first.alone or first.read:
            return group
        while len(group) < MAX_GROUP:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None or job.alone or job.read:
                self._carry = job
                if job is None:
                    self._queue.put(None)
                    self._carry = None
                break
            group.append(job)
        return group

    def _decide(self, host: ServedHost, store: SqliteStore, group: list[_Job[object]]) -> None:
        if group[0].alone or group[0].read:
            job = group[0]
            try:
                value = job.work(host)
            except Exception as error:  # noqa: BLE001 - the caller answers with it
                job.settle(None, error)
            else:
                job.settle(value, None)
            return
        results: list[tuple[object, BaseException | None]] = []
        try:
            with store.transaction() as tx:
                host.shared = tx
                try:
                    for job in group:
                        try:
                            with tx.savepoint():
                                results.append((job.work(host), None))
                        except Exception as error:  # noqa: BLE001 - rolled back alone
                            results.append((None, error))
                finally:
                    host.shared = None
        except Exception as failure:  # noqa: BLE001 - the commit failed: nothing is durable
            results = [(None, failure)] * len(group)
        self.groups += 1
        for job, (value, problem) in zip(group, results, strict=True):
            job.settle(value, problem)
