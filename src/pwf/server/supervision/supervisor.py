"""The runs a served host supervises: claim, spawn, answer, renew, stop, recover (HOST §7).

An edge room over :mod:`.process` (one worker's process), :mod:`.children`
(the processes a worker registers) and the host's decisions, which it
reaches only through ``submit``: a function that runs one decision on the
host's writer and returns its result.  So the same
supervisor works under ``pwf serve`` (the group-committing writer) and in
tests (a host called directly).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from pwf.commands import supervision
from pwf.commands.processes import PROCESS_OPERATIONS
from pwf.errors import CommandError, PwfError
from pwf.protocol.worker import encode_launch, encode_worker_response, parse_worker_message
from pwf.server.supervision.backoff import Backoff
from pwf.server.supervision.children import Children
from pwf.server.supervision.identity import start_identity
from pwf.server.supervision.process import STARTUP_SECONDS, STOP_GRACE_SECONDS, WorkerProcess

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from pwf.commands import Context
    from pwf.events.runs import WorkerEnd
    from pwf.host import Host
    from pwf.protocol.worker import LaunchEnvelope
    from pwf.server.supervision.process import Exit
    from pwf.server.supervision.registry import Registry
    from pwf.store import EventStore

__all__ = ["ENDING", "HANDOFF_SECONDS", "Active", "Owed", "Supervisor"]

log = logging.getLogger("pwf.server")
T = TypeVar("T")

HANDOFF_SECONDS: Final = 1.0
"""A worker whose last message ended its epoch has this long to exit (§7.10)."""
ENDING: Final = frozenset(
    {"run.finished", "interaction.request", "interaction.reject", "run.park", "worker.exiting"}
)
"""Worker operations after which the worker's epoch is over."""


@dataclass
class Active:
    """A run with a worker process of this host."""

    run_id: str
    envelope: LaunchEnvelope
    process: WorkerProcess
    exiting: bool = False


class Owed:
    """The claims a supervisor owes after answers, run in turn by one task.

    A flood of answers owes as many claims as it had answers, but they are
    counted, not each given a task of its own; the count is dropped once a
    claim finds nothing to start, since the ones after it would find
    nothing either until something changes, and a change calls again.
    """

    def __init__(self, supervisor: Supervisor) -> None:
        """Nothing owed yet."""
        self.supervisor = supervisor
        self.count = 0
        """Calls of :meth:`Supervisor.claim_soon` not yet run."""
        self._paying: asyncio.Task[None] | None = None

    def add(self) -> None:
        """Owe one more claim; start the task that pays them unless it runs."""
        self.count += 1
        if self._paying is None:
            tasks = self.supervisor.tasks
            self._paying = asyncio.get_running_loop().create_task(self._pay())
            tasks.add(self._paying)
            self._paying.add_done_callback(tasks.discard)

    async def _pay(self) -> None:
        supervisor = self.supervisor
        try:
            while self.count and not supervisor.stopping:
                self.count -= 1
                if not await supervisor.claim():
                    self.count = 0
        except PwfError as error:
            log.warning("claiming a run failed: %s", error)
            self.count = 0
        finally:
            self._paying = None


AHEAD: Final = 8
"""Candidates a claim judges at once: it starts the first one it can (ADR 0117)."""


class Supervisor:
    """Starts a worker for each run there is work for, and records how each one ends."""

    def __init__(  # noqa: PLR0913 - each keyword is a host setting
        self,
        submit: Callable[[Callable[[Host[EventStore]], object]], Awaitable[object]],
        command: Sequence[str],
        registry: Registry,
        *,
        clock: Callable[[], int],
        host_epoch: int,
        lease_ms: int = 30_000,
        env: Mapping[str, str] | None = None,
        startup_seconds: float = STARTUP_SECONDS,
        stop_grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        """Bind the host's writer, the worker command and the registry; nothing runs yet."""
        self._submit = submit
        self.command = list(command)
        self.registry = registry
        self.clock = clock
        self.host_epoch = host_epoch
        self.lease_ms = lease_ms
        self.env = dict(os.environ if env is None else env)
        self.startup_seconds = startup_seconds
        self.stop_grace_seconds = stop_grace_seconds
        self.active: dict[str, Active] = {}
        self.changed: Callable[[], None] | None = None
        """Called on the loop when a run gains or loses its supervised worker (liveness)."""
        self.children = Children(registry)
        """Each worker epoch's registered child processes (§7.7)."""
        self.tasks: set[asyncio.Task[object]] = set()
        self.exits: dict[str, int] = {}
        """Worker processes ended so far, by outcome (metrics)."""
        self.stopping = False
        self.backoff = Backoff()
        self._claiming = asyncio.Lock()
        self._owed = Owed(self)

    def _changed(self) -> None:
        if self.changed is not None:
            self.changed()

    async def _call(self, decide: Callable[[Host[EventStore]], T]) -> T:
        return await self._submit(decide)  # type: ignore[return-value]

    async def _decide(
        self, operation: str, function: Callable[..., T], *args: object, **kw: object
    ) -> T:
        """``function(ctx, *args, **kw)``, decided on the writer as ``operation``."""

        def bound(ctx: Context) -> T:
            return function(ctx, *args, **kw)

        return await self._call(lambda host: host.supervise(operation, self.clock(), bound))

    # ------------------------------------------------------------------ claiming

    async def recover(self) -> list[str]:
        """Park runs an earlier host left running without a worker (§7.13)."""
        return await self._decide("worker.recover", supervision.recover_abandoned)

    async def claim(self) -> bool:
        """``claimOne``: start a worker for the first run there is work for (§7.1).

        One run per call, as the original activates one per ``claimOne``, after
        each answer that may have made work, after a worker ends and on the
        poll; calls take turns.  True when a worker was started.
        """
        if self.stopping:
            return False
        async with self._claiming:
            refused: set[str] = set()
            while True:  # the first few candidates; past them only if each was refused
                busy = {*self.active, *refused, *self.backoff.waiting(time.monotonic())}
                launchable = supervision.launchable
                candidates = await self._decide("worker.claim", launchable, busy, most=AHEAD)
                for run_id in candidates:
                    if self.stopping:
                        return False
                    if await self._activate(run_id):
                        return True
                    refused.add(run_id)
                if len(candidates) < AHEAD:
                    return False

    def claim_soon(self) -> None:
        """One more :meth:`claim`, after an answer; one task runs them in turn (:class:`Owed`)."""
        if not self.stopping:
            self._owed.add()

    async def _activate(self, run_id: str) -> bool:
        """Claim ``run_id`` for a new worker epoch and start supervising it; False if refused."""
        try:
            envelope = await self._call(
                lambda host: host.launch(run_id, self.clock(), self.host_epoch)
            )
        except CommandError as error:
            log.info("run %s not claimed: %s", run_id, error)
            return False
        process = WorkerProcess(
            self.command,
            encode_launch(envelope),
            cwd=envelope.project_path,
            env=self.env,
            answer=functools.partial(self._answer, run_id),
            startup_seconds=self.startup_seconds,
            stop_grace_seconds=self.stop_grace_seconds,
        )
        active = Active(run_id, envelope, process)
        self.active[run_id] = active
        self._changed()
        task = asyncio.create_task(self._supervise(active))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return True

    async def _supervise(self, active: Active) -> None:
        envelope, process = active.envelope, active.process
        if process.stopped_before_start is not None:
            # Cancelled between the claim and the spawn (§4.1 path 2): nothing is started.
            await self._gone(active, process.stopped_before_start)
            return
        try:
            pid = await process.start()
        except OSError as error:
            diagnostic = f"Workflow worker could not start: {error}"
            log.warning("run %s: %s", active.run_id, diagnostic)
            await self._gone(active, "crashed", diagnostic=diagnostic)
            return
        identity = start_identity(pid) or f"pid:{pid}"
        self.registry.add(pid, identity)
        more: dict[str, str] = {}
        try:
            try:
                await self._decide(
                    "worker.attach",
                    supervision.attach_process,
                    active.run_id,
                    envelope.worker_epoch,
                    pid,
                    identity,
                )
            except CommandError as error:
                # The epoch ended while the process started (a cancel took path 2).
                log.info("worker %s stopped at once: %s", envelope.worker_epoch, error)
                process.stop("cancelled")
            except PwfError as error:
                # Not attached in the log, so not run: stopped as a crash, its end recorded.
                more["diagnostic"] = f"Workflow worker could not be attached: {error}"
                log.warning("run %s: %s", active.run_id, more["diagnostic"])
                process.stop("crashed")
            ended = await process.run()
        finally:
            process.kill_group()
            self.registry.remove(pid)
            self.children.reap(envelope.worker_epoch)
        await self._gone(active, ended.outcome, ended, **more)

    async def _gone(
        self, active: Active, outcome: WorkerEnd, ended: Exit | None = None, **more: str
    ) -> None:
        """Record the end (§7.11), forget the run, and look for work again."""
        result = "finished"
        try:
            result = await self._decide(
                "worker.exit",
                supervision.worker_gone,
                active.run_id,
                active.envelope.worker_epoch,
                outcome,
                exit_code=None if ended is None else ended.exit_code,
                signal=None if ended is None else ended.signal,
                diagnostic=more.get("diagnostic", None if ended is None else ended.diagnostic),
            )
        except PwfError as error:
            log.warning(
                "recording the end of worker %s failed: %s", active.envelope.worker_epoch, error
            )
        finally:
            self.active.pop(active.run_id, None)
            self._changed()
        # Counted as the log has it: a worker whose last message ended its epoch was recorded
        # "exited" then, however its process ended afterwards.
        recorded = "exited" if result == "finished" and active.exiting else outcome
        self.exits[recorded] = self.exits.get(recorded, 0) + 1
        self.backoff.ended(active.run_id, recorded, time.monotonic())
        if result == "parked":
            log.info("run %s parked after worker %s", active.run_id, outcome)
        elif not self.stopping:
            task = asyncio.create_task(self.claim())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _answer(self, run_id: str, line: bytes) -> bytes:
        """One worker line, decided on the host; an epoch-ending one starts the handoff timer."""
        message = parse_worker_message(line)
        facts = None
        if message.operation in PROCESS_OPERATIONS:
            before = self.active.get(run_id)
            facts = self.children.facts(None if before is None else before.process.pid, message)
        response = await self._call(lambda host: host.worker(message, self.clock(), facts))
        active = self.active.get(run_id)
        settled = response.outcome in ("accepted", "adopted")
        if settled and message.operation in PROCESS_OPERATIONS:
            self.children.registered(message)
        if active is None:
            return encode_worker_response(response)
        if response.outcome == "claimLost" and response.error == "Run claim expired":
            active.process.stop("claimLost")
        elif message.operation in ENDING and settled:
            active.exiting = True
            asyncio.get_running_loop().call_later(HANDOFF_SECONDS, active.process.stop, "orphaned")
        return encode_worker_response(response)

    # ------------------------------------------------------------------ heartbeat and stop

    async def renew(self) -> None:
        """Renew every active run's claim at once; a refused one stops its worker ``claimLost``."""
        held = [
            (active.run_id, active.envelope.worker_epoch)
            for active in self.active.values()
            if not active.exiting and active.process.ready.is_set()
        ]
        if not held:
            return
        refused = await self._decide("worker.renew", supervision.renew_claims, held, self.lease_ms)
        for run_id in refused:
            log.warning("run %s lost its claim", run_id)
            self.stop_run(run_id, "claimLost")

    def stop_run(self, run_id: str, outcome: WorkerEnd) -> bool:
        """Stop the worker of ``run_id`` with ``outcome`` (cancel, pause, claim loss)."""
        active = self.active.get(run_id)
        if active is None:
            return False
        active.process.stop(outcome)
        return True

    async def stop(self, outcome: WorkerEnd = "orphaned") -> None:
        """Host stop: every worker is stopped with ``orphaned`` and its run parked (§1.18)."""
        self.stopping = True
        for active in list(self.active.values()):
            active.process.stop(outcome)
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
