"""Issue 31's targets, each beside its floor from the same run: the block ``make bench`` ends with.

Measures nothing itself.  A benchmark that measures a target's figure
appends a :class:`Target` to the list its ``run`` is given; ``bench/run.py``
prints :func:`summary` of them at the end of the report.  A target is met,
missed, or (``met`` is None) not measured by this run; none is a pass/fail
test.  Imports only :mod:`bench.harness`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.harness import fmt_rate

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Target", "size", "summary"]


@dataclass(frozen=True)
class Target:
    """One target of issue 31: what was measured, its floor, their ratio and the goal."""

    what: str
    measured: str
    floor: str
    ratio: float | None
    wanted: str | None
    """The goal, or None for a figure shown beside its floor without one."""
    met: bool | None
    """Whether the goal is met; None when there is no goal or this run did not measure it."""

    def line(self) -> str:
        """``what: measured; floor; ratio; wanted: verdict``."""
        ratio = "" if self.ratio is None else f"  ratio {self.ratio:.2f}"
        if self.wanted is None:
            verdict = "no target"
        else:
            judged = {True: "met", False: "NOT MET", None: "not measured"}[self.met]
            verdict = f"wanted {self.wanted}: {judged}"
        return f"  {self.what}: {self.measured}   {self.floor}{ratio}   {verdict}"


def summary(targets: Iterable[Target]) -> list[str]:
    """The block ``make bench`` ends with: one line per target, in the issue's order."""
    return [
        "issue 31 targets (medians; each ratio against its floor from the same run):",
        *(target.line() for target in targets),
    ]


def size(value: float) -> str:
    """Bytes with a thin thousands separator: ``4 702 B``."""
    return f"{fmt_rate(value)} B"
