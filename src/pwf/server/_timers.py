"""The served host's three timers: heartbeat, interaction expiry and publish (HOST §1.8, §1.9).

Imports the served host's errors and the subscription room's period.  The
heartbeat and expiry timers sleep their period and then do their work; the
publish timer wakes when the views are stirred, or looks every period while
a deadline of the clock is pending.  They run for as long as the host runs;
the host cancels them when it stops.

A tick that fails on the store (a write lock held past the busy timeout, a
shared log out of reach) is logged and tried again at the next period: a
timer that ended there would leave the host answering "stopping" once its
claim ran out, for as long as it lived.  Any other failure ends the host
(exit 3), since the timers are what keeps its claim.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pwf.errors import CommandError, PwfError
from pwf.server._subscriptions import PUBLISH_SECONDS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pwf.server._hub import Hub

__all__ = ["Timers"]

log = logging.getLogger("pwf.server")


class Timers:
    """The host's periodic work: renew its claim, expire interactions, publish."""

    def __init__(self, hub: Hub) -> None:
        """Bind the host; nothing runs before :meth:`start`."""
        self.hub = hub
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the three timers, each at its period."""
        options = self.hub.options
        self._tasks = [
            asyncio.create_task(_every(options.heartbeat_ms, self.heartbeat)),
            asyncio.create_task(_every(options.poll_ms, self.poll)),
            asyncio.create_task(self._publishing()),
        ]
        for task in self._tasks:
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A timer ended other than by :meth:`cancel`: a fault of pwf's; the host stops."""
        if task.cancelled() or task.exception() is None:
            return
        log.error("a timer of the host failed, so the host stops", exc_info=task.exception())
        self.hub.exit_code = 3
        self.hub.request_stop()

    def cancel(self) -> None:
        """Stop every timer."""
        for task in self._tasks:
            task.cancel()

    async def heartbeat(self) -> None:
        """Renew the host's claim, then its workers'; a lost claim stops the host (exit 3).

        A renewal the store failed is tried again at the next heartbeat; if
        the lease ran out meanwhile, that one finds the claim lost.
        """
        hub = self.hub
        writer = hub.writer
        assert writer is not None
        try:
            await writer.duty(lambda host: host.renew(hub.options.lease_ms, hub.clock()))
        except CommandError as error:
            log.error("host claim lost: %s", error)  # noqa: TRY400 - one line, no traceback
            hub.exit_code = 3
            hub.request_stop()
            return
        except PwfError as error:
            log.warning("host claim renewal failed, tried again next heartbeat: %s", error)
            return
        if hub.supervisor is not None and not hub.stopping:
            await _tried(
                hub.supervisor.renew(), "worker claim renewals failed, tried again next heartbeat"
            )

    async def poll(self) -> None:
        """Interaction expiry (DOMAIN §10.7), then look for work; a failed pass is tried again."""
        hub = self.hub
        writer = hub.writer
        assert writer is not None
        await _tried(
            writer.duty(lambda host: host.expire(hub.clock())), "interaction expiry failed"
        )
        if hub.supervisor is not None and not hub.stopping:
            await _tried(hub.supervisor.claim(), "claiming a run failed, tried again next pass")

    async def _publishing(self) -> None:
        """Publish :data:`PUBLISH_SECONDS` after something may have changed, for ever.

        While a deadline of the clock is pending the timer looks every
        :data:`PUBLISH_SECONDS`, as the clock may pass it; otherwise it
        sleeps until the views are stirred (ADR 0078 D2), so an idle host
        does not wake at all.
        """
        while True:
            views = self.hub.views
            if views is not None and not views.timed():
                await views.changed.wait()
            await asyncio.sleep(PUBLISH_SECONDS)
            if views is not None:
                views.changed.clear()  # a stir from here on is seen by the next turn
            await self.publish()

    async def publish(self) -> None:
        """Push what changed to every subscription; one the store failed waits for the next."""
        hub = self.hub
        if hub.views is not None and not hub.stopping:
            publishing = hub.views.publish_all(hub.connections)
            await _tried(publishing, "publishing the views failed, tried again next turn")


async def _tried(work: Awaitable[object], failed: str) -> None:
    """Await ``work``; a failure of the store is logged as ``failed: error``, not raised."""
    try:
        await work
    except PwfError as error:
        log.warning("%s: %s", failed, error)


async def _every(period_ms: int, tick: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(period_ms / 1000)
        await tick()
