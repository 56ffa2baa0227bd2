"""Walk the hash chain of a SQLite log, from its bytes alone or deeply, split over processes.

Imports the store's types, rows and sqlite_rows, errors and pwf._process (plus sqlite3 and
hashlib: this is an edge room).  :func:`walk_chain` makes the checks
of ``pwf log verify --chain-only``: seqs follow without a gap from
``origin.seq + 1``; each body's SHA-256 without its ``contentHash`` member
equals that member and the ``content_hash`` column; the ``seq`` member is the
row's position; ``prevHash`` names the event before (``origin.content_hash``
for the first, JSON ``null`` when that is None); ``batch`` stays or steps by
one, and is ``origin.batch + 1`` for the first event.  It raises
:class:`~pwf.errors.ChainError` at the first bad seq, with the reason the
sequential walk gives.  With ``deep`` it makes those of ``pwf log verify``
instead: every event parsed (canonical form, typed data), its indexed
columns compared with its bytes, then the same links
(:mod:`pwf.store.rows`).

A long log is cut into consecutive seq ranges, one per process, the caller's
process walking the first.  Each range is walked on its own connection and
checks every link inside it; it reports where it starts (the first event's
raw ``prevHash`` member and batch), where it ends (seq, hash, batch) and its
first fault.  The caller joins the ranges in order, checking each boundary
link, so the first fault of the earliest range wins and the report is the
sequential walk's.  Memory stays flat: every range streams its rows.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import TYPE_CHECKING, Final, NamedTuple

from pwf._process import Forked, can_fork, processors
from pwf._sqlite import exact_text
from pwf.errors import ChainError, StoreError
from pwf.store import Head, check_position
from pwf.store import check_link as link
from pwf.store.rows import BODY, check_event, check_link, pruned_at
from pwf.store.sqlite_rows import LAST, chain_rows, event_rows

if TYPE_CHECKING:
    from collections.abc import Generator, Iterable, Iterator
    from pathlib import Path

    from pwf.store.sqlite_rows import PartRow

__all__ = [
    "DEEP_PARALLEL_FROM",
    "PARALLEL_FROM",
    "ranges",
    "stored_rows",
    "walk_chain",
    "walk_rows",
]

PARALLEL_FROM: Final = 50_000
"""Fewer seqs than this are walked in one process by default: a second one would not pay."""
DEEP_PARALLEL_FROM: Final = 5_000
"""The same for the deep walk, whose events cost some twenty times as much."""
_MOST_PROCESSES: Final = 4
"""More processes than this only fight over the same file."""

_OWN: Final = b'"contentHash":"'
_SKIP: Final = len(_OWN)
_PREV: Final = b',"prevHash":'
_SEQ: Final = b',"seq":'
_BATCH: Final = b',"batch":'
_TAIL: Final = b',"prevHash":"%s","schema":"pwf.event.v1","seq":%d,"type":"'
"""How a canonical body ends, up to its tag, after the event of hash ``%s`` at seq ``%d``."""
_SEQ_AFTER_PREV: Final = len(_TAIL) - len(b"%s%d" + _SEQ + b',"type":"') + 64
"""Where ``,"seq":`` starts after ``,"prevHash":`` in such a tail."""
_HASH_FAULT: Final = "content hash does not match the event's bytes"
_BYTES_ONLY_PRUNED: Final = (0, 1, 3, 4)
"""Where a row of :func:`_bytes_only` holds what :func:`pruned_at` reads."""
_COMPACTED_END: Final = b',"type":"log.compacted"}'
"""How the bytes of a ``log.compacted`` end."""


class _Part(NamedTuple):
    """What one range found: its start, its end, its first fault inside, where its rows stop."""

    first_prev: bytes
    """The raw ``prevHash`` member of the range's first event (empty when it has none)."""
    first_batch: int
    """The batch of the range's first event (-1 when it is not a number)."""
    last: Head
    """The last event walked (the range's start, when none was)."""
    fault: tuple[int, str] | None
    """The first bad seq inside the range and why, not counting its first event's links."""
    ended: bool
    """The log ends inside the range: no event follows ``last``."""


def ranges(first: int, last: int, parts: int) -> list[tuple[int, int]]:
    """Cut ``first..last`` into ``parts`` consecutive ranges of nearly equal size."""
    count = last - first + 1
    parts = max(1, min(parts, count))
    size, extra = divmod(count, parts)
    found, start = [], first
    for index in range(parts):
        stop = start + size + (1 if index < extra else 0) - 1
        found.append((start, stop))
        start = stop + 1
    return found


def walk_chain(  # noqa: PLR0913 - the walk's whole context
    path: Path,
    origin: Head,
    *,
    processes: int | None = None,
    upto: int | None = None,
    deep: bool = False,
    connection: sqlite3.Connection | None = None,
    proven: bool = False,
) -> Head:
    """Walk the log at ``path`` from ``origin``; return its last event's head.

    Every stored event is read, and one before ``origin`` is out of place;
    with ``proven`` (``origin`` a head an earlier walk proved) only those after it.
    ``processes`` is how many processes share the walk: None picks up to
    four, as many as this process may run on, for a log of at least
    :data:`PARALLEL_FROM` events, and one otherwise.  Each range reads in a
    snapshot of its own.  Without ``upto`` the walk covers the events stored
    when it starts, and the last range also those appended meanwhile that it
    sees.  With ``upto`` it stops after that seq, so a caller that read the
    head and ``max(seq)`` in one snapshot can pass that ``max(seq)``: events
    appended since are left out, events stored up to it cannot change but by
    tampering or compaction, and a fault found is worth confirming in that
    snapshot before it is reported.

    With ``deep`` every range also parses each event and compares its
    indexed columns, as ``pwf log verify`` does (:mod:`pwf.store.rows`);
    that costs some twenty times the bytes-only walk, so it is shared from
    :data:`DEEP_PARALLEL_FROM` events on.

    ``connection``, a caller's open connection to the same file, walks this
    process's range in the caller's transaction (a caller in a read
    transaction passes ``upto`` from it); without one the walk opens its own.

    Raises:
        ChainError: at the first bad seq, naming why.
        StoreError: the database cannot be read, or a walking process died.
    """
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        if connection is not None:
            return _walk_all(uri, connection, origin, processes, upto, deep=deep, proven=proven)
        opened = exact_text(sqlite3.connect(uri, uri=True))
        try:
            return _walk_all(uri, opened, origin, processes, upto, deep=deep, proven=proven)
        finally:
            opened.close()
    except sqlite3.Error as error:
        raise StoreError(f"{path}: {error}") from None


def _walk_all(  # noqa: PLR0913 - the walk's whole context
    uri: str,
    connection: sqlite3.Connection,
    origin: Head,
    processes: int | None,
    upto: int | None,
    *,
    deep: bool,
    proven: bool = False,
) -> Head:
    last = upto
    if last is None:
        found = connection.execute("SELECT max(seq) FROM events").fetchone()[0]
        last = found if isinstance(found, int) else origin.seq
    first = origin.seq + 1
    wanted = _default_processes(last - first + 1, deep) if processes is None else processes
    spans = ranges(first, last, wanted) if last >= first else [(first, first)]
    if len(spans) == 1 or not can_fork():
        part = _walk_on(connection, first if proven else None, upto, origin, deep)
        return _joined(origin, [part])
    start = first if proven else None
    return _walk_parallel(uri, connection, origin, spans, upto=upto, deep=deep, start=start)


def _default_processes(count: int, deep: bool) -> int:
    if count < (DEEP_PARALLEL_FROM if deep else PARALLEL_FROM):
        return 1
    return max(1, min(processors(), _MOST_PROCESSES))


def _walk_parallel(  # noqa: PLR0913 - the walk's whole context
    uri: str,
    connection: sqlite3.Connection,
    origin: Head,
    spans: list[tuple[int, int]],
    *,
    upto: int | None,
    deep: bool,
    start: int | None = None,
) -> Head:
    """Walk the first range here and every other in a forked process; join them in order.

    The first range reads from ``start`` (None: from the first stored event).
    """
    others: list[Forked[_Part]] = []
    try:
        for index, (low, high) in enumerate(spans[1:], start=1):
            bound = upto if index == len(spans) - 1 else high
            others.append(Forked(_walk, uri, low, bound, None, deep))
        parts = [_walk_on(connection, start, spans[0][1], origin, deep)]
        if parts[0].fault is None and not parts[0].ended:
            for other in others:
                parts.append(other.result())
                if parts[-1].fault is not None or parts[-1].ended:
                    break
        return _joined(origin, parts)
    finally:
        for other in others:
            other.close()


def _joined(origin: Head, parts: list[_Part]) -> Head:
    """Join the ranges in order: each boundary link, then each range's own first fault."""
    head = origin
    for index, part in enumerate(parts):
        seq = head.seq + 1
        if index > 0 and part.last.seq >= seq:  # its first event passed its own checks
            prev = _prev_text(part.first_prev)
            link(seq, prev, part.first_batch, head, opens=False, compacted=False)
        if part.fault is not None:
            raise ChainError(*part.fault)
        if part.last.seq > head.seq:
            head = part.last
        if part.ended:
            break
    return head


def walk_rows(rows: Iterable[tuple[object, ...]], origin: Head) -> Head:
    """Walk ``(seq, content_hash as bytes, body)`` rows from ``origin`` in this process.

    Raises:
        ChainError: at the first bad seq, naming why.
    """
    walk = _Range(origin.seq + 1, origin)
    walk.run(rows)
    return Head(seq=walk.seq, content_hash=walk.hash, batch=walk.batch)


def _walk(
    uri: str, low: int | None, high: int | None, origin: Head | None, deep: bool = False
) -> _Part:
    """Walk the rows with ``low <= seq <= high`` (either may be open) on a connection of its own.

    A forked range's walk; :func:`_walk_on` says what it checks.
    """
    opened = exact_text(sqlite3.connect(uri, uri=True))
    try:
        return _walk_on(opened, low, high, origin, deep)
    finally:
        opened.close()


def _bytes_only(rows: Iterator[PartRow]) -> Generator[tuple[object, ...], None, None]:
    """The bytes-only walk's rows of the log's ``rows`` (ADR 0109).

    Each is ``seq``, the content hash's hex as bytes, ``body``, ``batch``,
    ``prev_hash``; a pruned event (no body) is linked by its batch and prev hash.
    """
    for seq, body, content_hash, batch, prev_hash in rows:
        yield seq, content_hash.encode(), body, batch, prev_hash


def stored_rows(
    connection: sqlite3.Connection, low: int | None, high: int | None, *, deep: bool
) -> Generator[tuple[object, ...], None, None]:
    """The rows a walk reads of seqs ``low..high`` (either may be open: every stored row).

    Deep, rows of :data:`pwf.store.rows.COLUMNS`; else the bytes-only walk's
    (:func:`_bytes_only`).  Both are the ``events`` view's, read from the
    log's parts (ADR 0109).
    """
    bounds = (0 if low is None else low, LAST if high is None else high)
    return event_rows(connection, *bounds) if deep else _bytes_only(chain_rows(connection, *bounds))


def _walk_on(
    connection: sqlite3.Connection,
    low: int | None,
    high: int | None,
    origin: Head | None,
    deep: bool,
) -> _Part:
    """Walk the rows with ``low <= seq <= high`` (either may be open), deeply or not.

    With ``origin`` the range starts the log and every link is checked;
    without it the first event's ``prevHash`` and batch are only reported.
    """
    start = low if low is not None else (origin.seq + 1 if origin is not None else 1)
    rows = stored_rows(connection, low, high, deep=deep)
    walk = _DeepRange(start, origin) if deep else _Range(start, origin)
    try:
        walk.run(rows)
    except ChainError as error:
        return walk.part((error.seq, error.reason), ended=False)
    finally:
        rows.close()
    ended = False
    if high is not None and walk.seq < high:
        # The range ran out of rows early: a gap, or the end of the log.
        after = connection.execute(
            "SELECT min(seq) FROM events WHERE seq > ?", (walk.seq,)
        ).fetchone()[0]
        if after is None:
            ended = True
        else:
            missing = walk.seq + 1
            fault = (missing, f"seq {missing} is missing (next stored is {after})")
            return walk.part(fault, ended=False)
    return walk.part(None, ended=ended or high is None)


class _Range:
    """The walk of one range: the last good seq, hash and batch, and the range's first event."""

    def __init__(self, start: int, origin: Head | None) -> None:
        self.seq = start - 1
        self.origin = origin
        self.hash: str | None = origin.content_hash if origin is not None else None
        self.batch = origin.batch if origin is not None else 0
        self.first_prev = b""
        self.first_batch = -1

    def part(self, fault: tuple[int, str] | None, *, ended: bool) -> _Part:
        last = Head(seq=self.seq, content_hash=self.hash, batch=self.batch)
        return _Part(self.first_prev, self.first_batch, last, fault, ended)

    def run(self, rows: Iterable[tuple[object, ...]]) -> None:
        """Check every row; raise ChainError at the first fault."""
        iterator = iter(rows)
        for row in iterator:
            self._first(row)
            break
        else:
            return
        self._loop(iterator)

    def _first(self, row: tuple[object, ...]) -> None:
        """The range's first event; its links are checked here only when it opens the log."""
        seq = self.seq + 1
        if row[2] is None:  # pruned (ADR 0103)
            head = pruned_at(
                seq, row, self.origin, opens=self.origin is not None, at=_BYTES_ONLY_PRUNED
            )
            prev = row[4] if len(row) > 4 else None
            self.first_prev = _prev_value(prev.encode() if isinstance(prev, str) else b"")
            self.first_batch = head.batch
            self.seq, self.hash, self.batch = seq, head.content_hash, head.batch
            return
        own = _own_checks(seq, row)
        body = row[2]
        assert isinstance(body, bytes)
        self.first_prev = _member(body, _PREV, last=True)
        text = _member(body, _BATCH, last=False)
        self.first_batch = int(text) if text.isdigit() else -1
        opens = self.origin is not None
        link(
            seq,
            _prev_text(self.first_prev),
            self.first_batch,
            self.origin,
            opens=opens,
            compacted=body.endswith(_COMPACTED_END),
        )
        self.seq, self.hash, self.batch = seq, own.decode(), self.first_batch

    def _loop(self, rows: Iterable[tuple[object, ...]]) -> None:
        """Every later event: fast checks on the bytes, the exact ones when a fast one misses.

        The fast path needs each member in its canonical place: ``prevHash``,
        ``schema``, ``seq`` and ``type`` end the body in that order.  Any
        miss, fault or oddity takes :func:`_exact`, which decides as the
        sequential walk does.
        """
        sha256, find, rfind, starts = hashlib.sha256, bytes.find, bytes.rfind, bytes.startswith
        seq, batch = self.seq, self.batch
        own = (self.hash or "").encode()
        same, step = _batch_member(batch), _batch_member(batch + 1)
        try:
            for row in rows:
                seq += 1
                stored_seq, column_hash, body = row[0], row[1], row[2]
                if (
                    stored_seq == seq
                    and type(body) is bytes
                    and type(column_hash) is bytes
                    and (start := find(body, _OWN)) >= 0
                ):
                    digest = sha256(body[:start])
                    digest.update(body[start + _SKIP + 66 :])
                    if (
                        digest.hexdigest().encode() == column_hash
                        and not body.endswith(_COMPACTED_END)
                        and starts(body, column_hash + b'",', start + _SKIP)
                        and starts(body, _TAIL % (own, seq), tail := rfind(body, _PREV))
                        and rfind(body, _SEQ) == tail + _SEQ_AFTER_PREV
                    ):
                        found = find(body, _BATCH)
                        if starts(body, same, found):
                            own = column_hash
                            continue
                        if starts(body, step, found):
                            batch += 1
                            same, step = step, _batch_member(batch + 1)
                            own = column_hash
                            continue
                own, this = _exact(seq, row, own, batch)
                if this != batch:
                    batch = this
                    same, step = _batch_member(batch), _batch_member(batch + 1)
        except ChainError:
            self.seq, self.hash, self.batch = seq - 1, own.decode(), batch
            raise
        self.seq, self.hash, self.batch = seq, own.decode(), batch


class _DeepRange(_Range):
    """The deep walk of one range: each event parsed and its columns compared, then its links.

    The checks and their order are :func:`pwf.store.rows.verify_rows`'s; a
    range that does not open the log leaves its first event's links to the
    join, which compares the raw ``prevHash`` member as the bytes-only walk
    reports it.
    """

    def _first(self, row: tuple[object, ...]) -> None:
        seq = self.seq + 1
        origin = self.origin
        if row[BODY] is None:  # pruned (ADR 0103)
            head = pruned_at(seq, row, origin, opens=origin is not None)
            prev = row[10]
            self.first_prev = _prev_value(prev.encode() if isinstance(prev, str) else b"")
            self.first_batch = head.batch
            self.seq, self.hash, self.batch = seq, head.content_hash, head.batch
            return
        entry = check_event(seq, row)
        self.first_prev = _prev_value((entry.prev_hash or "").encode())
        self.first_batch = entry.batch
        check_link(seq, entry, origin, opens=origin is not None)
        self.seq, self.hash, self.batch = seq, entry.content_hash, entry.batch

    def _loop(self, rows: Iterable[tuple[object, ...]]) -> None:
        head = Head(seq=self.seq, content_hash=self.hash, batch=self.batch)
        try:
            for row in rows:
                seq = head.seq + 1
                if row[BODY] is None:  # pruned (ADR 0103)
                    head = pruned_at(seq, row, head, opens=False)
                    continue
                entry = check_event(seq, row)
                check_link(seq, entry, head, opens=False)
                head = Head(seq=seq, content_hash=entry.content_hash, batch=entry.batch)
        finally:
            self.seq, self.hash, self.batch = head.seq, head.content_hash, head.batch


def _exact(seq: int, row: tuple[object, ...], prev: bytes, batch: int) -> tuple[bytes, int]:
    """Every check of one event, in the sequential walk's order; its hash and batch.

    ``prev`` is the previous event's hash (empty before the first event).
    """
    before = Head(seq=seq - 1, content_hash=prev.decode() or None, batch=batch)
    if row[2] is None:  # pruned (ADR 0103)
        head = pruned_at(seq, row, before, opens=False, at=_BYTES_ONLY_PRUNED)
        return (head.content_hash or "").encode(), head.batch
    own = _own_checks(seq, row)
    body = row[2]
    assert isinstance(body, bytes)
    text = _member(body, _BATCH, last=False)
    this = int(text) if text.isdigit() else -1
    link(
        seq,
        _prev_text(_member(body, _PREV, last=True)),
        this,
        before,
        opens=False,
        compacted=body.endswith(_COMPACTED_END),
    )
    return own, this


def _own_checks(seq: int, row: tuple[object, ...]) -> bytes:
    """An event's seq, bytes, content hash and seq member; return its hash."""
    stored_seq, column_hash, body = row[0], row[1], row[2]
    check_position(seq, stored_seq)
    if not isinstance(body, bytes):
        raise ChainError(seq, "the stored body is not bytes")
    start = body.find(_OWN)
    if start < 0:
        raise ChainError(seq, "event has no contentHash member")
    at = start + _SKIP
    digest = hashlib.sha256(body[:start])
    digest.update(body[at + 66 :])
    own = body[at : at + 64]
    if digest.hexdigest().encode() != own or body[at + 64 : at + 66] != b'",' or own != column_hash:
        raise ChainError(seq, _HASH_FAULT)
    if _member(body, _SEQ, last=True) != str(seq).encode():
        raise ChainError(seq, "the seq in the stored bytes does not match its position")
    return own


def _prev_value(content_hash: bytes) -> bytes:
    """What ``prevHash`` must hold after the event of this hash (``null`` before the first)."""
    return b'"' + content_hash + b'"' if content_hash else b"null"


def _prev_text(raw: bytes) -> str | None:
    """The ``prevHash`` a raw member holds: None for ``null``, else the quoted text.

    Anything else (a missing member, a number) becomes text no content hash equals.
    """
    if raw == b"null":
        return None
    if len(raw) >= 2 and raw.startswith(b'"') and raw.endswith(b'"'):
        return raw[1:-1].decode(errors="replace")
    return "\x00" + raw.decode(errors="replace")


def _batch_member(batch: int) -> bytes:
    return b',"batch":%d,' % batch


def _member(body: bytes, marker: bytes, *, last: bool) -> bytes:
    """The raw value of a top-level member, found by its canonical position.

    Members before ``data`` are found from the start and members after it
    from the end, so keys nested inside ``data`` are never mistaken for them.
    """
    start = body.rfind(marker) if last else body.find(marker)
    if start < 0:
        return b""
    start += len(marker)
    end = body.find(b",", start)
    return body[start:end] if end >= 0 else body[start:-1]
