"""Processes forked from one parent that imported pwf already, for the tests that kill them.

The reliability tests start a few hundred processes only to kill them or to
race them: writers, prunes, rebuilds, replays, backups.  A fresh interpreter
spends some 0.1 s of CPU importing pwf before it does anything the test is
about (ADR 0068).  Here one parent process per test process imports pwf's
command line, the writer (``_writer.py``) and ``_killed_at.py`` once, and forks
a child for each command: a separate process with its own pid, file
descriptors, environment and working directory, which runs the same
``main`` as the ``pwf`` console script and ends with the same exit status; a
SIGKILL ends it as it would end a fresh process.  Nothing the parent imported
has run a command, so each child starts with no command's state.

Run as a script, this file is that parent: it reads one request per line on
the socket it was given and answers on it.  Imported, :func:`spawn` starts a
child through it and returns a :class:`Forked`, which the tests use as they
used :class:`subprocess.Popen`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, NoReturn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tests._cputime import EXTRA
elif __name__ != "__main__":  # the parent itself counts nothing
    from _cputime import EXTRA

__all__ = ["TARGETS", "Forked", "cpu", "spawn"]

TARGETS: Final = ("pwf", "gated", "writer")
"""What a child runs: ``pwf ARGS``; ``pwf ARGS`` after a ``ready`` line (the races' gate);
``_writer.py ARGS``.  Not ``_killed_at.py``: it must wrap its target before pwf imports
it, which a child of a parent that imported pwf cannot do."""
_FD: Final = "PWF_FORK_PARENT_FD"


# ---------------------------------------------------------------------------- the parent


def _child(target: str, argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> NoReturn:
    """In the forked child: take the given stdin, stdout and stderr, run ``target``, exit.

    It ends as a fresh interpreter would: through ``SystemExit`` or an
    uncaught exception (its traceback on stderr, exit code 1) and the
    interpreter's own shutdown, which joins threads, runs ``atexit`` and
    flushes stdout (a failed flush prints ``Exception ignored`` and exits 120).
    """
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
        os.close(fd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    if target == "writer":  # imported by the parent already
        writer: Any = importlib.import_module("_writer")
        sys.exit(writer.main(["_writer.py", *argv]))
    from pwf.cli import main  # noqa: PLC0415 - imported by the parent already

    if target == "gated":
        sys.stdout.write("ready\n")
        sys.stdout.flush()
    sys.argv = ["pwf", *argv]
    main()
    sys.exit(0)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _preload() -> None:
    """Import what the children run: the command line with every verb, and the writer."""
    importlib.import_module("_writer")
    from pwf.cli import VERBS  # noqa: PLC0415

    for verb in VERBS.values():  # the verbs' modules, which the command line imports lazily
        __import__(verb.module)


class _Server:
    """The parent: forks a child per request, signals it on request, reports how it ended."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.children: set[int] = set()
        self.spent = _own_cpu()
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a child's end wakes the select
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ)
        self.selector.register(self.wake_read, selectors.EVENT_READ)

    def serve(self) -> None:
        """Until the socket closes: requests one per line, and each reaped child reported."""
        buffered = b""
        while True:
            for key, _ in self.selector.select():
                if key.fileobj == self.wake_read:
                    os.read(self.wake_read, 4096)
                    continue
                data, fds, _flags, _address = socket.recv_fds(self.control, 65536, 3)
                if not data:
                    return
                buffered += data
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    self._handle(json.loads(line), fds)
            self._reap()

    def _handle(self, request: dict[str, Any], fds: list[int]) -> None:
        if "kill" in request:
            if request["kill"] in self.children:  # not reaped yet: the pid is still its own
                os.kill(request["kill"], request["signal"])
            return
        pid = os.fork()
        if pid == 0:
            self.selector.close()
            self.control.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(self.wake_read)
            os.close(self.wake_write)
            _child(request["target"], request["argv"], request["env"], request["cwd"], fds)
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        self._tell({"pid": pid})

    def _reap(self) -> None:
        while self.children:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                return
            self.children.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            self._tell({"exit": pid, "code": code, "cpu": usage.ru_utime + usage.ru_stime})

    def _tell(self, message: dict[str, object]) -> None:
        """Send ``message`` with the CPU this parent spent since the last one (``own``)."""
        now = _own_cpu()
        message["own"], self.spent = now - self.spent, now
        self.control.sendall(json.dumps(message).encode() + b"\n")


# ---------------------------------------------------------------------------- the tests' side


class _Parent:
    """The running parent process and what it reported that nobody asked for yet."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.control = ours
        environment = {**os.environ, _FD: str(theirs.fileno())}
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__))],
            stdin=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            env=environment,
        )
        theirs.close()
        self.buffered = b""
        self.ended: dict[int, int] = {}
        self.cpu = 0.0
        """CPU seconds of the parent and of the children it reaped, as far as reported."""

    def send(self, request: Mapping[str, object], fds: list[int] | None = None) -> None:
        socket.send_fds(self.control, [json.dumps(request).encode() + b"\n"], fds or [])

    def read(self, timeout: float | None) -> dict[str, int] | None:
        """The next message, None when none came within ``timeout`` seconds (0: do not wait)."""
        while b"\n" not in self.buffered:
            self.control.settimeout(timeout)
            try:
                data = self.control.recv(65536)
            except (TimeoutError, BlockingIOError):
                return None
            finally:
                self.control.settimeout(None)
            assert data, "the fork parent died"
            self.buffered += data
        line, self.buffered = self.buffered.split(b"\n", 1)
        message = json.loads(line)
        self.cpu += message.pop("own") + message.pop("cpu", 0.0)
        return {key: int(value) for key, value in message.items()}

    def close(self) -> None:
        """End the parent (it stops once its socket closes) and reap it."""
        self.control.close()
        self.process.wait(60)

    def next_pid(self) -> int:
        while True:
            message = self.read(300)
            assert message is not None, "the fork parent did not fork"
            if "pid" in message:
                return message["pid"]
            self.ended[message["exit"]] = message["code"]

    def ended_by(self, pid: int, timeout: float | None) -> int | None:
        """``pid``'s exit code once reported, waiting up to ``timeout`` seconds (None: forever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid not in self.ended:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            message = self.read(left)
            if message is None:
                return None
            if "exit" in message:
                self.ended[message["exit"]] = message["code"]
        return self.ended.pop(pid)


_PARENT: list[_Parent] = []
_SPENT: list[float] = [0.0]
"""CPU seconds of fork parents that ended, for :func:`cpu`."""


def _parent_process() -> _Parent:
    if not _PARENT or _PARENT[0].process.poll() is not None:
        if _PARENT:
            _SPENT[0] += _PARENT[0].cpu
        _PARENT[:] = [_Parent()]
        atexit.register(_PARENT[0].close)
    return _PARENT[0]


def cpu() -> float:
    """CPU seconds the fork parents of this process and their children reported spending.

    Their children are not this process's, so ``RUSAGE_CHILDREN`` counts them
    only once a parent ends; ``PWF_TEST_CPU`` adds this instead, test by test.
    """
    return _SPENT[0] + sum(parent.cpu for parent in _PARENT)


if __name__ != "__main__":
    EXTRA.append(cpu)


def _pipe(wanted: int | None) -> tuple[int, int | None]:
    """(the child's stdin, the test's end or None) for ``subprocess.PIPE``, DEVNULL or None."""
    if wanted == subprocess.PIPE:
        read, write = os.pipe()
        return read, write
    return os.open(os.devnull, os.O_RDONLY), None


class Forked:
    """A child of the fork parent, used as :class:`subprocess.Popen` is (the methods tests call)."""

    def __init__(  # noqa: PLR0913 - one keyword per stream, as subprocess.Popen takes them
        self,
        target: str,
        argv: list[str],
        *,
        env: dict[str, str],
        stdin: int | None,
        stdout: int | IO[bytes] | None,
        stderr: int | IO[bytes] | None,
    ) -> None:
        """Fork the child; ``stdout``/``stderr`` may be PIPE, DEVNULL, None or an open file."""
        assert target in TARGETS, target
        self.parent = _parent_process()
        self.returncode: int | None = None
        given: list[int] = []
        child_in, test_in = _pipe(stdin)  # the child reads the first end, the test writes the other
        given.append(child_in)
        self.stdin: IO[bytes] | None = os.fdopen(test_in, "wb", 0) if test_in is not None else None
        outs: list[IO[bytes] | None] = []
        for wanted in (stdout, stderr):
            if wanted is not None and not isinstance(wanted, int):
                given.append(os.dup(wanted.fileno()))
                outs.append(None)
            elif wanted == subprocess.PIPE:
                read, write = os.pipe()
                given.append(write)
                outs.append(os.fdopen(read, "rb", 0))
            else:
                given.append(os.open(os.devnull, os.O_WRONLY))
                outs.append(None)
        self.stdout, self.stderr = outs
        request = {"target": target, "argv": argv, "env": env, "cwd": str(Path.cwd())}
        try:
            self.parent.send(request, given)
            self.pid = self.parent.next_pid()
        finally:
            for fd in given:
                os.close(fd)

    def poll(self) -> int | None:
        """The exit code if the child ended, else None."""
        if self.returncode is None:
            self.returncode = self.parent.ended_by(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end; its exit code (``-N`` for signal N)."""
        if self.returncode is None:
            self.returncode = self.parent.ended_by(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"forked {self.pid}", timeout or 0)
        return self.returncode

    def send_signal(self, number: int) -> None:
        """Signal the child, unless it has ended (its pid may belong to another process then)."""
        if self.poll() is None:
            self.parent.send({"kill": self.pid, "signal": number})

    def kill(self) -> None:
        """SIGKILL the child."""
        self.send_signal(signal.SIGKILL)

    def communicate(
        self,
        input: bytes | None = None,  # noqa: A002 - the name subprocess.Popen gives it
        timeout: float | None = None,
    ) -> tuple[bytes, bytes]:
        """Write ``input`` and close stdin, read stdout and stderr to their ends, wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                if input:
                    self.stdin.write(input)
            self.stdin.close()
            self.stdin = None
        streams = [stream for stream in (self.stdout, self.stderr) if stream is not None]
        read = {stream.fileno(): b"" for stream in streams}
        with selectors.DefaultSelector() as selector:
            for fd in read:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"forked {self.pid}", timeout or 0)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        read[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
        found = [
            read[stream.fileno()] if stream is not None else b""
            for stream in (self.stdout, self.stderr)
        ]
        for stream in streams:
            stream.close()
        self.stdout = self.stderr = None  # read to the end; a second call reads nothing
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        self.wait(left)
        return found[0], found[1]


def spawn(
    target: str,
    *argv: str,
    env: dict[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
    stdout: int | IO[bytes] | None = subprocess.PIPE,
    stderr: int | IO[bytes] | None = subprocess.PIPE,
) -> Forked:
    """Fork a child that runs ``target`` (one of :data:`TARGETS`) with ``argv``."""
    return Forked(
        target,
        list(argv),
        env=dict(os.environ) if env is None else env,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
    )


if __name__ == "__main__":
    _preload()
    _Server(socket.socket(fileno=int(os.environ.pop(_FD)))).serve()
