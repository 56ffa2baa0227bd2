"""Decisions made ahead of a shared log's lock, and made again under it when the log moved.

Imports nothing of pwf.  A store whose log of record is shared (a
:class:`~pwf.store.mirror.Mirror`) may let the first write transaction of a
decision decide from the local copy before it takes the shared log's lock,
and then write only if the log's head is still the one the copy ends at
(ADR 0062).  When another writer moved the head, nothing was written or kept
and the store raises :class:`StaleDecision` at the end of the transaction;
:func:`decide_ahead` then runs the decision again, and that run decides
under the lock as every transaction did before.  Only a caller that can run
its decision twice opts in, by calling it through :func:`decide_ahead`.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Attempt", "StaleDecision", "decide_ahead", "open_attempt"]

T = TypeVar("T")


class StaleDecision(Exception):  # noqa: N818 - a decision, not an error: it is made again
    """A decision made ahead of the lock found the shared log moved; nothing was written."""


class Attempt:
    """One run of a decision: only its first write transaction may decide ahead of the lock."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        """A fresh run, whose first transaction has not started yet."""
        self.open = True


_ATTEMPT: Final[ContextVar[Attempt | None]] = ContextVar("pwf_decision_attempt", default=None)


def open_attempt() -> bool:
    """True for the first write transaction of a run of :func:`decide_ahead`, once.

    A transaction that starts later in the same run (after one that may
    have committed) is never told yes: a run that committed anything must
    not be made again.
    """
    attempt = _ATTEMPT.get()
    if attempt is None or not attempt.open:
        return False
    attempt.open = False
    return True


def decide_ahead(decide: Callable[[], T]) -> T:
    """Run ``decide``, whose first write transaction may decide ahead of the lock; again if stale.

    ``decide`` must have no effect outside its store's transactions but on
    values it returns, since a stale first run is thrown away.
    """
    token = _ATTEMPT.set(Attempt())
    try:
        return decide()
    except StaleDecision:
        pass
    finally:
        _ATTEMPT.reset(token)
    return decide()
