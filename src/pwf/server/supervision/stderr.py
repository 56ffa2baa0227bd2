"""What a worker writes on stderr, forwarded to the host's log within a budget (HOST §7, ADR 0122).

A pure room: it is given the bytes read and the time, and says which lines
to log and how long to wait before the next read; the process room reads
the pipe and logs.  The host forwards a worker's stderr to its own log as
the original does, but a worker that writes without pause must not fill
the host's disk or take its processor: every line is cut at
:data:`LINE_CHARS`, a worker's lines are logged at most
:data:`LOG_BYTES_PER_SECOND` on average (bursts up to :data:`LOG_BURST`),
the others counted and said in one line, and the pipe is read at most
:data:`READ_BYTES_PER_SECOND` on average, past which the worker's own
writes wait.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "LINE_CHARS",
    "LOG_BURST",
    "LOG_BYTES_PER_SECOND",
    "READ_BURST",
    "READ_BYTES_PER_SECOND",
    "Forwarding",
]

LINE_CHARS: Final = 2_000
"""A forwarded line is cut at this many characters; what follows is counted."""
LOG_BYTES_PER_SECOND: Final = 8_192
"""A worker's stderr is logged at most this much a second on average."""
LOG_BURST: Final = 65_536
"""... with bursts up to this much: a traceback, or a diagnostic at its end."""
READ_BYTES_PER_SECOND: Final = 1 << 20
"""A worker's stderr is read at most this much a second on average; its writes then wait."""
READ_BURST: Final = 4 << 20
_SAID_EVERY: Final = 10.0
"""Seconds between two lines that count what was not logged (the first is said at once)."""


class _Bucket:
    """A token bucket: ``rate`` bytes a second, at most ``burst`` saved up."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.at = now

    def fill(self, now: float) -> float:
        """The tokens at ``now``."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return self.tokens


class Forwarding:
    """One worker's stderr on its way to the host's log."""

    def __init__(self, now: float) -> None:
        """A worker whose stderr has not been read yet, at ``now`` (seconds, monotonic)."""
        self._log = _Bucket(LOG_BYTES_PER_SECOND, LOG_BURST, now)
        self._read = _Bucket(READ_BYTES_PER_SECOND, READ_BURST, now)
        self._partial = bytearray()
        self._cut = 0
        """Bytes of the line under way past :data:`LINE_CHARS`, not kept."""
        self.dropped = 0
        """Lines not logged since the last line that said so."""
        self._said = now - _SAID_EVERY  # the first lines not logged are said at once

    def feed(self, data: bytes, now: float) -> list[str]:
        """The lines to log of what was read at ``now``: whole lines, cut, within the budget."""
        *complete, rest = data.split(b"\n")
        lines = [self._line(part) for part in complete]  # in order: the first ends the kept part
        self._keep(rest)
        self._read.fill(now)
        self._read.tokens -= len(data)
        return self._within(lines, now)

    def flush(self, now: float) -> list[str]:
        """The lines to log once the pipe ended: the last one without its newline, the count."""
        lines = [self._line(b"")] if self._partial or self._cut else []
        logged = self._within(lines, now)
        if self.dropped:
            logged.append(self._summary())
        return logged

    def pause(self) -> float:
        """Seconds to wait before the next read, so the pipe is read within its budget."""
        deficit = -self._read.tokens
        return deficit / self._read.rate if deficit > 0 else 0.0

    def _keep(self, part: bytes) -> None:
        room = LINE_CHARS - len(self._partial)
        self._partial += part[: max(room, 0)]
        self._cut += max(len(part) - max(room, 0), 0)

    def _line(self, part: bytes) -> str:
        self._keep(part)
        text = bytes(self._partial).decode("utf-8", "replace")
        if self._cut:
            text += f" [{self._cut} more bytes]"
        self._partial.clear()
        self._cut = 0
        return text

    def _within(self, lines: list[str], now: float) -> list[str]:
        logged: list[str] = []
        self._log.fill(now)
        for text in lines:
            size = len(text) + 1
            if self._log.tokens >= size:
                self._log.tokens -= size
                logged.append(text)
            else:
                self.dropped += 1
        if self.dropped and now - self._said >= _SAID_EVERY:
            logged.append(self._summary())
            self._said = now
        return logged

    def _summary(self) -> str:
        text = (
            f"{self.dropped} lines of stderr not logged"
            f" (over {LOG_BYTES_PER_SECOND // 1024} KiB a second)"
        )
        self.dropped = 0
        return text
