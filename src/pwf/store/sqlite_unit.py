"""How a SQLite file runs a group of decisions: bare first, with savepoints when needed.

Imports the store's unit of work and the SQLite transaction's type.  A group
runs in one write transaction, one commit and one flush (ADR 0052).  The
:class:`~pwf.store.unit.Repeatable` work that leads the group runs without
savepoints (ADR 0061): copying every page a decision changes into a
savepoint journal costs about a tenth of it.  (A mirror's local file is not
run this way: its transaction spans the shared log, whose writes a bare run
cannot undo alone; :class:`~pwf.store.mirror.MirroredStore`.)  A work that
fails without having written needs no undoing; one that fails after writing
spoils the transaction, which is rolled back, and the works taken so far
(every one of them repeatable) run again, each in its own savepoint,
followed by the rest of the group.  The first
:class:`~pwf.store.unit.OnceOnly` work, and every work after it, runs in a
savepoint of its own, so nothing that may have an effect outside the
transaction is ever run twice (ADR 0087).  A direct decision, a group of
one, runs the same way (ADR 0101): bare when repeatable, again with
savepoints when it failed after writing.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, TypeVar

from pwf.store.unit import Outcome, Repeatable, failed, repeatable, run_one

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pwf.store.sqlite import SqliteStore
    from pwf.store.sqlite_transaction import SqliteTransaction
    from pwf.store.unit import Observe, Work

__all__ = ["run_alone", "run_group"]

T = TypeVar("T")


class _Spoiled(Exception):  # noqa: N818 - a state of the transaction, never seen outside here
    """Raised by this module alone, to roll a spoiled group's transaction back."""


def run_group(
    store: SqliteStore, works: Iterator[Work[object]], observe: Observe | None = None
) -> list[Outcome]:
    """Decide ``works`` in one transaction of ``store`` and commit; one outcome per work taken.

    ``observe`` is told ``"redone"`` when the group ran again.
    """
    taken: list[Work[object]] = []
    try:
        return _attempt(store, _taking(works, taken), bare=True)
    except _Spoiled:
        if observe is not None:
            observe("redone")
    again: list[Work[object]] = [repeatable(work) for work in taken]
    return _attempt(store, itertools.chain(again, works), bare=False)


def run_alone(store: SqliteStore, work: Work[T]) -> T:
    """Decide ``work`` in a transaction of its own and commit; its value, or its error raised.

    :class:`~pwf.store.unit.Repeatable` work runs bare (its savepoints run no
    statement) and, when it failed after writing, runs again in a new
    transaction with them; other work runs once, with them.
    """
    if isinstance(work, Repeatable):
        try:
            return _alone(store, work, bare=True)
        except _Spoiled:
            pass
    return _alone(store, work, bare=False)


def _alone(store: SqliteStore, work: Work[T], *, bare: bool) -> T:
    """One run of ``work`` in its own transaction.

    Raises:
        _Spoiled: a bare run failed after writing; the transaction is rolled back.
    """
    with store.transaction() as tx:
        tx.bare = bare
        value = work(tx)
        tx.bare = False
        _unspoiled(tx)
    return value


def _taking(works: Iterator[Work[object]], taken: list[Work[object]]) -> Iterator[Work[object]]:
    for work in works:
        taken.append(work)
        yield work


def _attempt(store: SqliteStore, works: Iterator[Work[object]], *, bare: bool) -> list[Outcome]:
    """One run of the group; a commit that fails fails every work taken.

    Raises:
        _Spoiled: a bare work failed after writing; the transaction is rolled back.
    """
    outcomes: list[Outcome] = []
    try:
        with store.transaction() as tx:
            for work in works:
                bare = bare and isinstance(work, Repeatable)
                tx.bare = bare
                outcomes.append(run_one(tx, work))
                _unspoiled(tx)
            tx.bare = False
    except _Spoiled:
        raise
    except Exception as failure:  # noqa: BLE001 - the commit failed: nothing is durable
        return failed(failure, len(outcomes), works)
    return outcomes


def _unspoiled(tx: SqliteTransaction) -> None:
    """Raise :class:`_Spoiled` when a bare work failed after writing in ``tx``."""
    if tx.spoiled:
        raise _Spoiled
