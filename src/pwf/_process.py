"""One function run in a second process (forked on Linux, else spawned); imports errors, _closing.

The chain walk and the fold split their work with a second process: the
caller does its own share meanwhile, then takes the other's result.  It is
forked where the platform allows it, so it starts in milliseconds with
everything already imported; it must open its own database connections and
never touch the caller's.  Elsewhere it is spawned, and its function and
arguments must be importable and picklable.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from typing import TYPE_CHECKING, Generic, TypeVar

from pwf._closing import Closing
from pwf.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["Forked", "ForkedError", "processors"]

T = TypeVar("T")


class ForkedError(StoreError):
    """A forked process raised or died; its work is lost."""


def processors() -> int:
    """How many processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


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
            target=_run, args=(sender, target, args), daemon=True
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


def _run(sender: Connection, target: Callable[..., object], args: tuple[object, ...]) -> None:
    """The forked process: run the function, send back its value or its error's text."""
    _own_signals()
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
