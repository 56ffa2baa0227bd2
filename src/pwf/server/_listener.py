"""The served host's socket and the connections on it: accept, forget, drain (HOST §1.10, §1.16).

Imports the connection room and the served host's errors.  A connection
accepted while the host stops is closed at once; one that closes is
forgotten once its requests in flight are answered, and the coordinators
it held are detached.

A host admits at most so many connections at once, and one client process
at most half of them (ADR 0110): a client that leaks connections would
otherwise take every file descriptor the process may open, and then
neither other clients nor the host's own files (its database, a verify's
forked walk, a worker's pipes) could be opened.  A connection past the
bound is closed before the hello.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import struct
import sys
import time
from typing import TYPE_CHECKING, Final

from pwf._process import connections_allowed
from pwf.errors import PwfError
from pwf.server._budget import Quota
from pwf.server._connections import Connection
from pwf.server._held import Held

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.server._connections import Dispatcher
    from pwf.server._hub import Hub

__all__ = [
    "MOST_CONNECTIONS",
    "RESERVED_DESCRIPTORS",
    "STOP_GRACE_SECONDS",
    "Listener",
    "most_connections",
]

log = logging.getLogger("pwf.server")

STOP_GRACE_SECONDS: Final = 30.0
"""How long a stop waits for the requests in flight before it closes their sockets."""
MOST_CONNECTIONS: Final = 10_000
"""The most connections a host admits at once, whatever its descriptor limit allows."""
RESERVED_DESCRIPTORS: Final = 256
"""File descriptors kept for the host's own work, whatever its clients hold."""
_FEWEST: Final = 16
"""The bound never falls below this, even under a very low descriptor limit."""
CLOSINGS_PER_SECOND: Final = 2.0
"""Connections closed for what their clients sent are logged one by one this often on average..."""
CLOSINGS_BURST: Final = 32
"""... after a burst of this many; the others are counted (ADR 0122)."""
_REFUSALS_LOGGED_EVERY: Final = 10.0
"""Seconds between two log lines about refused connections; the lines count those between."""


def most_connections() -> int:
    """How many connections a host may admit: its descriptor limit less the reserve."""
    return connections_allowed(MOST_CONNECTIONS, RESERVED_DESCRIPTORS, _FEWEST)


def _peer(transport: asyncio.BaseTransport) -> int | None:
    """The process id at the other end of a Unix socket (Linux), else None."""
    sock = transport.get_extra_info("socket")
    if sys.platform != "linux" or sock is None:
        return None
    try:
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid: int = struct.unpack("3i", credentials)[0]
    return pid or None


class Listener:
    """The Unix socket a host listens on, and the bookkeeping of its connections."""

    def __init__(self, path: Path, hub: Hub, most: int | None = None) -> None:
        """Name the socket; nothing listens before :meth:`listen`.

        ``most`` bounds the connections open at once (None: :func:`most_connections`,
        found when the socket listens); one client process may hold half of them.
        """
        self.path = path
        self.hub = hub
        self.most = most
        self.admitted: set[Connection] = set()
        """The connections admitted whose sockets are still open."""
        self._peers: collections.Counter[int] = collections.Counter()
        self._refused = 0
        self._logged = -_REFUSALS_LOGGED_EVERY
        self._closings = Quota(CLOSINGS_PER_SECOND, CLOSINGS_BURST, time.monotonic())
        self.held = Held()
        """The bytes of requests read and not yet answered, over every connection (ADR 0123)."""
        self._server: asyncio.AbstractServer | None = None

    @property
    def per_process(self) -> int:
        """The most connections one client process may hold at once."""
        return max(1, (self.most or MOST_CONNECTIONS) // 2)

    @property
    def refused(self) -> int:
        """Connections closed unadmitted since the host started, over either bound."""
        return self._refused

    @property
    def serving(self) -> bool:
        """True while the socket accepts connections."""
        return self._server is not None and self._server.is_serving()

    async def listen(self, dispatcher: Dispatcher) -> None:
        """Replace a stale socket file and listen on it, mode 0600."""
        if self.most is None:
            self.most = most_connections()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(
            lambda: Connection(dispatcher, self.held), path=str(self.path)
        )
        self.path.chmod(0o600)

    def close(self) -> None:
        """Stop accepting connections; those open stay open."""
        if self._server is not None:
            self._server.close()

    def opened(self, connection: Connection) -> bool:
        """A connection was accepted: keep it, unless the host stops or a bound is reached."""
        if self.hub.stopping:
            return False
        assert connection.transport is not None
        peer = _peer(connection.transport)
        if len(self.admitted) >= (self.most or MOST_CONNECTIONS):
            self._refuse(f"{len(self.admitted)} connections are open, the most this host admits")
            return False
        if peer is not None and self._peers[peer] >= self.per_process:
            self._refuse(f"process {peer} holds {self._peers[peer]}, the most one process may")
            return False
        connection.peer = peer
        self.admitted.add(connection)
        if peer is not None:
            self._peers[peer] += 1
        self.hub.connections.add(connection)
        return True

    def _refuse(self, why: str) -> None:
        """Count a refusal; say so at most every few seconds, with the count since."""
        self._refused += 1
        now = time.monotonic()
        if now - self._logged >= _REFUSALS_LOGGED_EVERY:
            self._logged = now
            log.warning("refusing connections (%d so far): %s", self._refused, why)

    def closing(self, connection: Connection, why: str) -> None:
        """Log why a connection is closed, within a budget; count the rest, say the count."""
        now = time.monotonic()
        if self._closings.admit(1, now):
            log.info("closing %s: %s", connection.id, why)
        if count := self._closings.due(now):
            log.info("%d more connections closed for what their clients sent or did", count)

    def lost(self, connection: Connection) -> None:
        """A connection closed: once its requests are done, forget it, detach its coordinators."""
        if connection not in self.admitted:
            return  # refused before its hello: it held nothing
        self.admitted.discard(connection)
        peer = connection.peer
        if peer is not None:
            self._peers[peer] -= 1
            if not self._peers[peer]:
                del self._peers[peer]
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
