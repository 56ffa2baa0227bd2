"""Epoch milliseconds and the proleptic Gregorian calendar, as JavaScript's ``Date`` has them.

Pure arithmetic, in the bottom tier of the pure core: it imports nothing.
:func:`iso_utc` is ``Date.prototype.toISOString``, the one way pwf writes an
instant the original would write (``host.status``'s times, the prune report's
``cutoff``, the command line's ``--time-format iso``): four-digit years for 0
to 9999 and a signed six-digit year outside them, as Node writes
``+010000-01-01T00:00:00.000Z``; the web view writes its times with it too.
:func:`duration` is the one way pwf writes a span of time, in the command
line and the web view alike, and :func:`written_times` the one way a
summary's times are written again in a reader's form (ADR 0079).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["MS_PER_DAY", "civil", "days_from_epoch", "duration", "iso_utc", "written_times"]

MS_PER_DAY: Final = 86_400_000


def iso_utc(ms: int) -> str:
    """``Date.prototype.toISOString``: ``2026-08-01T00:00:00.000Z`` (±YYYYYY outside 0-9999)."""
    days, rest = divmod(ms, MS_PER_DAY)
    year, month, day = civil(days)
    seconds, millis = divmod(rest, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):06d}"
    return f"{shown}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


def civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a count of days since 1970-01-01, for any year."""
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def days_from_epoch(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a date in the proleptic Gregorian calendar (any year)."""
    shifted = year - (month <= 2)
    era = shifted // 400
    year_of_era = shifted - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def duration(ms: int) -> str:
    """A span of milliseconds as ``2d 3h``, ``4m 10s`` or ``350ms``: the two largest units.

    The one way pwf writes a span, on the command line and in the web view.
    """
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count or parts:
            parts.append(f"{count}{unit}")
    return " ".join(part for part in parts[:2] if not part.startswith("0")) or "0s"


def written_times(text: str, times: Iterable[int], write: Callable[[int], str]) -> str:
    """``text`` with each whole number in it equal to one of ``times`` written by ``write``.

    A diagnosis or timeline summary carries the epoch milliseconds it wrote
    (ADR 0079); a number inside a longer word or a decimal is left alone.
    """
    chosen = {str(ms): ms for ms in times}
    if not chosen:
        return text
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, chosen)) + r")(?![\w.])")
    return pattern.sub(lambda match: write(chosen[match.group(1)]), text)
