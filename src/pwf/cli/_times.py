"""Times in and out of the command line: ISO 8601 or epoch milliseconds in, three forms out.

Every time option (``--at``, ``--now``, ``--until-time``) takes epoch
milliseconds or ISO 8601, read as ``pwf state prune --before`` reads it
(ADR 0019).  Every verb that prints times takes ``--time-format``:
``iso`` (UTC, milliseconds), ``relative`` (how long ago) or ``raw`` (epoch
milliseconds); ISO is the default on a terminal, raw otherwise, and
``--json`` always prints raw milliseconds (ADR 0035).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Final, Literal

import click

from pwf.isotime import duration, iso_utc, written_times

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "TIME",
    "TimeFormat",
    "duration",
    "resolve_format",
    "shown",
    "time_format_option",
    "timed",
    "wall_ms",
]

TimeFormat = Literal["iso", "relative", "raw"]
FORMATS: Final = ("iso", "relative", "raw")


def wall_ms() -> int:
    """The wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class _TimeParam(click.ParamType[int, object]):
    """Epoch milliseconds, or ISO 8601 (a zone-less date-time is local time, with a warning)."""

    name = "TIME"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        """The time in epoch milliseconds."""
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text.isascii() and text.isdigit():
            from pwf.protocol.client import MAX_SAFE_INTEGER  # noqa: PLC0415 - given times only

            number = int(text)
            if number > MAX_SAFE_INTEGER:
                self.fail(f"{text} is later than the latest time ({MAX_SAFE_INTEGER})", param, ctx)
            return number
        from pwf.commands.prune import parse_cutoff  # noqa: PLC0415 - ISO 8601 only when given

        cutoff = parse_cutoff(text)
        if cutoff is None:
            self.fail(
                f"{text!r} is neither epoch milliseconds nor an ISO 8601 time"
                " (e.g. 2026-08-01T16:30:00Z)",
                param,
                ctx,
            )
        if cutoff.zoned:
            return cutoff.ms
        from pwf.host.prune import resolve_cutoff  # noqa: PLC0415 - local zones only when asked

        name = param.opts[0] if param is not None and param.opts else "time"
        click.echo(f"warning: {name} {text} has no time zone; it is read in local time", err=True)
        try:
            return resolve_cutoff(cutoff)
        except Exception:  # noqa: BLE001 - any failure to localise is bad input
            self.fail(f"{text!r} is not a time this host can read", param, ctx)


TIME: Final = _TimeParam()
"""The click type of every time option."""

time_format_option = click.option(
    "--time-format",
    "time_format",
    type=click.Choice(FORMATS),
    default=None,
    help="How times print: iso, relative or raw epoch ms (default: iso on a terminal, else raw;"
    " --json is always raw).",
)


def resolve_format(chosen: str | None) -> TimeFormat:
    """The format to print with: the one chosen, else ISO on a terminal, else raw."""
    if chosen == "iso" or (chosen is None and sys.stdout.isatty()):
        return "iso"
    if chosen == "relative":
        return "relative"
    return "raw"


def timed(text: str, times: Iterable[int], form: TimeFormat, now: int | None = None) -> str:
    """``text`` with each of ``times`` (epoch ms written in it) printed in ``form`` (ADR 0079).

    A diagnosis or timeline summary carries the times it wrote; each whole
    number equal to one of them becomes that time as ``--time-format`` asks.
    """
    if form == "raw":
        return text
    return written_times(text, times, lambda ms: shown(ms, form, now))


def shown(ms: object, form: TimeFormat, now: int | None = None) -> str:
    """A time as the chosen format prints it; None is ``-``, non-integers are left as they are."""
    if ms is None:
        return "-"
    if not isinstance(ms, int) or isinstance(ms, bool) or form == "raw":
        return str(ms)
    if form == "iso":
        return iso_utc(ms)
    reference = wall_ms() if now is None else now
    span = reference - ms
    return f"{duration(span)} ago" if span >= 0 else f"in {duration(-span)}"
