"""Runs whose workers keep crashing wait twice as long each time for their next claim (ADR 0126)."""

from __future__ import annotations

from pwf.server.supervision.backoff import FORGET_SECONDS, MOST_SECONDS, Backoff


def test_the_first_crash_is_claimed_again_at_once_and_each_after_waits_twice_as_long() -> None:
    backoff = Backoff()
    backoff.ended("run-1", "crashed", 100.0)
    assert backoff.waiting(100.0) == set()  # as the original: parked, claimed by the next claimOne
    waits = []
    for crash in range(2, 12):
        at = 100.0 + crash * 1_000
        backoff.ended("run-1", "timedOut" if crash % 2 else "crashed", at)
        later = at
        while "run-1" in backoff.waiting(later):
            later += 0.5
        waits.append(later - at)
    assert waits == [
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        32.0,
        MOST_SECONDS,
        MOST_SECONDS,
        MOST_SECONDS,
        MOST_SECONDS,
    ]


def test_a_worker_that_ends_otherwise_clears_its_run() -> None:
    backoff = Backoff()
    for at in (0.0, 1.0, 2.0):
        backoff.ended("run-1", "crashed", at)
    backoff.ended("run-2", "crashed", 2.0)
    backoff.ended("run-2", "crashed", 2.0)
    assert backoff.waiting(2.5) == {"run-1", "run-2"}
    backoff.ended("run-1", "exited", 3.0)
    assert backoff.waiting(2.9) == {"run-2"}  # run-1 is cleared; run-2 waits until 3.0
    backoff.ended("run-1", "crashed", 4.0)  # counted from no crash again: claimed at once
    assert "run-1" not in backoff.waiting(4.0)


def test_a_run_long_past_its_wait_is_forgotten() -> None:
    backoff = Backoff()
    backoff.ended("run-1", "crashed", 0.0)
    backoff.ended("run-1", "crashed", 0.0)
    assert backoff.waiting(0.5) == {"run-1"}
    assert backoff.waiting(1.0 + FORGET_SECONDS + 1) == set()
    backoff.ended("run-1", "crashed", 2_000.0)  # the count starts again
    assert backoff.waiting(2_000.0) == set()
