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

from pwf.server._budget import Budget, Quota

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
_NOT_LOGGED: Final = (
    f"{{}} lines of stderr not logged (over {LOG_BYTES_PER_SECOND // 1024} KiB a second)"
)


class Forwarding:
    """One worker's stderr on its way to the host's log."""

    def __init__(self, now: float) -> None:
        """A worker whose stderr has not been read yet, at ``now`` (seconds, monotonic)."""
        self._log = Quota(LOG_BYTES_PER_SECOND, LOG_BURST, now)
        self._read = Budget(READ_BYTES_PER_SECOND, READ_BURST, now)
        self._pause = 0.0
        self._partial = bytearray()
        self._cut = 0
        """Bytes of the line under way past :data:`LINE_CHARS`, not kept."""

    def feed(self, data: bytes, now: float) -> list[str]:
        """The lines to log of what was read at ``now``: whole lines, cut, within the budget."""
        *complete, rest = data.split(b"\n")
        lines = [self._line(part) for part in complete]  # in order: the first ends the kept part
        self._keep(rest)
        self._pause = self._read.spend(len(data), now)
        return self._within(lines, now)

    def flush(self, now: float) -> list[str]:
        """The lines to log once the pipe ended: the last one without its newline, the count."""
        lines = [self._line(b"")] if self._partial or self._cut else []
        return self._within(lines, now, last=True)

    def pause(self) -> float:
        """Seconds to wait before the next read, so the pipe is read within its budget."""
        return self._pause

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

    def _within(self, lines: list[str], now: float, *, last: bool = False) -> list[str]:
        logged = [text for text in lines if self._log.admit(len(text) + 1, now)]
        if count := self._log.due(now, last=last):
            logged.append(_NOT_LOGGED.format(count))
        return logged
