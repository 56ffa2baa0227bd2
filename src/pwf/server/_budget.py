"""Budgets of so much a second with bursts: what one client or worker may cost the host's log.

A pure room: it is given the time and says what fits.  :class:`Budget` is a
token bucket; :class:`Quota` admits log lines within one, counts the others
and says when the count is due (ADR 0122).
"""

from __future__ import annotations

from typing import Final

__all__ = ["SAID_EVERY", "Budget", "Quota"]

SAID_EVERY: Final = 10.0
"""Seconds between two lines that count what was not logged (the first is said at once)."""


class Budget:
    """``rate`` units a second on average, at most ``burst`` saved up."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        """Full at ``now`` (seconds, monotonic)."""
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self._at = now

    def fill(self, now: float) -> float:
        """What is left at ``now``: negative while what was spent beyond it is owed."""
        self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        self._at = now
        return self.tokens

    def take(self, amount: float, now: float) -> bool:
        """Spend ``amount`` if it fits now; False, with nothing spent, if not."""
        if self.fill(now) < amount:
            return False
        self.tokens -= amount
        return True

    def spend(self, amount: float, now: float) -> float:
        """Spend ``amount`` whatever is left; the seconds until the budget is out of debt."""
        self.tokens = self.fill(now) - amount
        return max(0.0, -self.tokens / self.rate)


class Quota:
    """Log lines within a :class:`Budget`; the others counted, their count said now and then."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        """Up to ``burst`` lines' worth at once, ``rate`` a second after that."""
        self._budget = Budget(rate, burst, now)
        self.dropped = 0
        """Lines not logged since the last line that said so."""
        self._said = now - SAID_EVERY

    def admit(self, size: float, now: float) -> bool:
        """True when a line of ``size`` may be logged now; else it is counted."""
        if self._budget.take(size, now):
            return True
        self.dropped += 1
        return False

    def due(self, now: float, *, last: bool = False) -> int:
        """How many lines were not logged, when it is time to say so (``last``: always); else 0."""
        if not self.dropped or (not last and now - self._said < SAID_EVERY):
            return 0
        count, self.dropped, self._said = self.dropped, 0, now
        return count
