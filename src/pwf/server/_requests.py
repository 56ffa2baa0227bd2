"""Answering a served request: route it, await a verdict, read state, act after (HOST §1.12-§1.17).

Imports the served host's decisions, its state reads, the protocol and the
subscription room.  Most requests go to the writer with a callback and are
answered once their group commits; subscriptions and the state reads
(:mod:`._statereads`) run as tasks of their own; ``interaction.submit``
waits for its worker's verdict.  After each answer the host may stop, stop a cancelled run's
worker, look for work, and publish to the connection's subscriptions.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from pwf.errors import PwfError
from pwf.host import run_handoff
from pwf.host.statereads import STATE_READS
from pwf.protocol.client import ClientResponse
from pwf.server._statereads import StateReads
from pwf.server._subscriptions import SUBSCRIBING

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.host.served import ServedHost
    from pwf.protocol.client import ClientRequest
    from pwf.server._connections import Connection
    from pwf.server._hub import Hub

__all__ = ["SUBMIT_POLL_SECONDS", "Requests"]

SUBMIT_POLL_SECONDS: Final = 0.025
"""``interaction.submit`` looks for its verdict this often, as the original does (HOST §1.13)."""
ALONE: Final = frozenset({"state.prune"})
"""Requests decided in a group of their own: their file work must not hold others' commits."""


class Requests:
    """Routes each request to its answer and runs the host's work after each answer."""

    def __init__(self, hub: Hub) -> None:
        """Bind the host whose writer, subscriptions and supervisor answer."""
        self.hub = hub
        self.state_reads = StateReads(hub)

    def dispatch(self, connection: Connection, request: ClientRequest) -> None:
        """Queue ``request``'s decision; its answer is written once that is committed.

        Subscriptions and state reads (:mod:`._statereads`: ``state.verify``
        always, ``state.status`` on a host with its own database file) run as
        tasks of their own; every other request goes to the writer
        with a callback, so the common path creates no task and no future.
        """
        hub = self.hub
        writer = hub.writer
        assert writer is not None
        if hub.metrics is not None:
            hub.metrics.received(request)
        views = hub.views
        operation = request.operation
        if views is not None and operation in SUBSCRIBING:
            connection.spawn(request, views.answer(connection, request))
            return
        if operation == "state.verify" or (
            operation in STATE_READS and hub.options.store_url is None
        ):
            connection.spawn(request, self.state_reads.answer(request))
            return
        if operation == "state.backup":
            connection.spawn(request, self._backup(request))
            return
        if operation == "state.prune" and hub.options.store_url is None:
            connection.spawn(request, self._prune(request))
            return
        if views is not None and operation == "view.session.watch":
            refused = views.session_watch(connection, request)
            if refused is not None:  # the host keeps no more subscriptions (ADR 0124)
                connection.answered(request, refused)
                return
        writer.call(
            lambda host: host.decide(request, hub.clock(), connection.id),
            lambda decided, error: self._decided(connection, request, decided, error),
            alone=operation in ALONE,
            source=connection,
        )

    async def _backup(self, request: ClientRequest) -> ClientResponse:
        """``state.backup``: validated and recorded by the writer, the copy made off it (ADR 0114).

        At a million events the copy and its proof take a minute; on the
        writer they held every decision and the claim's renewal for as long,
        and the host lost its claim.
        """
        hub = self.hub
        writer = hub.writer
        assert writer is not None
        begun = await writer.submit(
            lambda host: host.begin_backup(request, hub.clock()), alone=True
        )
        if isinstance(begun, ClientResponse):
            return begun
        error = await asyncio.to_thread(run_handoff, begun)
        return await writer.submit(lambda host: host.finish_backup(begun, error), alone=True)

    async def _prune(self, request: ClientRequest) -> ClientResponse:
        """``state.prune`` of the host's own file: planned, installed and recorded by the writer.

        The backup's copy and the compaction's fold run off the writer
        (ADR 0114); the maintenance lock the plan took is released whatever
        happens.
        """
        hub = self.hub
        writer = hub.writer
        assert writer is not None
        begun = await writer.submit(lambda host: host.begin_prune(request, hub.clock()), alone=True)
        if isinstance(begun, ClientResponse):
            return begun
        from pwf.host.prune import prepare_prune  # noqa: PLC0415 - only a prune loads it

        try:
            prepared = await asyncio.to_thread(prepare_prune, begun)
            # The install holds the write lock for seconds at a million events: the
            # claim and the workers' leases are renewed just before, so they outlast it.
            await hub.renew()
            return await writer.submit(lambda host: host.finish_prune(begun, prepared), alone=True)
        finally:
            begun.held.close()

    def _decided(
        self,
        connection: Connection,
        request: ClientRequest,
        decided: tuple[ClientResponse, str | None] | None,
        error: BaseException | None,
    ) -> None:
        if error is not None or decided is None:
            connection.failed(request, error or PwfError("Workflow request failed"))
            return
        response, submission = decided
        if submission is None:
            connection.answered(request, response)
        else:
            connection.spawn(request, self._verdict_of(connection, request, response, submission))

    async def _verdict_of(
        self,
        connection: Connection,
        request: ClientRequest,
        response: ClientResponse,
        submission: str,
    ) -> ClientResponse:
        """``interaction.submit`` waits for its worker's verdict (DOMAIN §8)."""
        hub = self.hub
        writer = hub.writer
        assert writer is not None
        while True:
            if hub.stopping or connection.closed:
                return ClientResponse(
                    request_id=request.request_id,
                    outcome="unavailable",
                    error="Workflow host stopped while validating the submission",
                )
            await asyncio.sleep(SUBMIT_POLL_SECONDS)
            verdict = await writer.submit(_verdict(request, submission, response), read=True)
            if verdict is not None:
                return verdict

    def after(
        self, connection: Connection | None, request: ClientRequest, response: ClientResponse
    ) -> None:
        """After an answer: stop, stop a cancelled run's worker, look for work, publish.

        ``host.stop`` stops once its answer is written (HOST §1.17); a live
        run's cancel stops its worker with ``cancelled`` (§4.1).
        """
        hub = self.hub
        if hub.metrics is not None:
            hub.metrics.answered(request, response)
        if request.operation == "host.stop" and response.outcome == "accepted":
            asyncio.get_running_loop().call_soon(hub.request_stop)
            return
        supervisor = hub.supervisor
        if supervisor is not None and response.outcome in ("accepted", "adopted"):
            if request.operation == "run.cancel" and request.run_id is not None:
                supervisor.stop_run(request.run_id, "cancelled")
            supervisor.claim_soon()
        views = hub.views
        if views is not None and connection is not None and views.watching(connection):
            hub.spawn(views.publish(connection))


def _verdict(
    request: ClientRequest, submission: str, started: ClientResponse
) -> Callable[[ServedHost], ClientResponse | None]:
    """One look for a submission's verdict, bound to this submission."""
    return lambda host: host.verdict(request, submission, started)
