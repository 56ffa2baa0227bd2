"""Deciders: what a command or worker message changes, as events; imports canonical, events, errors.

A decider gets a :class:`Context`: it reads the current projections through
the context's :class:`Reader` (SQL text lives here, the connection at the
edge), stages events (which are projected at once, so later reads see them)
and returns a :class:`Result`.  It never reads a clock: ``now`` is given.  A
refusal that the original raises is a :class:`pwf.errors.CommandError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from pwf import canonical
from pwf.errors import CommandError, Outcome

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from pwf.commands.rows import Query
    from pwf.events import Event

R = TypeVar("R", bound=tuple[Any, ...])

__all__ = ["CommandError", "Context", "Reader", "Result", "Row", "raw_or_missing"]


class Row(Protocol):
    """One projection row, read by column name."""

    def __getitem__(self, key: str, /) -> Any:  # noqa: ANN401 - SQLite values are untyped
        """The value of one column."""

    def keys(self) -> list[str]:
        """The column names."""

    def __iter__(self) -> Iterator[Any]:
        """The values in column order (what a typed row is made from)."""


class Reader(Protocol):
    """Read access to the projections inside the command's transaction."""

    def one(self, sql: str, params: tuple[object, ...] = ()) -> Row | None:
        """The first row of a query, or None."""

    def all(self, sql: str, params: tuple[object, ...] = ()) -> list[Row]:
        """Every row of a query."""


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """What a handler answers: outcome, revision, receipt and error, as the response carries."""

    outcome: Outcome = "accepted"
    receipt: object = msgspec.UNSET
    revision: int | None = None
    error: str | None = None
    run_id: str | None = None
    awaiting: str | None = None
    """A submission whose worker verdict the response waits for (``interaction.submit``)."""
    effect: tuple[str, str] | None = None
    """File work the host does before recording the outcome, e.g. ``("backup", path)``."""


class Context:
    """What a decider may use: the reader, the batch being built, and ``now``."""

    def __init__(
        self,
        reader: Reader,
        stage: Callable[[Sequence[Event]], object],
        now: int,
        mint: Callable[[str], str] | None = None,
        *,
        connection: str | None = None,
    ) -> None:
        """Bind the transaction's reader and stager to one clock value.

        ``mint(prefix)`` makes a fresh id (a coordinator epoch): ids are
        decided at the edge and carried in events.  ``connection`` is the
        served connection the command came on, None in direct mode.
        """
        self.reader = reader
        self._stage = stage
        self.now = now
        self.mint = mint or _no_mint
        self.connection = connection

    def one(self, sql: str, *params: object) -> Row | None:
        """The first row of a query, or None."""
        return self.reader.one(sql, params)

    def all(self, sql: str, *params: object) -> list[Row]:
        """Every row of a query."""
        return self.reader.all(sql, params)

    def fetch(self, query: Query[R], *params: object) -> R | None:
        """The first row of a typed query, or None."""
        row = self.reader.one(query.sql, params)
        return None if row is None else query.make(row)

    def fetch_all(self, query: Query[R], *params: object) -> list[R]:
        """Every row of a typed query."""
        make = query.make
        return [make(row) for row in self.reader.all(query.sql, params)]

    def value(self, sql: str, *params: object) -> Any:  # noqa: ANN401 - SQLite values are untyped
        """The first column of the first row, or None."""
        row = self.reader.one(sql, params)
        return None if row is None else row[row.keys()[0]]

    def emit(self, *events: Event) -> None:
        """Stage events into the batch; the projections reflect them immediately."""
        self._stage(events)


def _no_mint(prefix: str) -> str:
    raise CommandError(f"no id source for {prefix}")


def raw_or_missing(value: object) -> msgspec.Raw | msgspec.UnsetType:
    """A value an event embeds: its canonical bytes, or MISSING (the member left out) as it is.

    A result's receipt, a run's final output or error may be absent
    (:data:`canonical.MISSING`); an event then omits the member rather than
    writing ``null``.
    """
    return canonical.MISSING if value is canonical.MISSING else canonical.raw(value)


def refuse(message: str, outcome: Outcome = "rejected") -> CommandError:
    """The error a decider raises to refuse with the original's text."""
    return CommandError(message, outcome)
