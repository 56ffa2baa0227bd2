"""How ``pwf web`` holds its connections: a bounded number, each given a deadline for its request.

Imports uvicorn and h11 (the ``web`` extra) and the process helpers (ADR 0115).
uvicorn keeps a connection open for as long as its client sends part of a
request and never ends it, and reads nothing from a connection it has not
answered yet; so one client that opened connections and sent half a request
on each took every file descriptor of the view, and no page was served any
more.  Here a connection must send a whole request head within
:data:`HEAD_SECONDS` of being opened or of its previous answer, and at most
so many connections are open at once: at the bound, a new one closes the
connection that has waited longest without sending a request, and is closed
itself when every other one is being answered.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, ClassVar, Final

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from pwf._process import connections_allowed

if TYPE_CHECKING:
    import asyncio

    from starlette.applications import Starlette

__all__ = ["BACKLOG", "HEAD_SECONDS", "Guarded", "serve"]

HEAD_SECONDS: Final = 10.0
"""How long a connection may take to send a request's head (line and headers)."""
MOST_CONNECTIONS: Final = 512
"""The most connections the view holds at once, whatever its descriptor limit allows."""
RESERVED_DESCRIPTORS: Final = 256
"""File descriptors kept past the bound: the view's own files (the database, a replay's scratch
file) and the connections accepted in one burst before the first of them is seen."""
BACKLOG: Final = 64
"""Connections the kernel queues before they are accepted.  The event loop accepts up to this
many at each turn before it makes their protocols, so a burst of a few turns' worth is open
before the bound can close any: the reserve covers it."""
_REFUSALS_LOGGED_EVERY: Final = 10.0
"""Seconds between two log lines about closed connections; the lines count those between."""

log = logging.getLogger("pwf.web")


class Guarded(H11Protocol):
    """uvicorn's HTTP/1.1 connection, with a deadline for each request head and a bound on all."""

    most: ClassVar[int] = MOST_CONNECTIONS
    """The most connections open at once (set by :func:`serve` from the descriptor limit)."""
    head_seconds: ClassVar[float] = HEAD_SECONDS
    closed: ClassVar[dict[str, int]] = {"late": 0, "evicted": 0, "refused": 0}
    """Connections closed since the view started, by why: a late head, an eviction, no room."""
    logged: ClassVar[float] = 0.0
    """When the last line about evicted and refused connections was logged (monotonic)."""
    _deadline: asyncio.TimerHandle | None = None
    waiting_since: float | None = None
    """When the connection started waiting for a request head; None while one is answered."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Admit the connection, making room or closing it when the view holds too many."""
        super().connection_made(transport)
        self._wait_for_head()
        if len(self.connections) > self.most and not self._evict():
            self.close("refused")

    def data_received(self, data: bytes) -> None:
        """Read as uvicorn does; a whole request head ends the wait for it."""
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._stop_waiting()

    def on_response_complete(self) -> None:
        """Answer as uvicorn does; the next request's head is due within the deadline."""
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._wait_for_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection as uvicorn does, and its deadline."""
        self._stop_waiting()
        super().connection_lost(exc)

    def _wait_for_head(self) -> None:
        self._stop_waiting()
        self.waiting_since = time.monotonic()
        self._deadline = self.loop.call_later(self.head_seconds, self._late)

    def _stop_waiting(self) -> None:
        self.waiting_since = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _late(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE:
            self.close("late")

    def _evict(self) -> bool:
        """Close the connection that has waited longest for a request head; False when none is."""
        waiting = [
            other
            for other in self.connections
            if other is not self and isinstance(other, Guarded) and other.waiting_since is not None
        ]
        if not waiting:
            return False
        min(waiting, key=lambda other: other.waiting_since or 0.0).close("evicted")
        return True

    def close(self, why: str) -> None:
        """Close for ``why`` (``late``, ``evicted``, ``refused``); count and log it."""
        self._stop_waiting()
        kind = type(self)
        counts = kind.closed
        counts[why] += 1
        if not self.transport.is_closing():
            self.timeout_keep_alive_handler()  # uvicorn's own close of an idle connection
        now = time.monotonic()
        if why != "late" and now - kind.logged >= _REFUSALS_LOGGED_EVERY:
            kind.logged = now
            log.warning(
                "pwf web holds %d connections at most: %d waiting ones closed, %d refused so far",
                self.most,
                counts["evicted"],
                counts["refused"],
            )


_OPTIONS: Final[dict[str, Any]] = {
    "http": Guarded,
    "backlog": BACKLOG,
    "log_level": "warning",
    "access_log": False,
}
"""uvicorn's settings: the guarded connection, the accept queue, no access log."""


def serve(app: Starlette, host: str, port: int) -> None:
    """Serve ``app`` on ``host:port`` until stopped, each connection :class:`Guarded`."""
    Guarded.most = connections_allowed(MOST_CONNECTIONS, RESERVED_DESCRIPTORS)
    uvicorn.run(app, host=host, port=port, **_OPTIONS)
