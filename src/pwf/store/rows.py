"""Stored event rows: the indexed columns, and every check the deep verify makes of one row.

Imports events, errors and the store's types; it reads no database itself.
:data:`COLUMNS` names an event row's columns in table order;
:func:`check_event` makes the checks of one row that need no neighbour
(position, bytes, canonical form and typed data, indexed columns, where
``log.compacted`` may stand) and :func:`verify_rows` adds the links between
neighbours, as ``pwf log verify`` walks the log in one process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.errors import ChainError, InputError, LineError
from pwf.events import LogCompacted, open_body
from pwf.store import Head

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
_PREV_FAULT: Final = "prevHash does not match the previous event's contentHash"


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


def check_event(seq: int, row: tuple[object, ...], opening: int | None) -> Entry:
    """The typed event of a row of :data:`COLUMNS` expected at ``seq``, checked on its own.

    ``opening`` is the seq at which a ``log.compacted`` may stand (the log's
    first), or None where none may.

    Raises:
        ChainError: the row is not at ``seq``, or its bytes or columns are wrong.
    """
    if row[0] != seq:
        raise ChainError(seq, f"seq {seq} is missing (next stored is {row[0]})")
    body = row[BODY]
    if not isinstance(body, bytes):
        raise ChainError(seq, "the stored body is not bytes")
    try:
        entry = open_body(body)
    except (LineError, InputError) as error:
        raise ChainError(seq, str(error)) from None
    said = columns(entry)
    if said != tuple(row[:BODY]) and canonical.bindable(said) != tuple(row[:BODY]):
        names = COLUMNS.split(", ")
        column = next(n for n, a, b in zip(names, said, row, strict=False) if a != b)
        raise ChainError(seq, f"indexed column {column.strip()} disagrees with the stored bytes")
    if isinstance(entry.event, LogCompacted) and seq != opening:
        raise ChainError(seq, "log.compacted may only open a log")
    return entry


def check_link(seq: int, entry: Entry, before: Head) -> None:
    """``entry`` at ``seq`` follows ``before``: its prev hash, then its batch.

    Raises:
        ChainError: the link is broken.
    """
    if entry.prev_hash != before.content_hash:
        raise ChainError(seq, _PREV_FAULT)
    if entry.batch not in (before.batch, before.batch + 1):
        raise ChainError(seq, f"batch {entry.batch} does not follow batch {before.batch}")


def verify_rows(rows: Iterable[tuple[object, ...]], origin: Head) -> Head:
    """Walk rows of :data:`COLUMNS` in seq order from ``origin``; return the last head.

    Raises:
        ChainError: at the first bad seq, naming why.
    """
    expected, opening = origin, origin.seq + 1
    for row in rows:
        seq = expected.seq + 1
        entry = check_event(seq, row, opening)
        check_link(seq, entry, expected)
        if seq == opening and entry.batch != origin.batch + 1:
            raise ChainError(seq, f"batch {entry.batch} does not follow batch {origin.batch}")
        expected = Head(seq=seq, content_hash=entry.content_hash, batch=entry.batch)
    return expected
