"""Stored event rows: the indexed columns, and every check the deep verify makes of one row.

Imports events, errors and the store's types; it reads no database itself.
:data:`COLUMNS` names an event row's columns in table order;
:func:`check_event` makes the checks of one row that need no neighbour
(position, bytes, canonical form and typed data in one decode where it can,
indexed columns, where ``log.compacted`` may stand) and :func:`verify_rows` adds the links between
neighbours, as ``pwf log verify`` walks the log in one process.  :func:`shared_row` is
the form a row's text takes in PostgreSQL, which holds no lone surrogate (ADR 0071).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.errors import ChainError, InputError, LineError
from pwf.events import LogCompacted
from pwf.events.stored import open_stored
from pwf.store import Head, check_position
from pwf.store import check_link as link

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pwf.events import Entry

__all__ = [
    "BODY",
    "COLUMNS",
    "PRUNED_AT_COLUMNS",
    "check_event",
    "check_link",
    "columns",
    "pruned_at",
    "shared_row",
    "shared_text",
    "verify_rows",
]

COLUMNS: Final = (
    "seq, batch, type, at, run_id, session_id, request_id, client_id, idempotency_key,"
    " content_hash, prev_hash, body"
)
BODY: Final = 11
"""Where ``body`` stands in a row of :data:`COLUMNS`."""


_SHARED_ESCAPE: Final = "\ufffd"
_ESCAPED: Final = re.compile("[\ud800-\udfff\ufffd]")


def shared_text(text: str) -> str:
    """Text as the shared log's PostgreSQL columns hold it: each id stays itself (ADR 0071).

    PostgreSQL text is valid UTF-8, so a lone surrogate cannot be kept as
    SQLite keeps it.  Text with neither a lone surrogate nor U+FFFD is kept
    as it is; in other text each of those code units becomes U+FFFD followed
    by its four lower-case hex digits (``r-`` U+D800 is ``r-`` U+FFFD ``d800``,
    U+FFFD is U+FFFD ``fffd``).  Distinct ids stay distinct, and a column reads
    as what Node binds with each replaced code unit written after its U+FFFD.
    """
    if text.isascii() or _ESCAPED.search(text) is None:
        return text
    return _ESCAPED.sub(lambda unit: f"{_SHARED_ESCAPE}{ord(unit.group()):04x}", text)


def shared_row(row: Sequence[object]) -> tuple[object, ...]:
    """A row with each text cell as :func:`shared_text` writes it."""
    return tuple(shared_text(cell) if type(cell) is str else cell for cell in row)


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


def check_event(seq: int, row: tuple[object, ...], *, shared: bool = False) -> Entry:
    """The typed event of a row of :data:`COLUMNS` expected at ``seq``, checked on its own.

    The indexed columns hold the text of the event's own bytes; a row
    written before ADR 0071 may hold each lone surrogate as U+FFFD, and a
    ``shared`` row (read from PostgreSQL) holds :func:`shared_text`.

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
    said, stored = columns(entry), tuple(row[:BODY])
    if (
        said != stored
        and canonical.bindable(said) != stored
        and not (shared and shared_row(said) == stored)
    ):
        names = COLUMNS.split(", ")
        column = next(n for n, a, b in zip(names, said, row, strict=False) if a != b)
        raise ChainError(seq, f"indexed column {column.strip()} disagrees with the stored bytes")
    return entry


PRUNED_AT_COLUMNS: Final = (0, 9, 1, 10)
"""Where a row of :data:`COLUMNS` holds ``seq``, ``content_hash``, ``batch`` and ``prev_hash``."""


def pruned_at(
    seq: int,
    row: tuple[object, ...],
    before: Head | None,
    *,
    opens: bool,
    at: tuple[int, int, int, int] = PRUNED_AT_COLUMNS,
) -> Head:
    """The head of a pruned event's row (no body), its position and link checked (ADR 0103).

    A prune keeps the event's seq, batch and hashes; its bytes are in the
    prune's backup, and its leaf hash in the tree, which the tree's check
    proves.  ``at`` says where ``row`` holds ``seq``, ``content_hash``,
    ``batch`` and ``prev_hash``: every walk's rows are checked by this one
    rule, whatever columns it reads.  A content hash read as bytes (the hex
    digits cast to a blob) is taken as its text.

    Raises:
        ChainError: the row is not at ``seq``, lacks its kept columns, or its link is broken.
    """
    check_position(seq, row[at[0]])
    if len(row) <= max(at):
        raise ChainError(seq, "the pruned event's hash or batch is not stored")
    digest, batch, prev = row[at[1]], row[at[2]], row[at[3]]
    if isinstance(digest, bytes):
        digest = digest.decode()
    if not isinstance(digest, str) or not isinstance(batch, int):
        raise ChainError(seq, "the pruned event's hash or batch is not stored")
    link(seq, prev if isinstance(prev, str) else None, batch, before, opens=opens, compacted=False)
    return Head(seq=seq, content_hash=digest, batch=batch)


def check_link(seq: int, entry: Entry, before: Head | None, *, opens: bool) -> None:
    """``entry`` at ``seq`` follows ``before`` by the one link rule (:func:`pwf.store.check_link`).

    Raises:
        ChainError: the link is broken.
    """
    compacted = isinstance(entry.event, LogCompacted)
    link(seq, entry.prev_hash, entry.batch, before, opens=opens, compacted=compacted)


def verify_rows(rows: Iterable[tuple[object, ...]], origin: Head, *, shared: bool = False) -> Head:
    """Walk rows of :data:`COLUMNS` in seq order from ``origin``; return the last head.

    ``shared`` rows are read from PostgreSQL (:func:`check_event`).

    Raises:
        ChainError: at the first bad seq, naming why.
    """
    expected, opening = origin, origin.seq + 1
    for row in rows:
        seq = expected.seq + 1
        if row[BODY] is None:
            expected = pruned_at(seq, row, expected, opens=seq == opening)
            continue
        entry = check_event(seq, row, shared=shared)
        check_link(seq, entry, expected, opens=seq == opening)
        expected = Head(seq=seq, content_hash=entry.content_hash, batch=entry.batch)
    return expected
