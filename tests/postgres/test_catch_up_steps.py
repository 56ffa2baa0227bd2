"""A host far behind the shared log catches up in steps, each committed at the end of a batch.

A new host on a log of a million events folded them all in one transaction
of its file: 153 s with the file locked, and a host stopped half way (a
supervisor's start timeout) kept nothing and began again from zero.  Each
step now commits at the first batch boundary after ``CATCH_UP_STEP``
events, so an interrupted catch-up keeps what it checked and folded, and a
reader of the file never sees part of a batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pwf.diff import digest_database
from pwf.errors import ChainError, StoreError
from pwf.store import mirror, rows
from pwf.store.opening import open_mirror, open_shared_log

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pwf.store.mirror import MirroredStore

SIZES = (1, 3, 2, 1, 3)
"""Batches of the shared log: seqs 1 | 2 3 4 | 5 6 | 7 | 8 9 10."""


@pytest.fixture
def written(pg_url: str, tmp_path: Path, fill: Callable[..., Any]) -> Path:
    """The first host's file, after it wrote the ten events of :data:`SIZES`."""
    with open_mirror(tmp_path / "a.db", open_shared_log(pg_url, create=True)) as first:
        fill(first, SIZES)
    return tmp_path / "a.db"


def _new_host(pg_url: str, tmp_path: Path) -> MirroredStore:
    return open_mirror(tmp_path / "b.db", open_shared_log(pg_url))


def _stop_at(monkeypatch: pytest.MonkeyPatch, seq: int) -> None:
    """Make the check of the event at ``seq`` fail, as a damaged row or a lost host would."""
    check = rows.check_event

    def failing(expected: int, row: Any, **options: Any) -> Any:
        if expected == seq:
            raise ChainError(seq, "stopped here by the test")
        return check(expected, row, **options)

    monkeypatch.setattr(mirror, "check_event", failing)


STOPS = {"inside the second step": (6, 4), "inside the last": (9, 6), "inside the first": (3, 0)}
"""Where a catch-up in steps of two events (ending at seqs 4, 6 and 10) fails: the seq it
stops at, and the head the file keeps."""


CASES = {
    f"{stop}, {read}": (*STOPS[stop], gap)
    for stop in sorted(STOPS)
    for read, gap in (("read at once", 1_000), ("streamed", 2))
}
"""Each stop with the gap read in one query, and streamed."""


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_interrupted_catch_up_keeps_its_whole_steps(
    pg_url: str, tmp_path: Path, written: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """A failure keeps the steps committed before it; the next catch-up resumes from them."""
    stopped, kept, small_gap = CASES[case]
    monkeypatch.setattr(mirror, "CATCH_UP_STEP", 2)
    monkeypatch.setattr(mirror, "_SMALL_GAP", small_gap)
    _stop_at(monkeypatch, stopped)
    with _new_host(pg_url, tmp_path) as host, pytest.raises(StoreError, match="stopped here"):
        host.catch_up()
    with open_mirror(tmp_path / "b.db", open_shared_log(pg_url)) as reopened:
        assert kept == reopened.local.head().seq
    monkeypatch.undo()
    with _new_host(pg_url, tmp_path) as host:
        assert 10 - kept == host.catch_up()
        assert 10 == host.head().seq
        assert host.verify().ok
    assert digest_database(str(written)).all == digest_database(str(tmp_path / "b.db")).all


def test_each_step_commits_at_the_end_of_a_batch(
    pg_url: str, tmp_path: Path, written: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file's head after each commit is the last event of a batch, never one inside it."""
    del written
    monkeypatch.setattr(mirror, "CATCH_UP_STEP", 2)
    monkeypatch.setattr(mirror, "_SMALL_GAP", 2)
    heads: list[int] = []
    with _new_host(pg_url, tmp_path) as host:
        apply = mirror.Mirror._apply

        def observed(self: Any, local: Any, *args: Any, **options: Any) -> int:
            count: int = apply(self, local, *args, **options)
            heads.append(local.head.seq)
            return count

        monkeypatch.setattr(mirror.Mirror, "_apply", observed)
        assert 10 == host.catch_up()
    assert [4, 6, 10] == heads


def test_a_catch_up_within_one_step_commits_once(
    pg_url: str, tmp_path: Path, written: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten events and the default step: one transaction, as before."""
    del written
    steps: list[int] = []
    apply = mirror.Mirror._apply

    def counted(self: Any, *args: Any, **options: Any) -> int:
        count: int = apply(self, *args, **options)
        steps.append(count)
        return count

    monkeypatch.setattr(mirror.Mirror, "_apply", counted)
    with _new_host(pg_url, tmp_path) as host:
        assert 10 == host.catch_up()
        assert 0 == host.catch_up()
    assert [10, 0] == steps


def test_a_catch_up_returns_while_another_host_keeps_appending(
    pg_url: str,
    tmp_path: Path,
    written: Path,
    fill: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It stops at the head the log had when it began, not at a head that keeps moving.

    Another host appends a batch before each step, as fast as the steps go:
    a catch-up that chased the moving head would never return.
    """
    monkeypatch.setattr(mirror, "CATCH_UP_STEP", 2)
    apply = mirror.Mirror._apply
    steps: list[int] = []
    with open_mirror(written, open_shared_log(pg_url)) as other:

        def raced(self: Any, local: Any, *args: Any, **options: Any) -> int:
            if local.store.path != tmp_path / "b.db":  # the writer's own catch-up, under its lock
                return int(apply(self, local, *args, **options))
            if len(steps) > 20:
                raise AssertionError("the catch-up chased the head")
            fill(other, [2], start=100 + 2 * len(steps))
            count: int = apply(self, local, *args, **options)
            steps.append(count)
            return count

        monkeypatch.setattr(mirror.Mirror, "_apply", raced)
        with _new_host(pg_url, tmp_path) as host:
            folded = host.catch_up()
            assert (sum(steps), True) == (folded, host.head().seq >= 10)  # its head at the start
    assert len(steps) <= 5
