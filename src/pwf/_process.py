"""One function run in a second process (forked on Linux, else spawned); imports errors, _closing.

The chain walk and the fold split their work with a second process: the
caller does its own share meanwhile, then takes the other's result.  It is
forked where the platform allows it, so it starts in milliseconds with
everything already imported; it must open its own database connections and
never touch the caller's.  Elsewhere it is spawned, and its function and
arguments must be importable and picklable.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from pwf._closing import Closing
from pwf.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["Forked", "ForkedError", "connections_allowed", "processors"]

T = TypeVar("T")


class ForkedError(StoreError):
    """A forked process raised or died; its work is lost."""


def processors() -> int:
    """How many processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def connections_allowed(most: int, reserved: int, fewest: int = 16) -> int:
    """How many connections a server may hold open: its descriptor limit less ``reserved``.

    The soft limit of open files is raised to ``most + reserved`` first, or
    to the hard limit when that is lower, as long-running servers do: the
    soft limit of 1 024 many systems start a process with would otherwise
    bound a server before its clients need it.  The answer is at most
    ``most`` and never below ``fewest``.
    """
    try:
        import resource  # noqa: PLC0415 - not on every platform
    except ImportError:  # pragma: no cover - a platform without it bounds nothing here
        return most
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = most + reserved
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    if soft == resource.RLIM_INFINITY:
        return most
    return max(fewest, min(most, soft - reserved))


def can_fork() -> bool:
    """True when this process may start forked processes (a daemonic process may not)."""
    return not multiprocessing.current_process().daemon


class Forked(Closing, Generic[T]):
    """``target(*args)`` running in a process of its own, started at once."""

    def __init__(self, target: Callable[..., T], *args: object) -> None:
        """Start the process; :meth:`result` waits for what it returns."""
        context = (
            multiprocessing.get_context("fork")
            if sys.platform == "linux"
            else multiprocessing.get_context("spawn")
        )
        self._receiver, sender = context.Pipe(duplex=False)
        self._process: BaseProcess = context.Process(
            target=_run, args=(sender, os.getpid(), target, args), daemon=True
        )
        self._process.start()
        sender.close()

    def result(self) -> T:
        """Wait for the function's return value.

        Raises:
            ForkedError: the function raised (its type and text are kept) or the process died.
        """
        try:
            ok, found = self._receiver.recv()
        except EOFError:
            self._process.join()
            code = self._process.exitcode
            raise ForkedError(f"a forked process died (exit code {code})") from None
        if not ok:
            raise ForkedError(f"a forked process failed: {found}")
        value: T = found
        return value

    def close(self) -> None:
        """Stop the process if it still runs, and reap it."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._receiver.close()


def _run(
    sender: Connection, caller: int, target: Callable[..., object], args: tuple[object, ...]
) -> None:
    """The forked process: run the function, send back its value or its error's text."""
    _own_signals()
    _end_with(caller)
    try:
        sender.send((True, target(*args)))
    except BaseException as error:  # noqa: BLE001 - every failure goes back to the caller
        sender.send((False, f"{type(error).__name__}: {error}"))
    finally:
        sender.close()


def _own_signals() -> None:
    """Take the caller's signal handling off a forked process: its signals are its own.

    A caller running an event loop with signal handlers (``pwf serve``) has
    Python write each signal's number to the loop's wakeup socket, and a
    forked process inherits that socket.  A ``SIGTERM`` that :meth:`Forked.close`
    sends to a process still running would then reach the caller's loop as
    the host's own, and stop the host.  So the forked process writes to no
    wakeup socket, and ``SIGTERM`` and ``SIGINT`` end it as they end any process.
    """
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, signal.SIG_DFL)


_PR_SET_PDEATHSIG: Final = 1
"""``prctl``'s option that names the signal a process gets when its parent ends (Linux)."""


def _end_with(caller: int) -> None:
    """End this forked process when its caller ends, however it ends (Linux only).

    A caller ended by ``SIGKILL`` runs no clean-up, so its forked process
    would go on folding or walking a share nobody will take: at a million
    events, most of a minute of a processor, beside the host or verb started
    next.  The kernel sends ``SIGKILL`` here when the thread that forked this
    process ends; that thread waits for the result or closes this process
    first, so it ends only with the caller.  A caller that ended before the
    signal was asked for is caught by the parent check.  Elsewhere the
    process is spawned and runs to its end, as before.
    """
    if sys.platform != "linux":
        return
    import ctypes  # noqa: PLC0415 - needed only here, after the fork

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl in this C library: run to the end
        return
    if os.getppid() != caller:
        os._exit(1)
