"""A :class:`pwf.server.Server` in this process, on its own event loop thread, with real sockets.

Tests that need an injected clock, fixed ids or a look inside the writer use
it; everything else starts ``pwf serve`` as a process (``_served.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import TYPE_CHECKING, Any, Final

from pwf.client import HostClient
from pwf.server import Options, Server

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from pathlib import Path

__all__ = ["AT", "Hosted"]

AT: Final = 1_800_000_000_000
"""The fixed clock of the in-process hosts."""
_FOREVER: Final = 10**9


class Hosted:
    """One started in-process host; :meth:`close` stops it."""

    def __init__(
        self,
        db: Path,
        *,
        clock: Callable[[], int] = lambda: AT,
        host_id: str = "host-test",
        connections: int | None = None,
    ) -> None:
        """Start the host; its timers are off unless a test drives them."""
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        epochs = itertools.count(1)
        self.options = Options(
            db=db,
            clock=clock,
            host_id=host_id,
            token="token-of-the-test",  # noqa: S106 - a test claim token
            heartbeat_ms=_FOREVER,
            poll_ms=_FOREVER,
            new_epoch=lambda: f"e-{next(epochs)}",
            signals=False,
            connections=connections,
        )
        self.server: Server = self.run(self._make())
        self.run(self.server.start())

    async def _make(self) -> Server:
        return Server(self.options)

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 120) -> Any:
        """Run a coroutine on the host's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def client(self) -> HostClient:
        """A new connection to the host."""
        return HostClient.connect(self.server.paths.socket, timeout=30)

    def close(self) -> None:
        """Stop the host and its loop."""
        if not self.server.stopped.is_set():
            self.run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(60)
        self.loop.close()
