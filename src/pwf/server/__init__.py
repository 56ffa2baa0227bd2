"""``pwf serve``: the long-running host of one state database (HOST §1).

An edge room: imports the served host, the store, the read model and the
protocol.  The event loop owns the socket, the connections and the timers;
every decision goes to the one writer thread (:mod:`pwf.server._writer`),
which commits them in groups and settles each answer only after its commit.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import secrets
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from pwf.errors import CommandError, PwfError
from pwf.host._statereads import STATE_READS, state_read
from pwf.host.served import STOPPING, Identity, ServedHost
from pwf.protocol.client import ClientResponse
from pwf.readmodel import ReadModel
from pwf.server._connections import PACKAGE_VERSION, Connection
from pwf.server._process import (
    HostPaths,
    acquire_lock,
    reap_orphans,
    release_lock,
    start_identity,
)
from pwf.server._views import PUBLISH_SECONDS, SUBSCRIBING, Views
from pwf.server._writer import Writer
from pwf.sqlviews import install_views, views_current
from pwf.statereaders import overview, verify_failure
from pwf.store.opening import open_file, open_mirror, open_shared_log
from pwf.supervise import STARTUP_SECONDS, Registry
from pwf.supervisor import Supervisor
from pwf.views.runs import direct_live
from pwf.views.status import Live

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from pwf.host.served import Recovery
    from pwf.protocol.client import ClientRequest
    from pwf.server.metrics import Endpoint, Recorder
    from pwf.store import EventStore
    from pwf.store.sqlite import Synchronous

__all__ = ["PACKAGE_VERSION", "HostPaths", "Options", "Server", "serve"]

log = logging.getLogger("pwf.server")

SUBMIT_POLL_SECONDS: Final = 0.025
"""``interaction.submit`` looks for its verdict this often, as the original does (HOST §1.13)."""
STOP_GRACE_SECONDS: Final = 30.0
"""How long a stop waits for the requests in flight before it closes their sockets."""


def wall_clock() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


@dataclass
class Options:
    """How a host runs; tests inject the clock, ids and timer periods."""

    db: Path
    store_url: str | None = None
    """A shared PostgreSQL log; ``db`` is then this host's local projection file (ADR 0038)."""
    synchronous: Synchronous = "FULL"
    busy_timeout_ms: int = 5_000
    lease_ms: int = 30_000
    heartbeat_ms: int = 10_000
    poll_ms: int = 2_000
    clock: Callable[[], int] = wall_clock
    host_id: str = field(default_factory=lambda: f"host-{uuid.uuid4()}")  # noqa: TID251 - the edge
    token: str = field(
        default_factory=lambda: (
            base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        )
    )
    new_epoch: Callable[[], str] | None = None
    signals: bool = True
    worker_command: tuple[str, ...] | None = None
    """What is started for each run the host activates (HOST §7); None: ``pwf worker launch``."""
    startup_seconds: float = STARTUP_SECONDS
    metrics: tuple[str, int] | None = None
    """Serve ``/metrics`` and ``/healthz`` on this (host, port) (ADR 0076); None: no endpoint."""


class Server:
    """One host: lock, claim, listener, timers, connections."""

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
        self._listener: asyncio.AbstractServer | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._locked = False
        self._stop_task: asyncio.Task[None] | None = None
        self.supervisor: Supervisor | None = None
        self.views: Views | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.metrics: Recorder | None = None
        """Counts requests and commits while ``--metrics`` serves them (ADR 0076)."""
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
            await self._claim(Identity(self.options.host_id, pid, identity))
            if self.metrics is not None and self.writer is not None:
                self.writer.committed = self.metrics.committed
            await self._listen()
        except BaseException:
            await self._undo()
            raise
        await self._serve_workers_and_views()
        self._timers = [
            asyncio.create_task(self._every(self.options.heartbeat_ms, self._heartbeat)),
            asyncio.create_task(self._every(self.options.poll_ms, self._poll)),
            asyncio.create_task(self._every(int(PUBLISH_SECONDS * 1000), self._publish)),
        ]
        if self.options.signals:
            loop = asyncio.get_running_loop()
            for number in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(number, self.request_stop)
        assert self.recovery is not None
        log.info("ready on %s at epoch %d", paths.socket, self.recovery.epoch)
        await self._poll()

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
        listening = self._listener is not None and self._listener.is_serving()
        active = 0 if self.supervisor is None else len(self.supervisor.active)
        return Live(listening and not self.stopping, active, len(self.connections))

    def _spawn(self, work: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await work
            except PwfError as error:
                log.warning("background work failed: %s", error)

        task = asyncio.get_running_loop().create_task(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _publish(self) -> None:
        if self.views is not None and not self.stopping:
            await self.views.publish_all(self.connections)

    async def _claim(self, identity: Identity) -> None:
        options = self.options

        def open_host() -> tuple[EventStore, ServedHost]:
            read_model = ReadModel()
            if options.store_url is not None:
                store = _mirror(options, read_model)
            else:
                store = open_file(
                    options.db,
                    synchronous=options.synchronous,
                    busy_timeout_ms=options.busy_timeout_ms,
                    hooks=[read_model],
                    serving=True,
                )
            try:
                store.projections_file.install(read_model.install)
                if options.store_url is None:  # a database made before its views (ADR 0049)
                    store.projections_file.upgrade(views_current, install_views)
            except BaseException:
                store.close()
                raise
            return store, ServedHost(store, identity, new_epoch=options.new_epoch)

        self.writer = await asyncio.to_thread(Writer, open_host)
        token_hash = hashlib.sha256(options.token.encode()).hexdigest()
        self.recovery = await self.writer.submit(
            lambda host: host.start(token_hash, options.lease_ms, self.clock())
        )

    async def _listen(self) -> None:
        socket_path = self.paths.socket
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_unix_server(
            lambda: Connection(self), path=str(socket_path)
        )
        socket_path.chmod(0o600)

    async def _undo(self) -> None:
        """A start failed: close the listener, release the claim, remove socket and lock."""
        if self._listener is not None:
            self._listener.close()
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

    # ------------------------------------------------------------------ timers

    async def _every(self, period_ms: int, tick: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_ms / 1000)
            await tick()

    async def _heartbeat(self) -> None:
        writer = self.writer
        assert writer is not None
        try:
            await writer.duty(lambda host: host.renew(self.options.lease_ms, self.clock()))
        except CommandError as error:
            log.error("host claim lost: %s", error)  # noqa: TRY400 - one line, no traceback
            self.exit_code = 3
            self.request_stop()
            return
        if self.supervisor is not None and not self.stopping:
            await self.supervisor.renew()

    async def _poll(self) -> None:
        """Interaction expiry (DOMAIN §10.7); a failed pass is logged and tried again."""
        writer = self.writer
        assert writer is not None
        try:
            await writer.duty(lambda host: host.expire(self.clock()))
        except PwfError as error:
            log.warning("interaction expiry failed: %s", error)
        if self.supervisor is not None and not self.stopping:
            await self.supervisor.claim()

    # ------------------------------------------------------------------ connections

    def opened(self, connection: Connection) -> bool:
        """A connection was accepted: keep it, unless the host is stopping."""
        if self.stopping:
            return False
        self.connections.add(connection)
        return True

    def lost(self, connection: Connection) -> None:
        """A connection closed: once its requests are done, forget it, detach its coordinators."""
        self._spawn(self._forget(connection))

    async def _forget(self, connection: Connection) -> None:
        try:
            await connection.drained()
        finally:
            self.connections.discard(connection)
            if self.views is not None:
                self.views.forget(connection)
            if not self.stopping and self.writer is not None:
                with contextlib.suppress(PwfError):
                    await self.writer.submit(
                        lambda host: host.detach_connection(connection.id, self.clock())
                    )

    def dispatch(self, connection: Connection, request: ClientRequest) -> None:
        """Queue ``request``'s decision; its answer is written once that is committed.

        Subscriptions and state reads run as tasks of their own (:meth:`_answer`);
        every other request goes to the writer with a callback, so the common
        path creates no task and no future.
        """
        writer = self.writer
        assert writer is not None
        if self.metrics is not None:
            self.metrics.received(request)
        views = self.views
        operation = request.operation
        if (views is not None and operation in SUBSCRIBING) or (
            operation in STATE_READS and self.options.store_url is None
        ):
            connection.spawn(request, self._answer(connection, request))
            return
        if views is not None and operation == "view.session.watch":
            views.session_watch(connection, request)
        writer.call(
            lambda host: host.decide(request, self.clock(), connection.id),
            lambda decided, error: self._decided(connection, request, decided, error),
            alone=operation in ("state.backup", "state.prune"),
            source=connection,
        )

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

    async def _answer(self, connection: Connection, request: ClientRequest) -> ClientResponse:
        writer = self.writer
        assert writer is not None
        views = self.views
        if views is not None and request.operation in SUBSCRIBING:
            return await views.answer(connection, request)
        if views is not None and request.operation == "view.session.watch":
            views.session_watch(connection, request)
        if request.operation in STATE_READS and self.options.store_url is None:
            return await asyncio.to_thread(self._read_state, request)
        alone = request.operation in ("state.backup", "state.prune")
        response, submission = await writer.submit(
            lambda host: host.decide(request, self.clock(), connection.id), alone=alone
        )
        if submission is None:
            return response
        return await self._verdict_of(connection, request, response, submission)

    async def _verdict_of(
        self,
        connection: Connection,
        request: ClientRequest,
        response: ClientResponse,
        submission: str,
    ) -> ClientResponse:
        """``interaction.submit`` waits for its worker's verdict (DOMAIN §8)."""
        writer = self.writer
        assert writer is not None
        while True:
            if self.stopping or connection.closed:
                return ClientResponse(
                    request_id=request.request_id,
                    outcome="unavailable",
                    error="Workflow host stopped while validating the submission",
                )
            await asyncio.sleep(SUBMIT_POLL_SECONDS)
            verdict = await writer.submit(_verdict(request, submission, response), read=True)
            if verdict is not None:
                return verdict

    def _read_state(self, request: ClientRequest) -> ClientResponse:
        """``state.status`` or ``state.verify`` on a read-only connection of its own.

        It runs in a worker thread, so a verify that folds the whole log
        never holds up the writer, and it answers what direct mode answers.
        A host on a shared log reads on its writer, whose store knows the log.
        """
        options = self.options
        store = open_file(options.db, read_only=True, busy_timeout_ms=options.busy_timeout_ms)
        try:
            return state_read(
                store,
                request,
                self.clock(),
                verifier=verify_failure,
                overview=overview,
            )
        finally:
            store.close()

    def after(
        self, connection: Connection | None, request: ClientRequest, response: ClientResponse
    ) -> None:
        """After an answer: stop, stop a cancelled run's worker, look for work, publish.

        ``host.stop`` stops once its answer is written (HOST §1.17); a live
        run's cancel stops its worker with ``cancelled`` (§4.1).
        """
        if self.metrics is not None:
            self.metrics.answered(request, response)
        if request.operation == "host.stop" and response.outcome == "accepted":
            asyncio.get_running_loop().call_soon(self.request_stop)
            return
        supervisor = self.supervisor
        if supervisor is not None and response.outcome in ("accepted", "adopted"):
            if request.operation == "run.cancel" and request.run_id is not None:
                supervisor.stop_run(request.run_id, "cancelled")
            supervisor.claim_soon()
        if self.views is not None and connection is not None and self.views.watching(connection):
            self._spawn(self.views.publish(connection))

    # ------------------------------------------------------------------ stop

    def request_stop(self) -> None:
        """Begin stopping (idempotent): from a signal, ``host.stop`` or a lost claim."""
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self.stop())

    async def _inflight_done(self) -> None:
        """Wait up to the grace period for every connection's requests in flight."""
        busy = [
            asyncio.get_running_loop().create_task(connection.drained())
            for connection in self.connections
            if connection.inflight
        ]
        if busy:
            await asyncio.wait(busy, timeout=STOP_GRACE_SECONDS)
            for waiting in busy:
                waiting.cancel()

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
        for timer in self._timers:
            timer.cancel()
        if self._listener is not None:
            self._listener.close()
        await self._inflight_done()
        for connection in list(self.connections):
            connection.close()
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


def _verdict(
    request: ClientRequest, submission: str, started: ClientResponse
) -> Callable[[ServedHost], ClientResponse | None]:
    """One look for a submission's verdict, bound to this submission."""
    return lambda host: host.verdict(request, submission, started)


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


__all__ += ["STOPPING", "wall_clock"]


def _mirror(options: Options, read_model: ReadModel) -> EventStore:
    """The host's local file on the shared log at ``options.store_url``, caught up."""
    assert options.store_url is not None
    log = open_shared_log(options.store_url)
    try:
        store = open_mirror(
            options.db,
            log,
            busy_timeout_ms=options.busy_timeout_ms,
            hooks=[read_model],
            install=read_model.install,
        )
    except BaseException:
        log.close()
        raise
    store.catch_up()
    return store
