"""What every log does alike: sealing a batch, checking a lookup, reporting a verify.

Imports events, errors and the store's types.  The SQLite and PostgreSQL
logs seal against the head read inside their write transaction, accept the
same indexed-column lookups and turn a walk of their rows into the same
:class:`~pwf.store.VerifyReport`, so they cannot drift apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Final

from pwf.errors import ChainError, InputError
from pwf.events import seal
from pwf.store import EMPTY, REWRITES, VerifyReport

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pwf.events import Actor, Cause, Event, Sealed
    from pwf.store import Head

__all__ = [
    "LOOKUP_COLUMNS",
    "TIME_BOUNDS",
    "Batches",
    "extends",
    "lookup",
    "lookup_where",
    "report",
    "seal_batch",
]

LOOKUP_COLUMNS: Final = (
    "type",
    "run_id",
    "session_id",
    "request_id",
    "client_id",
    "idempotency_key",
    "batch",
)
"""The columns events are looked up by: each has an index but ``client_id`` and
``idempotency_key``, which only tests look up by (idempotency is ``host_commands``'s
unique key; ADR 0099).
"""
TIME_BOUNDS: Final = {"at_least": ">=", "at_most": "<="}
"""The bounds of the events' time a lookup may add to its columns, with their comparisons."""


class Batches(ABC):
    """A write transaction's batches, sealed against the head it keeps current.

    :meth:`append` seals a batch of its own; :meth:`stage` adds to the one
    batch the transaction keeps open.  A backend writes what was sealed
    (:meth:`_write`) and moves ``_head`` past it.
    """

    _head: Head
    _staged_batch: int | None

    @property
    def head(self) -> Head:
        """The log's tip as seen inside the transaction."""
        return self._head

    def append(
        self, events: Sequence[Event], *, at: int, actor: Actor, cause: Cause | None = None
    ) -> list[Sealed]:
        """Seal and write one batch; several calls make several batches."""
        return self._seal_and_write(events, self._head.batch + 1, at, actor, cause)

    def stage(
        self, events: Sequence[Event], *, at: int, actor: Actor, cause: Cause | None = None
    ) -> list[Sealed]:
        """Add events to this transaction's one open batch and write them at once.

        A command handler stages what it decides step by step and reads the
        projections in between; all staged events share one batch number and
        commit (or vanish) together with the transaction.
        """
        if self._staged_batch is None:
            self._staged_batch = self._head.batch + 1
        return self._seal_and_write(events, self._staged_batch, at, actor, cause)

    def _seal_and_write(
        self, events: Sequence[Event], batch: int, at: int, actor: Actor, cause: Cause | None
    ) -> list[Sealed]:
        if not events:
            return []
        sealed = seal_batch(events, self._head, batch, at=at, actor=actor, cause=cause)
        self._write(sealed)
        return sealed

    @abstractmethod
    def _write(self, sealed: list[Sealed]) -> None:
        """Write the sealed batch in this transaction and move ``_head`` past it."""


def seal_batch(  # noqa: PLR0913 - the head, the batch and what every event of it shares
    events: Sequence[Event],
    head: Head,
    batch: int,
    *,
    at: int,
    actor: Actor,
    cause: Cause | None,
) -> list[Sealed]:
    """Seal ``events`` into ``batch`` after ``head``: gapless seqs, each hanging off the last."""
    seq, prev = head.seq, head.content_hash
    sealed: list[Sealed] = []
    for event in events:
        seq += 1
        item = seal(
            event,
            seq=seq,
            batch=batch,
            at=at,
            actor=actor,
            cause=cause,
            event_id=f"evt-{seq}",
            prev_hash=prev,
        )
        sealed.append(item)
        prev = item.entry.content_hash
    return sealed


def lookup(wanted: Mapping[str, str | int | None]) -> dict[str, str | int]:
    """The given values of an indexed-column lookup, checked.

    Raises:
        InputError: an unknown column, or an idempotency key without its client id.
    """
    unknown = sorted(set(wanted) - set(LOOKUP_COLUMNS))
    if unknown:
        raise InputError(f"events cannot be looked up by {unknown[0]}")
    given = {column: value for column, value in wanted.items() if value is not None}
    if "idempotency_key" in given and "client_id" not in given:
        raise InputError("an idempotency key is looked up together with its client id")
    return given


def lookup_where(
    wanted: Mapping[str, str | int | None], *, after: int, until: int | None, mark: str = "?"
) -> tuple[str, tuple[object, ...]]:
    """The ``WHERE`` condition of a lookup of events, and its parameters, in ``mark``'s style.

    ``wanted``'s columns (:func:`lookup`), then the seq bounds (after
    ``after``, up to ``until``), then ``wanted``'s bounds of the time ``at``
    (:data:`TIME_BOUNDS`), a column of the ``events`` view: a time window is
    a scan, but one SQLite or PostgreSQL runs over the rows' columns, never
    over their bytes.

    Raises:
        InputError: an unknown column, an idempotency key without its client
            id, or a time bound that is not a whole number.
    """
    columns = {name: value for name, value in wanted.items() if name not in TIME_BOUNDS}
    terms: list[tuple[str, object]] = [
        (f"{column} = {mark}", value) for column, value in lookup(columns).items()
    ]
    terms.append((f"seq > {mark}", after))
    if until is not None:
        terms.append((f"seq <= {mark}", until))
    for name, condition in TIME_BOUNDS.items():
        bound = wanted.get(name)
        if bound is None:
            continue
        if type(bound) is not int:
            raise InputError(f"{name} is a time in epoch milliseconds, not {bound!r}")
        terms.append((f"at {condition} {mark}", bound))
    return " AND ".join(term for term, _ in terms), tuple(value for _, value in terms)


def extends(
    after: Head,
    fetch: Callable[[str, tuple[object, ...]], Sequence[object] | None],
    mark: str = "?",
) -> bool:
    """True when the log holds ``after`` and no event since is one of :data:`~pwf.store.REWRITES`.

    What lets a verify walk only the events after a head an earlier verify
    proved (:meth:`pwf.store.EventLog.verify`); ``fetch`` runs one query, in
    ``mark``'s style, in the verify's snapshot and gives its one row.
    """
    if not after.seq:
        return False
    marks = ", ".join([mark] * len(REWRITES))
    found = fetch(
        "SELECT content_hash, batch, EXISTS (SELECT 1 FROM events"  # noqa: S608 - marks only
        f" WHERE seq > {mark} AND type IN ({marks})) FROM events WHERE seq = {mark}",
        (after.seq, *REWRITES, after.seq),
    )
    if found is None:
        return False
    content_hash, batch, rewritten = found
    return (content_hash, batch, bool(rewritten)) == (after.content_hash, after.batch, False)


def report(head: Head, origin: Callable[[], Head], walk: Callable[[Head], Head]) -> VerifyReport:
    """What a verify found: ``walk`` from the log's ``origin`` must end at ``head``.

    A chain fault names its seq; a walk that ends elsewhere than the head
    names the first seq past the shorter of the two.
    """
    start = EMPTY
    try:
        start = origin()
        last = walk(start)
    except ChainError as error:
        return VerifyReport(
            events=max(error.seq - 1 - start.seq, 0),
            head=head,
            first_bad_seq=error.seq,
            reason=error.reason,
        )
    if last != head:
        bad = last.seq if last.seq == head.seq else min(last.seq, head.seq) + 1
        return VerifyReport(
            events=last.seq - start.seq,
            head=head,
            first_bad_seq=bad,
            reason=f"the log ends at seq {last.seq} but its head says seq {head.seq}"
            if last.seq != head.seq
            else "the head's hash or batch does not match the last event",
        )
    return VerifyReport(events=last.seq - start.seq, head=head)
