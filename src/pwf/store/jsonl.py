"""JSONL export and import of any log; imports events, errors and the store's types.

Export writes each event's stored bytes and a newline, nothing else, so two
exports of the same log are identical files.  Import checks every line
(canonical, typed, content hash, gapless seq from 1 or from the head a
compaction replaced, prev-hash chain, batch order) while writing inside one
transaction on an empty database, so a file with any fault is refused whole
and leaves nothing behind; memory stays constant however long the file is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO, Protocol

from pwf.errors import ChainError, ImportRefusedError, InputError
from pwf.events import Entry, LogCompacted, open_body
from pwf.store import EMPTY, Head, check_link, origin_of

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pwf.store import EventLog, EventStore

__all__ = ["LineSource", "export_jsonl", "import_jsonl"]

_LIMIT = 1_048_576 * 8
"""Longest line accepted on import: eight times the protocol limit, as events carry receipts."""


def export_jsonl(store: EventLog, out: BinaryIO, first: int = 1, last: int | None = None) -> int:
    """Write stored events ``first..last`` as JSONL; return how many were written."""
    written = 0
    for stored in store.read(first, last):
        out.write(stored.body)
        out.write(b"\n")
        written += 1
    return written


class LineSource(Protocol):
    """What import reads a log from: a binary stream's ``readline``."""

    def readline(self, limit: int = -1, /) -> bytes:
        """The next line with its newline, at most ``limit`` bytes; empty at the end."""
        ...


def _lines(source: LineSource) -> Iterable[tuple[int, bytes]]:
    for number, line in enumerate(iter(lambda: source.readline(_LIMIT + 1), b""), start=1):
        if not line.endswith(b"\n"):
            reason = "line is too long" if len(line) > _LIMIT else "the last line has no newline"
            raise ImportRefusedError(number, reason)
        yield number, line[:-1]


def import_jsonl(store: EventStore, source: LineSource) -> Head:
    """Append a JSONL log to an empty store, checking every line; all or nothing.

    Raises:
        ImportRefusedError: the store already holds events, or a line is bad;
            nothing was written.
    """
    with store.transaction() as tx:
        if tx.head.seq != 0:
            raise ImportRefusedError(
                0, f"{store.projections_file.path} already holds {tx.head.seq} events"
            )
        origin = head = EMPTY
        for number, body in _lines(source):
            try:
                entry = open_body(body)
                if number == 1 and isinstance(entry.event, LogCompacted):
                    origin = head = origin_of(entry.seq, body)
            except (InputError, ChainError) as error:
                raise ImportRefusedError(number, str(error)) from None
            reason = _chain_fault(head, origin, entry)
            if reason is not None:
                raise ImportRefusedError(number, reason)
            tx.insert_verified(entry, body)
            head = Head(seq=entry.seq, content_hash=entry.content_hash, batch=entry.batch)
        if head == origin:
            raise ImportRefusedError(0, "the file holds no events")
        return head


def _chain_fault(head: Head, origin: Head, entry: Entry) -> str | None:
    """Why ``entry`` cannot follow ``head``, by the one link rule (:func:`pwf.store.check_link`)."""
    if entry.seq != head.seq + 1:
        return str(ChainError(head.seq + 1, f"expected seq {head.seq + 1}, found {entry.seq}"))
    try:
        check_link(
            entry.seq,
            entry.prev_hash,
            entry.batch,
            head,
            opens=entry.seq == origin.seq + 1,
            compacted=isinstance(entry.event, LogCompacted),
        )
    except ChainError as error:
        return str(error)
    return None
