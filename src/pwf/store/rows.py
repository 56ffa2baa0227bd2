"""Stored event rows: the indexed columns, and every check the deep verify makes of one row.

Imports events, errors and the store's types; it reads no database itself.
:data:`COLUMNS` names an event row's columns in table order;
:func:`check_event` makes the checks of one row that need no neighbour
(position, bytes, canonical form and typed data in one decode where it can,
indexed columns, where ``log.compacted`` may stand) and :func:`verify_rows` adds the links between
neighbours, as ``pwf log verify`` walks the log in one process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.errors import ChainError, InputError, LineError
from pwf.events import LogCompacted
from pwf.events.stored import open_stored
from pwf.store import Head, check_position
from pwf.store import check_link as link

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pwf.events import Entry

__all__ = ["BODY", "COLUMNS", "check_event", "check_link", "columns", "verify_rows"]

COLUMNS: Final = (
    "seq, batch, type, at, run_id, session_id, request_id, client_id, idempotency_key,"
    " content_hash, prev_hash, body"
)
BODY: Final = 11
"""Where ``body`` stands in a row of :data:`COLUMNS`."""


def columns(entry: Entry) -> tuple[object, ...]:
    """The indexed columns as the event's own bytes say they are."""
    cause = entry.cause
    return (
        entry.seq,
        entry.batch,
        entry.type,
        entry.at,
        entry.event.index_run_id(),
        entry.event.index_session_id(),
        cause.request_id if cause else None,
        cause.client_id if cause else None,
        cause.idempotency_key if cause else None,
        entry.content_hash,
        entry.prev_hash,
    )


def check_event(seq: int, row: tuple[object, ...]) -> Entry:
    """The typed event of a row of :data:`COLUMNS` expected at ``seq``, checked on its own.

    Raises:
        ChainError: the row is not at ``seq``, or its bytes or columns are wrong.
    """
    check_position(seq, row[0])
    body = row[BODY]
    if not isinstance(body, bytes):
        raise ChainError(seq, "the stored body is not bytes")
    try:
        entry = open_stored(body)
    except (LineError, InputError) as error:
        raise ChainError(seq, str(error)) from None
    said = columns(entry)
    if said != tuple(row[:BODY]) and canonical.bindable(said) != tuple(row[:BODY]):
        names = COLUMNS.split(", ")
        column = next(n for n, a, b in zip(names, said, row, strict=False) if a != b)
        raise ChainError(seq, f"indexed column {column.strip()} disagrees with the stored bytes")
    return entry


def check_link(seq: int, entry: Entry, before: Head | None, *, opens: bool) -> None:
    """``entry`` at ``seq`` follows ``before`` by the one link rule (:func:`pwf.store.check_link`).

    Raises:
        ChainError: the link is broken.
    """
    compacted = isinstance(entry.event, LogCompacted)
    link(seq, entry.prev_hash, entry.batch, before, opens=opens, compacted=compacted)


def verify_rows(rows: Iterable[tuple[object, ...]], origin: Head) -> Head:
    """Walk rows of :data:`COLUMNS` in seq order from ``origin``; return the last head.

    Raises:
        ChainError: at the first bad seq, naming why.
    """
    expected, opening = origin, origin.seq + 1
    for row in rows:
        seq = expected.seq + 1
        entry = check_event(seq, row)
        check_link(seq, entry, expected, opens=seq == opening)
        expected = Head(seq=seq, content_hash=entry.content_hash, batch=entry.batch)
    return expected
