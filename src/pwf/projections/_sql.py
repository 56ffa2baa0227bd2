"""Statements projectors emit and the small pure helpers they share."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias, TypeVar

import msgspec

from pwf import canonical
from pwf.events import LogPruned

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pwf.events import Entry, Event

    Handler: TypeAlias = Callable[[Entry], "list[Statement]"]
    """Folds an event of one class into one read model."""

__all__ = [
    "Sql",
    "Statement",
    "dispatch",
    "each",
    "for_each_chunk",
    "handlers",
    "json_hash",
    "on",
    "pruned",
    "quoted_list",
    "text_hash",
]

E = TypeVar("E", bound="Event")


Statement: TypeAlias = tuple[str, tuple[object, ...]]
"""One statement a projector emits, ``(text, params)``; values are always bound with ``?``.

The projections here build plain tuples: a fold makes hundreds of thousands
of them, and a named tuple's constructor costs ten times as much.
"""


class Sql(NamedTuple):
    """A statement with named members, for projections written elsewhere (tests, tools)."""

    text: str
    params: tuple[object, ...] = ()


CHUNK: Final = 5000
"""Values one ``IN (...)`` statement of :func:`for_each_chunk` binds: each chunk of a column
no index serves is one scan of its table, so a prune of 16 000 runs at a million events scans
``worker_messages`` and ``host_commands`` 4 times, not 33 (1.9 s against 4.0 s for all of a
``log.pruned``'s statements); SQLite allows 32 766 variables a statement since 3.32."""


def for_each_chunk(sql: str, values: tuple[str, ...]) -> list[Statement]:
    """``sql``'s ``IN ({})`` filled with :data:`CHUNK` marks, once per chunk of ``values``.

    For a statement over a column no index serves (a pruned run's recorded
    commands): one scan of the table per chunk, not one per value.  The last
    chunk repeats its last value to fill the marks, so every statement has
    the same text; ``sql`` must not mind a value twice (an ``UPDATE`` that
    sets a constant, a ``DELETE``).
    """
    text = sql.format(", ".join("?" * CHUNK))
    statements: list[Statement] = []
    for start in range(0, len(values), CHUNK):
        chunk = values[start : start + CHUNK]
        statements.append((text, chunk + (chunk[-1],) * (CHUNK - len(chunk))))
    return statements


def pruned(*sql: str) -> tuple[type[Event], Handler]:
    """A ``HANDLERS`` item: a ``log.pruned`` deletes its removed runs' rows with each of ``sql``.

    Each statement holds ``IN ({})`` for the removed run ids
    (:func:`for_each_chunk`).  A prune removes whole run trees (DOMAIN
    §13.2): the rows a fold of the kept events never makes are these, so the
    live fold of ``log.pruned`` leaves what a fold of the pruned log gives,
    and in such a fold, or a fold of the image a prune installs, it deletes
    nothing (ADR 0107).
    """

    def fold(event: LogPruned, _at: int) -> list[Statement]:
        ids = event.removed_run_ids
        return [statement for text in sql for statement in for_each_chunk(text, ids)]

    return each(LogPruned, fold)


def dispatch(handlers: Mapping[type[Event], Handler], entry: Entry) -> list[Statement]:
    """The statements of the handler for ``entry``'s event class, or none."""
    handler = handlers.get(type(entry.event))
    return [] if handler is None else handler(entry)


def on(
    kind: type[E], sql: str, params: Callable[[E, int], tuple[object, ...]]
) -> tuple[type[Event], Handler]:
    """A ``HANDLERS`` item: each event of ``kind`` folds into ``sql`` with ``params(event, at)``.

    The shape of most projectors: one statement whose values are the event's
    fields and the entry's time.  Handlers that emit several statements, or
    none, are given to :func:`each`.
    """

    def handle(entry: Entry) -> list[Statement]:
        event = entry.event
        assert isinstance(event, kind)
        return [(sql, params(event, entry.at))]

    return kind, handle


def each(kind: type[E], fold: Callable[[E, int], list[Statement]]) -> tuple[type[Event], Handler]:
    """A ``HANDLERS`` item: each event of ``kind`` folds into ``fold(event, at)``'s statements.

    For handlers that emit several statements, or none: ``fold`` gets the
    event already narrowed to ``kind`` and the entry's time, as :func:`on`'s
    ``params`` does.
    """

    def handle(entry: Entry) -> list[Statement]:
        event = entry.event
        assert isinstance(event, kind)
        return fold(event, entry.at)

    return kind, handle


def quoted_list(values: tuple[str, ...]) -> str:
    """``'a', 'b'`` for a CHECK list built from constants."""
    return ", ".join(f"'{value}'" for value in values)


def handlers(*items: tuple[type[Event], Handler]) -> Mapping[type[Event], Handler]:
    """A read model's ``HANDLERS``: each event class it folds, with its handler."""
    return dict(items)


def json_hash(value: msgspec.Raw | msgspec.UnsetType) -> bytes | None:
    """SHA-256 of a JSON value's canonical bytes, as the blob store keys it."""
    if isinstance(value, msgspec.Raw):
        return hashlib.sha256(bytes(value)).digest()
    return None


def text_hash(value: str | None) -> bytes | None:
    """SHA-256 of a text's UTF-8 bytes as Node writes them, as the blob store keys it."""
    return None if value is None else hashlib.sha256(canonical.utf8(value)).digest()
