"""Runs whose workers keep crashing wait longer before their next claim (ADR 0126).

A pure room: it is told how each worker ended and when, and says which runs
are not to be claimed yet.  A worker that crashes parks its run, and the
next ``claimOne`` starts a new epoch (HOST §7.11), as the original does; a
claim follows every answer to a client, so a worker command that always
crashes was started again as fast as it could be spawned, and each epoch
wrote six events.  The first crash is claimed again at once, as before;
each one after it waits twice as long, from 1 s up to :data:`MOST_SECONDS`.
"""

from __future__ import annotations

from typing import Final

__all__ = ["FORGET_SECONDS", "MOST_SECONDS", "Backoff"]

MOST_SECONDS: Final = 60.0
"""The longest a run whose workers keep crashing waits for its next claim."""
FORGET_SECONDS: Final = 600.0
"""A run whose last crash is this far behind its wait starts again from no crash."""
_CRASHES: Final = frozenset({"crashed", "timedOut"})


class Backoff:
    """The runs whose last workers crashed: how many times in a row, and until when they wait."""

    def __init__(self) -> None:
        """No run has crashed yet."""
        self._runs: dict[str, tuple[int, float]] = {}

    def ended(self, run_id: str, outcome: str, now: float) -> None:
        """A worker of ``run_id`` ended with ``outcome`` at ``now`` (seconds, monotonic)."""
        if outcome not in _CRASHES:
            self._runs.pop(run_id, None)
            return
        crashes = self._runs.get(run_id, (0, now))[0] + 1
        wait = 0.0 if crashes == 1 else min(MOST_SECONDS, 2.0 ** (crashes - 2))
        self._runs[run_id] = (crashes, now + wait)

    def waiting(self, now: float) -> set[str]:
        """The runs not to be claimed at ``now``; those long past their wait are forgotten."""
        for run_id, (_, until) in list(self._runs.items()):
            if until + FORGET_SECONDS < now:
                del self._runs[run_id]
        return {run_id for run_id, (_, until) in self._runs.items() if until > now}
