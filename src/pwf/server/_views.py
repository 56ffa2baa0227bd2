"""Subscriptions on served connections and the events they push (HOST §2.1-§2.6, §2.12).

The payloads come from :mod:`pwf.views`, computed on the writer thread in
one read transaction against committed state; the event loop writes them.
A connection publishes after each of its responses and on the 250 ms
timer; a subscription sends only when its payload's hash changed, and ends
on unwatch, replacement or when its connection closes.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final, cast

from pwf.commands import Context, Result, refuse
from pwf.errors import CommandError, PwfError
from pwf.protocol.client import ClientResponse, collapse_error, encode_event, encode_line
from pwf.protocol.schemas import Subscribed, receipt
from pwf.views import Subscription, subscription_of, unwatch_id
from pwf.views.subscriptions import EVENTS, Subscriptions

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.host.served import ServedHost
    from pwf.protocol.client import ClientEvent, ClientRequest
    from pwf.server._connections import Connection
    from pwf.server._writer import Writer

__all__ = ["PUBLISH_SECONDS", "SUBSCRIBING", "Views"]

log = logging.getLogger("pwf.server")

PUBLISH_SECONDS: Final = 0.25
KINDS: Final = {event: kind for kind, event in EVENTS.items()}
"""The subscription kind of each event a publish sends."""
SUBSCRIBING: Final = frozenset({"view.runs.watch", "view.run.watch", "view.run.unwatch"})
"""The operations answered here; the rest go to the host."""


def _read_only(_events: object) -> object:
    raise refuse("views append nothing")


def _read(host: ServedHost, now: int, work: Callable[[Context], object]) -> object:
    """``work`` over one read snapshot of the committed projections."""
    with host.store.snapshot() as reader:
        return work(Context(reader, _read_only, now))


class Views:
    """Every connection's subscriptions."""

    def __init__(
        self,
        writer: Writer,
        clock: Callable[[], int],
        live: Callable[[Context, str], bool],
    ) -> None:
        """Bind the writer (reads run on its thread), the clock and worker liveness."""
        self.writer = writer
        self.clock = clock
        self.live = live
        self.subscriptions: dict[str, Subscriptions] = {}
        self._publishing: set[str] = set()
        self.pushes: dict[str, int] = {}
        """Events sent so far, by subscription kind (metrics)."""
        self.recompute_seconds = 0.0
        """Writer-thread time spent computing publishes' payloads so far (metrics)."""

    def _of(self, connection: Connection) -> Subscriptions:
        found = self.subscriptions.get(connection.id)
        if found is None:
            found = self.subscriptions[connection.id] = Subscriptions(connection.id)
        return found

    async def answer(self, connection: Connection, request: ClientRequest) -> ClientResponse:
        """``view.runs.watch``, ``view.run.watch`` and ``view.run.unwatch``."""
        try:
            if request.operation == "view.run.unwatch":
                self._of(connection).unwatch(unwatch_id(request))
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
        self._of(connection).watch(wanted)
        return _answer(request, Result(receipt=receipt(Subscribed(subscribed=True))))

    def session_watch(self, connection: Connection, request: ClientRequest) -> None:
        """§2.4 step 3: the session subscription is added before the coordinator is checked."""
        payload = request.payload
        if not isinstance(payload, dict):
            return
        session_id, subscription_id = payload.get("sessionId"), payload.get("subscriptionId")
        if (
            isinstance(session_id, str)
            and session_id
            and isinstance(subscription_id, str)
            and subscription_id
        ):
            self._of(connection).watch(Subscription(subscription_id, "session", session_id))

    def watching(self, connection: Connection) -> bool:
        """Whether the connection has a subscription to publish."""
        return bool(self.subscriptions.get(connection.id))

    def forget(self, connection: Connection) -> None:
        """The connection closed: its subscriptions end with it."""
        self.subscriptions.pop(connection.id, None)

    async def publish(self, connection: Connection) -> None:
        """Send the connection the events of every subscription whose payload changed."""
        subscriptions = self.subscriptions.get(connection.id)
        if not subscriptions or connection.closed or connection.id in self._publishing:
            return
        self._publishing.add(connection.id)

        def recompute(host: ServedHost) -> object:
            began = time.perf_counter()
            try:
                return _read(host, self.clock(), lambda ctx: subscriptions.publish(ctx, self.live))
            finally:
                self.recompute_seconds += time.perf_counter() - began

        try:
            found = await self.writer.submit(recompute, read=True)
            events = cast("list[ClientEvent]", found)
            for event in events:
                connection.send(encode_line(encode_event(event)))
                kind = KINDS.get(event.event, event.event)
                self.pushes[kind] = self.pushes.get(kind, 0) + 1
        except PwfError as error:
            log.info("client view error: %s", error)
            connection.close()
        finally:
            self._publishing.discard(connection.id)

    async def publish_all(self, connections: set[Connection]) -> None:
        """The 250 ms timer: publish every connection."""
        for connection in list(connections):
            await self.publish(connection)


def _answer(request: ClientRequest, result: Result) -> ClientResponse:
    return ClientResponse(
        request_id=request.request_id,
        outcome=result.outcome,
        receipt=result.receipt,
        error=None if result.error is None else collapse_error(result.error),
    )
