"""The served host's state reads: ``state.status`` for each request, ``state.verify`` one at a time.

Imports the host's state reads and their verifier, the protocol and the
store's opener.  A host with its own database file answers both off its
writer, in a worker thread, on a read-only store of the same file, so
the answers are direct mode's (HOST §2.16, §2.17); a host on a shared log
asks its writer, whose store knows the log.

``state.verify`` costs an integrity check of the file, a walk of the whole
log and a rebuild of the projections: about a minute of processor time at
a million events.  So one runs at a time, and the requests that come while
it runs share the answer of the next one, which starts when it ends: that
one begins after each of them came, so its answer is the one each would
have had alone.  A client that pipelines hundreds of them costs the host
two verifies, not hundreds, and a stop waits for one at most: those still
waiting are answered ``unavailable``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import msgspec

from pwf.host.served import STOPPING
from pwf.host.statereads import state_read
from pwf.protocol.client import ClientResponse
from pwf.statereaders import overview, verify_failure
from pwf.store.opening import open_file

if TYPE_CHECKING:
    from pwf.protocol.client import ClientRequest
    from pwf.server._hub import Hub

__all__ = ["StateReads"]


class StateReads:
    """Answers ``state.status`` and ``state.verify``; verifies run one at a time, shared."""

    def __init__(self, hub: Hub) -> None:
        """Bind the host whose file, or whose writer, answers."""
        self.hub = hub
        self._next: asyncio.Future[ClientResponse] | None = None
        """The answer of the verify that starts when the running one ends, shared by its askers."""
        self._running: asyncio.Task[None] | None = None

    async def answer(self, request: ClientRequest) -> ClientResponse:
        """The answer to ``request``, a ``state.status`` or a ``state.verify``."""
        if request.operation != "state.verify":
            return await self._read(request)
        shared = self._next
        if shared is None:
            shared = self._next = asyncio.get_running_loop().create_future()
            if self._running is None:
                self._start(request)
        found = await asyncio.shield(shared)  # an asker that goes leaves the others' verify
        return msgspec.structs.replace(found, request_id=request.request_id)

    def _start(self, request: ClientRequest) -> None:
        """Run the verify the waiting requests share; ``request`` is one of them."""
        waiting, self._next = self._next, None
        assert waiting is not None
        self._running = asyncio.get_running_loop().create_task(self._verify(request, waiting))

    async def _verify(
        self, request: ClientRequest, waiting: asyncio.Future[ClientResponse]
    ) -> None:
        try:
            waiting.set_result(await self._read(request))
        except Exception as error:  # noqa: BLE001 - each asker answers it as its own (HOST §1)
            waiting.set_exception(error)
        finally:
            self._running = None
            if self._next is not None:
                if self.hub.stopping:
                    stopped, self._next = self._next, None
                    stopped.set_result(
                        ClientResponse(
                            request_id=request.request_id, outcome="unavailable", error=STOPPING
                        )
                    )
                else:
                    self._start(request)

    async def _read(self, request: ClientRequest) -> ClientResponse:
        hub = self.hub
        if hub.options.store_url is None:
            return await asyncio.to_thread(self._read_file, request)
        writer = hub.writer
        assert writer is not None
        decided = await writer.submit(lambda host: host.decide(request, hub.clock()))
        return decided[0]

    def _read_file(self, request: ClientRequest) -> ClientResponse:
        """A state read on a read-only store of the host's file, as direct mode answers it."""
        options = self.hub.options
        store = open_file(options.db, read_only=True, busy_timeout_ms=options.busy_timeout_ms)
        try:
            return state_read(
                store, request, self.hub.clock(), verifier=verify_failure, overview=overview
            )
        finally:
            store.close()
