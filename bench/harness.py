"""Shared timing helpers for the benchmarks: rounds, medians and number formatting.

Nothing here is measured itself.  Machines are shared and noisy, so every
benchmark repeats its measurement for several rounds and reports the median
rate with the minimum and maximum; :class:`Rates` holds those samples.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Rates", "calibrate", "fmt_rate", "gc_paused", "timed_rate"]


@dataclass(frozen=True)
class Rates:
    """Operations per second, one sample per round."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        """The median sample."""
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        """The slowest round."""
        return min(self.samples)

    @property
    def high(self) -> float:
        """The fastest round."""
        return max(self.samples)

    def add(self, sample: float) -> Rates:
        """A copy with one more round."""
        return Rates((*self.samples, sample))

    def summary(self, unit: str = "/s") -> str:
        """``median  [min-max]`` with thousands separators."""
        return f"{fmt_rate(self.median)}{unit}  [{fmt_rate(self.low)}-{fmt_rate(self.high)}]"


def fmt_rate(value: float) -> str:
    """A rate with a thin thousands separator: ``412 345``."""
    return f"{round(value):,}".replace(",", " ")


class gc_paused:  # noqa: N801 - reads as a statement, like contextlib's helpers
    """Switch the cyclic garbage collector off for a timed section (as timeit does)."""

    def __enter__(self) -> None:
        """Disable the collector, remembering whether it was on."""
        self._was_on = gc.isenabled()
        gc.disable()

    def __exit__(self, *_: object) -> None:
        """Re-enable the collector if it was on."""
        if self._was_on:
            gc.enable()


def timed_rate(loop: Callable[[int], object], count: int) -> float:
    """Run ``loop(count)`` once with the collector paused; return operations per second."""
    with gc_paused():
        start = time.perf_counter()
        loop(count)
        elapsed = time.perf_counter() - start
    return count / elapsed


def calibrate(loop: Callable[[int], object], seconds: float) -> int:
    """An iteration count for which ``loop`` takes about ``seconds``."""
    count = 256
    while True:
        with gc_paused():
            start = time.perf_counter()
            loop(count)
            elapsed = time.perf_counter() - start
        if elapsed >= 0.04 or count >= 1 << 26:
            return max(1, int(count * seconds / elapsed))
        count *= 4
