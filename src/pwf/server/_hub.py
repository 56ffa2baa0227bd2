"""What the rooms of a served host share: :class:`Hub`, the host as each room sees it.

Imports nothing at run time.  :class:`pwf.server.Server` is the one hub: it
owns the parts (writer, subscriptions, supervisor, connections) and the
stop; the rooms (:mod:`._listener`, :mod:`._requests`, :mod:`._timers`)
hold only their own mechanism and read the rest here, as it is now, since
the parts appear one after another while the host starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pwf.server._connections import Connection
    from pwf.server._options import Options
    from pwf.server._subscriptions import Views
    from pwf.server._writer import Writer
    from pwf.server.metrics import Recorder
    from pwf.server.supervision import Supervisor

__all__ = ["Hub"]


class Hub(Protocol):
    """The served host's parts and its stop, as the rooms read them."""

    options: Options
    clock: Callable[[], int]
    writer: Writer | None
    views: Views | None
    supervisor: Supervisor | None
    metrics: Recorder | None
    connections: set[Connection]
    stopping: bool
    exit_code: int

    def request_stop(self) -> None:
        """Begin stopping (idempotent)."""

    async def renew(self) -> None:
        """Renew the host's claim and its workers' leases now, as the heartbeat does."""

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` in the background; a :class:`~pwf.errors.PwfError` is logged."""
