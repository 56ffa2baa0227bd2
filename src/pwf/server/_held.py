"""Bytes of requests read and not yet answered: a bound for the host, half per client (ADR 0123).

A connection holds at most 64 requests read and not yet answered (ADR
0074), and one client process at most half of the host's connections (ADR
0110); a request is at most 1 MiB.  Without a bound on their bytes, one
client process could make the host hold thousands of megabytes of parsed
requests waiting for the writer, many times their size once parsed.  Here
the host holds at most :data:`MOST_HELD_BYTES` of them, one client process at
most half; a connection past either waits, its socket not read, until
answers free room, and then is woken in the order it began to wait.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Final, Protocol

__all__ = ["MOST_HELD_BYTES", "Held", "Holder"]

MOST_HELD_BYTES: Final = 64 << 20
"""Bytes of requests a host holds read and not yet answered, at most; a client process half."""


class Holder(Protocol):
    """A connection, as the bound sees it."""

    peer: int | None
    """The client's process id, where the socket tells it."""

    def wake(self) -> None:
        """Try again to hand on the requests that waited for room."""


class Held:
    """The bytes the host's connections hold, in all and per client process."""

    def __init__(self, most: int = MOST_HELD_BYTES) -> None:
        """Nothing held yet; at most ``most`` bytes at once."""
        self.most = most
        self.total = 0
        self._peers: collections.Counter[int] = collections.Counter()
        self._waiting: dict[Holder, None] = {}
        self._woken = False

    def take(self, holder: Holder, size: int) -> bool:
        """Hold ``size`` bytes for ``holder`` if there is room; else it waits to be woken."""
        peer = holder.peer
        if self.total + size > self.most or (
            peer is not None and self._peers[peer] + size > self.most // 2
        ):
            self._waiting[holder] = None
            return False
        self.total += size
        if peer is not None:
            self._peers[peer] += size
        return True

    def give(self, holder: Holder, size: int) -> None:
        """``holder`` answered a request of ``size`` bytes: free them, wake those that waited."""
        self.total -= size
        if holder.peer is not None:
            self._peers[holder.peer] -= size
            if not self._peers[holder.peer]:
                del self._peers[holder.peer]
        if self._waiting and not self._woken:
            self._woken = True
            asyncio.get_running_loop().call_soon(self._wake)

    def _wake(self) -> None:
        self._woken = False
        waiting, self._waiting = self._waiting, {}
        for holder in waiting:
            holder.wake()  # one still without room waits again, in this order
