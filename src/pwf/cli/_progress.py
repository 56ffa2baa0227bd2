"""Progress on a terminal for operations that can take seconds; silence everywhere else.

:func:`activity` gives a context manager whose value is a ``(done, total)``
callback.  When stderr is a terminal a daemon thread redraws one line on
stderr five times a second: the label, the fraction done when it is known
(``total > 0``), and the seconds elapsed; the line is cleared at the end.
When stderr is not a terminal nothing is drawn, so scripts and pipes see
exactly what they saw before.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["Activity", "activity"]

REDRAW_SECONDS: Final = 0.2


class Activity:
    """One line of progress redrawn on a terminal until :meth:`stop`."""

    def __init__(self, label: str, stream: TextIO) -> None:
        """Start drawing ``label`` on ``stream`` at once."""
        self.label = label
        self.stream = stream
        self.done = 0
        self.total = 0
        self.started = time.monotonic()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._draw_until_stopped, daemon=True)
        self._thread.start()

    def __call__(self, done: int, total: int) -> None:
        """Record how far the operation got (``total`` 0 when unknown)."""
        self.done, self.total = done, total

    def line(self) -> str:
        """The text drawn now."""
        seconds = time.monotonic() - self.started
        if self.total > 0:
            percent = min(100, self.done * 100 // self.total)
            return f"{self.label}: {percent}% ({self.done}/{self.total}), {seconds:.0f}s"
        return f"{self.label}… {seconds:.0f}s"

    def _draw_until_stopped(self) -> None:
        while not self._stopped.wait(REDRAW_SECONDS):
            self._write(f"\r{self.line()}\x1b[K")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self._stopped.set()

    def stop(self) -> None:
        """Stop drawing and clear the line."""
        self._stopped.set()
        self._thread.join()
        self._write("\r\x1b[K")


def _ignore(_done: int, _total: int) -> None:
    """The progress callback off a terminal."""


@contextmanager
def activity(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress callback, drawn on stderr while the block runs if stderr is a terminal."""
    stream = sys.stderr
    if not stream.isatty():
        yield _ignore
        return
    shown = Activity(label, stream)
    try:
        yield shown
    finally:
        shown.stop()
