"""One worker process a host supervises: spawn, one message at a time, stop, exit (HOST §7).

An edge room: it starts a process, reads its pipes and sends signals.
It decides nothing about runs: each worker line goes to ``answer`` and the
reply goes back on the worker's stdin before the next line is read
(§7.4); how the process ended is reported as an :class:`Exit` for the
host to record.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from pwf.errors import PwfError
from pwf.protocol.framing import FrameDecoder
from pwf.protocol.worker import LAUNCH_ENV, launch_variable
from pwf.server.supervision.identity import signal_group
from pwf.server.supervision.stderr import Forwarding

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from pwf.events.runs import WorkerEnd

__all__ = ["STARTUP_SECONDS", "STOP_GRACE_SECONDS", "Exit", "WorkerProcess"]

log = logging.getLogger("pwf.server")

STARTUP_SECONDS: Final = 15.0
"""A worker must answer ``worker.ready`` within this (``workerStartupTimeoutMs``, §7.6)."""
STOP_GRACE_SECONDS: Final = 2.0
"""SIGTERM to the group, then SIGKILL after this long (§7.8)."""
DIAGNOSTIC_BYTES: Final = 65_536
_READ_BYTES: Final = 1 << 16
_DRAIN_SECONDS: Final = 1.0
_EXIT_POLL_SECONDS: Final = 0.02
"""How often the end of a worker process is looked for (see :meth:`WorkerProcess.exited`)."""


@dataclass
class Exit:
    """How a worker process ended, as its row records it (§7.8, §7.11)."""

    outcome: WorkerEnd
    exit_code: int | None
    signal: str | None
    diagnostic: str | None
    ready: bool


@dataclass
class _State:
    ready: bool = False
    exiting: bool = False
    stop_outcome: WorkerEnd | None = None
    stderr: bytearray = field(default_factory=bytearray)
    broken: str | None = None


class WorkerProcess:
    """One worker epoch's process: its pipes, its messages, its end."""

    def __init__(  # noqa: PLR0913 - what a spawn is made of
        self,
        command: Sequence[str],
        envelope: bytes,
        *,
        cwd: str,
        env: Mapping[str, str],
        answer: Callable[[bytes], Awaitable[bytes]],
        startup_seconds: float = STARTUP_SECONDS,
        stop_grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        """Bind the command and the envelope; nothing is started yet."""
        self.command = list(command)
        self.envelope = envelope
        self.cwd = cwd
        self.env = dict(env)
        self.answer = answer
        self.startup_seconds = startup_seconds
        self.stop_grace_seconds = stop_grace_seconds
        self.process: asyncio.subprocess.Process | None = None
        self.state = _State()
        self.ready = asyncio.Event()
        self._stopping: asyncio.Task[None] | None = None
        self.stopped_before_start: WorkerEnd | None = None
        """The outcome of a stop that came before the spawn: the process is then never started."""

    @property
    def pid(self) -> int | None:
        """The process id once started."""
        return None if self.process is None else self.process.pid

    async def start(self) -> int:
        """Spawn in its own process group with the envelope in ``PI_WORKFLOWS_WORKER_LAUNCH``.

        Raises:
            OSError: the command could not be started (no such file, no cwd).
        """
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            cwd=self.cwd,
            env={**self.env, LAUNCH_ENV: launch_variable(self.envelope)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        if self.stopped_before_start is not None:  # stopped while it was being spawned
            self.stop(self.stopped_before_start)
        return self.process.pid

    async def run(self) -> Exit:
        """Serve the worker's messages until its process ends; how it ended."""
        process = self.process
        assert process is not None
        tasks = [
            asyncio.create_task(self._messages()),
            asyncio.create_task(self._stderr()),
            asyncio.create_task(self._startup()),
        ]
        code = await self.exited()
        tasks[2].cancel()
        # The pipes are read to their end, unless a child the worker left holds them open.
        await asyncio.wait(tasks[:2], timeout=_DRAIN_SECONDS)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._stopping is not None:
            await asyncio.gather(self._stopping, return_exceptions=True)
        return self._exit(code)

    async def exited(self) -> int:
        """The exit status once the process has ended, whoever still holds its pipes.

        ``Process.wait()`` of Python 3.11 returns only once every pipe is
        closed, so a child the worker left behind holding its stdout would
        keep a dead worker's epoch open; the status is set at the exit itself.
        """
        process = self.process
        assert process is not None
        while process.returncode is None:  # noqa: ASYNC110 - the child watcher sets it, no event
            await asyncio.sleep(_EXIT_POLL_SECONDS)
        return process.returncode

    def _exit(self, code: int) -> Exit:
        state = self.state
        signal_name = None
        exit_code: int | None = code
        if code < 0:
            signal_name, exit_code = signal.Signals(-code).name, None
        if state.stop_outcome is not None:
            outcome = state.stop_outcome
        elif code == 0 and state.exiting:
            outcome = "exited"
        else:
            outcome = "crashed"
        if not state.ready and outcome in ("timedOut", "exited"):
            outcome = "crashed"  # §7.6: a startup failure is recorded as crashed
        text = bytes(state.stderr[:DIAGNOSTIC_BYTES]).decode("utf-8", "replace").strip()
        if state.broken is not None:
            text = f"{state.broken}\n{text}".strip()
        if not state.ready and not text:
            text = (
                "Workflow worker startup timed out"
                if state.stop_outcome == "timedOut"
                else f"Workflow worker exited with code {code}"
            )
        return Exit(outcome, exit_code, signal_name, text or None, state.ready)

    async def _messages(self) -> None:
        process = self.process
        assert process is not None
        assert process.stdout is not None
        assert process.stdin is not None
        decoder = FrameDecoder()
        try:
            while data := await process.stdout.read(_READ_BYTES):
                for line in decoder.feed(data):
                    if _operation(line) == "worker.exiting":
                        self.state.exiting = True
                    reply = await self.answer(line)
                    process.stdin.write(reply + b"\n")
                    await process.stdin.drain()
                    if _operation(line) == "worker.ready" and _accepted(reply):
                        self.state.ready = True
                        self.ready.set()
        except PwfError as error:
            self.state.broken = str(error)
            self.stop("crashed")
        except (ConnectionError, BrokenPipeError):
            return

    async def _stderr(self) -> None:
        """Keep the first bytes as the diagnostic; forward lines to the log within a budget."""
        process = self.process
        assert process is not None
        assert process.stderr is not None
        loop = asyncio.get_running_loop()
        forwarding = Forwarding(loop.time())
        try:
            while data := await process.stderr.read(_READ_BYTES):
                room = DIAGNOSTIC_BYTES - len(self.state.stderr)
                if room > 0:
                    self.state.stderr += data[:room]
                for text in forwarding.feed(data, loop.time()):
                    log.info("worker %d: %s", self.pid, text)
                if pause := forwarding.pause():  # a worker writing without pause waits
                    await asyncio.sleep(pause)
        finally:
            for text in forwarding.flush(loop.time()):
                log.info("worker %d: %s", self.pid, text)

    async def _startup(self) -> None:
        try:
            await asyncio.wait_for(self.ready.wait(), self.startup_seconds)
        except TimeoutError:
            self.stop("timedOut")

    def stop(self, outcome: WorkerEnd) -> None:
        """Remember the outcome, SIGTERM the group, SIGKILL it after the grace (idempotent).

        Before the spawn the outcome is only remembered (§7.8: a worker that
        was never spawned resolves at once); one that has exited is left alone.
        """
        if self.process is None:
            if self.stopped_before_start is None:
                self.stopped_before_start = outcome
            return
        if self.process.returncode is not None:
            return
        if self.state.stop_outcome is None:
            self.state.stop_outcome = outcome
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self._terminate())

    async def _terminate(self) -> None:
        process = self.process
        assert process is not None
        signal_group(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.exited(), self.stop_grace_seconds)
        except TimeoutError:
            signal_group(process.pid, signal.SIGKILL)

    def kill_group(self) -> None:
        """SIGKILL what is left of the worker's process group (its own children)."""
        if self.process is not None:
            signal_group(self.process.pid, signal.SIGKILL)


def _accepted(reply: bytes) -> bool:
    try:
        value = json.loads(reply)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("outcome") in ("accepted", "adopted")


def _operation(line: bytes) -> str | None:
    """The ``operation`` of a worker line, read leniently (the host parses it properly)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value.get("operation") if isinstance(value, dict) else None
