"""One unit of work: the decisions a store runs in one transaction, and which may run twice.

Imports nothing of pwf but the store's types.  A decision is handed to a
store as work on its write transaction, marked by type (ADR 0087):

- :class:`Repeatable` work changes nothing but the transaction it is given,
  so a store may run it again after rolling that transaction back (a group
  run without savepoints, ADR 0061) or throw a run away and make it again (a
  decision made ahead of a shared log's lock that found the log moved,
  ADR 0062);
- :class:`OnceOnly` work may have an effect outside the transaction (a
  backup's copy, prune's file work, a timer's clock): a store runs it once,
  and a path that repeats refuses it, under mypy and at run time
  (:func:`repeatable`).

A store's :meth:`~pwf.store.EventStore.run` runs one unit of one decision;
:meth:`~pwf.store.EventStore.run_group` runs a group of them in one
transaction, one outcome each (:class:`Outcome`), and decides by itself how
(bare, with savepoints, or ahead and again).  Nothing above the store names
how.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pwf.store import StoreTransaction

__all__ = [
    "NOT_REPEATABLE",
    "Observe",
    "OnceOnly",
    "Outcome",
    "Repeatable",
    "Work",
    "failed",
    "repeatable",
    "run_all",
    "run_one",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

NOT_REPEATABLE: Final = "work that may have an effect outside its transaction cannot run twice"


class _Marked(Generic[T_co]):
    """A decision on a write transaction; its class says whether it may run twice."""

    __slots__ = ("_decide",)

    def __init__(self, decide: Callable[[StoreTransaction], T_co]) -> None:
        """Wrap ``decide``."""
        self._decide = decide

    def __call__(self, tx: StoreTransaction) -> T_co:
        """Decide inside ``tx``."""
        return self._decide(tx)


class Repeatable(_Marked[T_co]):
    """Work whose every effect is in the transaction it is given: a store may run it again."""

    __slots__ = ()


class OnceOnly(_Marked[T_co]):
    """Work that may have an effect outside its transaction: a store runs it exactly once."""

    __slots__ = ()


Work = Repeatable[T] | OnceOnly[T]
"""What a store is handed: one decision, marked by whether it may run twice."""


class Outcome(NamedTuple):
    """What one work of a group came to: its value, or the error it was rolled back for."""

    value: object
    error: BaseException | None


Observe = Callable[[str], None]
"""A metrics hook: told the name of each event worth counting (``"redone"``: a group ran again)."""


def repeatable(work: Work[T]) -> Repeatable[T]:
    """``work`` itself, for a path that may run it twice; refused unless :class:`Repeatable`.

    Raises:
        TypeError: ``work`` is not marked :class:`Repeatable`.
    """
    if not isinstance(work, Repeatable):
        raise TypeError(f"{NOT_REPEATABLE}: {work!r}")
    return work


def run_one(tx: StoreTransaction, work: Work[object]) -> Outcome:
    """One work of a group, its own batch, in its own savepoint: a failure undoes it alone."""
    tx.new_batch()
    try:
        with tx.savepoint():
            return Outcome(work(tx), None)
    except Exception as error:  # noqa: BLE001 - the work's caller answers with it
        return Outcome(None, error)


def run_all(
    transaction: Callable[[], AbstractContextManager[StoreTransaction]],
    works: Iterator[Work[object]],
) -> list[Outcome]:
    """Decide ``works`` in one ``transaction()``, each in its own savepoint, and commit.

    One outcome per work taken; when the transaction fails, each holds the failure.
    """
    outcomes: list[Outcome] = []
    try:
        with transaction() as tx:
            for work in works:
                outcomes.append(run_one(tx, work))  # noqa: PERF401 - kept as each is decided
    except Exception as failure:  # noqa: BLE001 - the commit failed: nothing is durable
        return failed(failure, len(outcomes), works)
    return outcomes


def failed(error: BaseException, taken: int, works: Iterator[Work[object]]) -> list[Outcome]:
    """Every work of a group whose transaction did not commit, with its error.

    ``taken`` works were taken from ``works`` before it failed; when none
    was (the transaction could not begin), the first work is, so a caller's
    group always hears of the failure.
    """
    if taken == 0 and next(works, None) is not None:
        taken = 1
    return [Outcome(None, error)] * taken
