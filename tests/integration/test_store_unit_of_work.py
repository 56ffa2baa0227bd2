"""A store's unit of work: a group in one transaction, run again only where it may be (ADR 0087).

The served writer hands a store a group of works and gets one outcome each;
the SQLite file decides how it runs them.  Work marked ``Repeatable`` leads
a group without savepoints and, when one fails after writing, the group
runs again with them; ``OnceOnly`` work is never run twice, and a path that
repeats refuses it.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Final

import pytest

from pwf.events import Actor, CommandRefused
from pwf.store.sqlite import SqliteStore
from pwf.store.unit import NOT_REPEATABLE, OnceOnly, Outcome, Repeatable, repeatable

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pwf.store import StoreTransaction
    from pwf.store.unit import Work

ACTOR: Final = Actor(type="host", id="h")
AT: Final = 1_764_403_200_000


class _RefusedError(Exception):
    """A decision's refusal, after it wrote (or not)."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    """A fresh SQLite log of record."""
    with SqliteStore(tmp_path / "state.db", create=True) as made:
        yield made


def _event(name: str) -> CommandRefused:
    return CommandRefused(
        request_id=name,
        client_id="c",
        operation="run.status",
        idempotency_key=name,
        fingerprint="0" * 64,
        outcome="rejected",
        error=name,
    )


class _Runs:
    """Works that append one event each and count their runs."""

    def __init__(self) -> None:
        self.runs: collections.Counter[str] = collections.Counter()

    def decide(self, name: str, *, fail: bool = False, writes: bool = True) -> Any:
        def decide(tx: StoreTransaction) -> str:
            self.runs[name] += 1
            if writes:
                tx.stage([_event(name)], at=AT, actor=ACTOR)
            if fail:
                raise _RefusedError(name)
            return name

        return decide


def _batches(store: SqliteStore) -> list[tuple[int, str]]:
    """(batch, request id) of every stored event, in seq order."""
    return [(entry.batch, entry.event.request_id) for entry in store.entries()]  # type: ignore[attr-defined]


def _group(store: SqliteStore, works: list[Work[object]]) -> tuple[list[Outcome], list[str]]:
    told: list[str] = []
    return store.run_group(iter(works), told.append), told


def test_a_group_of_repeatable_work_commits_once_each_in_its_batch(store: SqliteStore) -> None:
    """Every work its own batch, one transaction, nothing run twice when nothing failed."""
    made = _Runs()
    outcomes, told = _group(store, [Repeatable(made.decide(name)) for name in "abc"])
    assert [("a", None), ("b", None), ("c", None)] == outcomes
    assert [] == told
    assert [(1, "a"), (2, "b"), (3, "c")] == _batches(store)
    assert {"a": 1, "b": 1, "c": 1} == made.runs


def test_a_failure_after_writing_runs_the_repeatable_group_again(store: SqliteStore) -> None:
    """Bare, ``b`` cannot be undone alone: the group runs again, each work in a savepoint."""
    made = _Runs()
    works: list[Work[object]] = [
        Repeatable(made.decide("a")),
        Repeatable(made.decide("b", fail=True)),
        Repeatable(made.decide("c")),
    ]
    outcomes, told = _group(store, works)
    assert ["a", None, "c"] == [outcome.value for outcome in outcomes]
    assert isinstance(outcomes[1].error, _RefusedError)
    assert ["redone"] == told
    assert [(1, "a"), (2, "c")] == _batches(store)
    assert {"a": 2, "b": 2, "c": 1} == made.runs


def test_a_failure_without_writing_needs_no_second_run(store: SqliteStore) -> None:
    """A bare work that wrote nothing is undone by forgetting it: no savepoint, no redo."""
    made = _Runs()
    works: list[Work[object]] = [
        Repeatable(made.decide("a")),
        Repeatable(made.decide("b", fail=True, writes=False)),
        Repeatable(made.decide("c")),
    ]
    outcomes, told = _group(store, works)
    assert [] == told
    assert [(1, "a"), (2, "c")] == _batches(store)
    assert isinstance(outcomes[1].error, _RefusedError)


def test_once_only_work_is_never_run_twice(store: SqliteStore) -> None:
    """From the first ``OnceOnly`` work on, each work has a savepoint: nothing runs again."""
    made = _Runs()
    works: list[Work[object]] = [
        OnceOnly(made.decide("a")),
        Repeatable(made.decide("b", fail=True)),
        Repeatable(made.decide("c")),
    ]
    outcomes, told = _group(store, works)
    assert [] == told
    assert {"a": 1, "b": 1, "c": 1} == made.runs
    assert [(1, "a"), (2, "c")] == _batches(store)
    assert isinstance(outcomes[1].error, _RefusedError)


def test_the_path_that_repeats_refuses_once_only_work() -> None:
    """A type error under mypy (the ignore below is needed) and a refusal when run."""
    once = OnceOnly(lambda _tx: None)
    with pytest.raises(TypeError, match=NOT_REPEATABLE):
        repeatable(once)
    marked: Repeatable[None] = once  # type: ignore[assignment]
    assert marked is not None


def test_a_commit_that_fails_fails_every_work_of_the_group(store: SqliteStore) -> None:
    """Nothing of the group is durable: each work hears the commit's failure."""
    made = _Runs()

    def breaks(tx: StoreTransaction) -> None:
        tx.reader().one("SELECT 1")  # a read; the commit below is what fails
        store.connection.execute("COMMIT")  # ends the transaction under the store's feet

    works: list[Work[object]] = [Repeatable(made.decide("a")), OnceOnly(breaks)]
    outcomes, _ = _group(store, works)
    assert 2 == len(outcomes)
    assert all(outcome.error is not None for outcome in outcomes)
