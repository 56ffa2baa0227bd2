"""``pwf serve``: the long-running host of one state database (HOST §1).

An edge room: imports the served host's decisions, the read model's views,
the state readers and its own rooms, one per job (ADR 0090):

- :mod:`._options`: how a host runs;
- :mod:`._lockfile`: the state directory and the process lock;
- :mod:`._claim`: the store opened on the writer, the host claim taken;
- :mod:`._writer`: the one writer thread, which commits decisions in groups
  and settles each answer only after its commit;
- :mod:`._listener` and :mod:`._connections`: the socket and each connection;
- :mod:`._requests`: each request routed to its answer, and the work after it;
- :mod:`._timers`: heartbeat, interaction expiry, publish;
- :mod:`._subscriptions`: the subscriptions and their pushes;
- :mod:`.supervision`: the worker processes;
- :mod:`.metrics`: ``--metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from typing import TYPE_CHECKING

from pwf.errors import PwfError
from pwf.host.served import STOPPING, Identity
from pwf.protocol.wire import PACKAGE_VERSION
from pwf.server._claim import open_writer, take_claim
from pwf.server._listener import Listener
from pwf.server._lockfile import HostPaths, acquire_lock, release_lock
from pwf.server._options import Options, wall_clock
from pwf.server._requests import Requests
from pwf.server._subscriptions import Views
from pwf.server._timers import Timers
from pwf.server.supervision import Registry, Supervisor, reap_orphans, start_identity
from pwf.statereaders import overview, verify_failure
from pwf.views.runs import direct_live
from pwf.views.status import Live

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from pwf.host.served import Recovery
    from pwf.protocol.client import ClientRequest, ClientResponse
    from pwf.server._connections import Connection
    from pwf.server._writer import Writer
    from pwf.server.metrics import Endpoint, Recorder

__all__ = ["PACKAGE_VERSION", "STOPPING", "HostPaths", "Options", "Server", "serve", "wall_clock"]

log = logging.getLogger("pwf.server")


class Server:
    """One host: its rooms put together, its start and its stop.

    The rooms hold the mechanisms: :class:`~pwf.server._listener.Listener`
    the socket and the connections, :class:`~pwf.server._requests.Requests`
    the answers, :class:`~pwf.server._timers.Timers` the periodic work, the
    writer the decisions, :class:`~pwf.server._subscriptions.Views` the
    subscriptions and the supervisor the worker processes.  The server owns
    the parts they share (:class:`~pwf.server._hub.Hub`) and the order in
    which they start and stop.
    """

    def __init__(self, options: Options) -> None:
        """Name the host's paths; nothing is touched before :meth:`start`.

        Raises:
            InputError: the socket path is too long for a Unix socket.
        """
        self.options = options
        self.paths = HostPaths(options.db)
        self.clock = options.clock
        self.writer: Writer | None = None
        self.recovery: Recovery | None = None
        self.connections: set[Connection] = set()
        self.stopping = False
        self.stopped = asyncio.Event()
        self.exit_code = 0
        self.supervisor: Supervisor | None = None
        self.views: Views | None = None
        self.metrics: Recorder | None = None
        """Counts requests and commits while ``--metrics`` serves them (ADR 0076)."""
        self.listener = Listener(self.paths.socket, self, options.connections)
        self.requests = Requests(self)
        self.timers = Timers(self)
        self._locked = False
        self._stop_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._endpoint: Endpoint | None = None

    # ------------------------------------------------------------------ start

    async def start(self) -> None:
        """HOST §1.5 in order; on any failure undo what was taken and re-raise."""
        paths = self.paths
        paths.create()
        pid = os.getpid()
        identity = start_identity(pid)
        if identity is None:
            raise PwfError("Cannot attest the workflow host process start identity")
        acquire_lock(paths.lock, pid, identity, self.options.host_id)
        self._locked = True
        try:
            self._serve_metrics()
            reaped = reap_orphans(paths.children)
            log.info("reaped %d exact orphan process(es)", reaped)
            who = Identity(self.options.host_id, pid, identity)
            self.writer = writer = await open_writer(self.options, who)
            self.recovery = await take_claim(writer, self.options, self.clock)
            if self.metrics is not None:
                writer.committed = self.metrics.committed
            await self.listener.listen(self)
        except BaseException:
            await self._undo()
            raise
        await self._serve_workers_and_views()
        self.timers.start()
        if self.options.signals:
            loop = asyncio.get_running_loop()
            for number in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(number, self.request_stop)
        assert self.recovery is not None
        log.info("ready on %s at epoch %d", paths.socket, self.recovery.epoch)
        await self.timers.poll()

    async def _serve_workers_and_views(self) -> None:
        """The supervisor (with ``worker_command``) and the views, once the claim is held."""
        writer, recovery = self.writer, self.recovery
        assert writer is not None
        assert recovery is not None
        command = self.options.worker_command
        if command:
            self.supervisor = Supervisor(
                writer.duty,
                command,
                Registry(self.paths.children),
                clock=self.clock,
                host_epoch=recovery.epoch,
                lease_ms=self.options.lease_ms,
                startup_seconds=self.options.startup_seconds,
            )
            parked = await self.supervisor.recover()
            if parked:
                log.info("parked %d run(s) left running by an earlier host", len(parked))
        supervisor = self.supervisor
        live = direct_live if supervisor is None else (lambda _ctx, run: run in supervisor.active)
        active = None if supervisor is None else (lambda: supervisor.active)
        self.views = Views(writer, self.clock, live, connections=self.connections, active=active)
        writer.written = self.views.stir
        if supervisor is not None:
            supervisor.changed = self.views.stir
        if writer.host is not None:
            writer.host.status_live = self._live
            writer.host.verifier = verify_failure
            writer.host.overview = overview

    def _serve_metrics(self) -> None:
        """Start the ``--metrics`` endpoint, if asked for, before the claim.

        Nothing is appended when its address cannot be bound, and ``/healthz``
        answers 503 until the claim is held.
        """
        address = self.options.metrics
        if address is None:
            return
        from pwf.server.metrics import Endpoint, Recorder  # noqa: PLC0415 - the metrics extra

        recorder = Recorder()
        endpoint = Endpoint(self, self.options.db, recorder, clock=self.clock)
        url = endpoint.start(*address)
        self._endpoint, self.metrics = endpoint, recorder
        log.info("metrics on %s", url)

    def _live(self) -> Live:
        active = 0 if self.supervisor is None else len(self.supervisor.active)
        return Live(self.listener.serving and not self.stopping, active, len(self.connections))

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` in the background; a :class:`PwfError` is logged, not raised."""

        async def guarded() -> None:
            try:
                await work
            except PwfError as error:
                log.warning("background work failed: %s", error)

        task = asyncio.get_running_loop().create_task(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _undo(self) -> None:
        """A start failed: close the listener, release the claim, remove socket and lock."""
        self.listener.close()
        if self._endpoint is not None:
            self._endpoint.close()
        if self.writer is not None:
            with contextlib.suppress(Exception):
                await self.writer.duty(lambda host: host.release(self.clock()))
            await asyncio.to_thread(self.writer.close)
        self._remove_files()

    def _remove_files(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()
        if self._locked:
            release_lock(self.paths.lock, self.options.host_id)
            self._locked = False

    # ------------------------------------------------------------------ connections

    def opened(self, connection: Connection) -> bool:
        """A connection was accepted: kept unless the host is stopping (the listener's)."""
        return self.listener.opened(connection)

    async def renew(self) -> None:
        """Renew the host's claim and its workers' leases now (the heartbeat's work)."""
        await self.timers.heartbeat()

    @property
    def refused_connections(self) -> int:
        """Connections closed before their hello since the host started (the listener's)."""
        return self.listener.refused

    def lost(self, connection: Connection) -> None:
        """A connection closed (the listener's)."""
        self.listener.lost(connection)

    def closing(self, connection: Connection, why: str) -> None:
        """A connection is closed for what its client did (the listener logs it)."""
        self.listener.closing(connection, why)

    def caught_up(self, connection: Connection) -> None:
        """A backed-up connection was read (the subscriptions')."""
        if self.views is not None:
            self.views.caught_up(connection)

    def dispatch(self, connection: Connection, request: ClientRequest) -> None:
        """Start answering ``request`` (:meth:`Requests.dispatch`)."""
        self.requests.dispatch(connection, request)

    def after(
        self, connection: Connection | None, request: ClientRequest, response: ClientResponse
    ) -> None:
        """An answer was written (:meth:`Requests.after`)."""
        self.requests.after(connection, request, response)

    # ------------------------------------------------------------------ stop

    def request_stop(self) -> None:
        """Begin stopping (idempotent): from a signal, ``host.stop`` or a lost claim."""
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self.stop())

    async def stop(self) -> None:
        """Finish what is in flight, answer the rest ``unavailable``, release, clean up.

        A second call waits for the first to finish.
        """
        if self.stopping:
            await self.stopped.wait()
            return
        self.stopping = True
        writer = self.writer
        if writer is not None and writer.host is not None:
            writer.host.stopping = True
        self.timers.cancel()
        self.listener.close()
        await self.listener.drain()
        if self.supervisor is not None:
            await self.supervisor.stop("orphaned")
        if writer is not None:
            try:
                await writer.duty(lambda host: host.release(self.clock()))
            except PwfError as error:
                log.warning("releasing the claim failed: %s", error)
            await asyncio.to_thread(writer.close)
        if self._endpoint is not None:
            await asyncio.to_thread(self._endpoint.close)
        self._remove_files()
        log.info("stopped")
        self.stopped.set()


async def _main(options: Options) -> int:
    server = Server(options)
    await server.start()
    await server.stopped.wait()
    return server.exit_code


def serve(options: Options) -> int:
    """Run a host in the foreground until it stops; its exit code.

    Raises:
        PwfError: the host could not start (another host, no identity, bad path).
    """
    return asyncio.run(_main(options))
