"""The served host's socket and the connections on it: accept, forget, drain (HOST §1.10, §1.16).

Imports the connection room and the served host's errors.  A connection
accepted while the host stops is closed at once; one that closes is
forgotten once its requests in flight are answered, and the coordinators
it held are detached.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

from pwf.errors import PwfError
from pwf.server._connections import Connection

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.server._connections import Dispatcher
    from pwf.server._hub import Hub

__all__ = ["STOP_GRACE_SECONDS", "Listener"]

STOP_GRACE_SECONDS: Final = 30.0
"""How long a stop waits for the requests in flight before it closes their sockets."""


class Listener:
    """The Unix socket a host listens on, and the bookkeeping of its connections."""

    def __init__(self, path: Path, hub: Hub) -> None:
        """Name the socket; nothing listens before :meth:`listen`."""
        self.path = path
        self.hub = hub
        self._server: asyncio.AbstractServer | None = None

    @property
    def serving(self) -> bool:
        """True while the socket accepts connections."""
        return self._server is not None and self._server.is_serving()

    async def listen(self, dispatcher: Dispatcher) -> None:
        """Replace a stale socket file and listen on it, mode 0600."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(
            lambda: Connection(dispatcher), path=str(self.path)
        )
        self.path.chmod(0o600)

    def close(self) -> None:
        """Stop accepting connections; those open stay open."""
        if self._server is not None:
            self._server.close()

    def opened(self, connection: Connection) -> bool:
        """A connection was accepted: keep it, unless the host is stopping."""
        if self.hub.stopping:
            return False
        self.hub.connections.add(connection)
        return True

    def lost(self, connection: Connection) -> None:
        """A connection closed: once its requests are done, forget it, detach its coordinators."""
        self.hub.spawn(self._forget(connection))

    async def _forget(self, connection: Connection) -> None:
        hub = self.hub
        try:
            await connection.drained()
        finally:
            hub.connections.discard(connection)
            if hub.views is not None:
                hub.views.forget(connection)
            writer = hub.writer
            if not hub.stopping and writer is not None:
                with contextlib.suppress(PwfError):
                    await writer.submit(
                        lambda host: host.detach_connection(connection.id, hub.clock())
                    )

    async def drain(self) -> None:
        """Wait up to the grace period for every connection's requests in flight, then close all."""
        busy = [
            asyncio.get_running_loop().create_task(connection.drained())
            for connection in self.hub.connections
            if connection.inflight
        ]
        if busy:
            await asyncio.wait(busy, timeout=STOP_GRACE_SECONDS)
            for waiting in busy:
                waiting.cancel()
        for connection in list(self.hub.connections):
            connection.close()
