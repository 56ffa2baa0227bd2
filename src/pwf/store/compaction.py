"""Compacting the log after a prune, and proving a compacted log against its backup.

Imports events, errors and the SQLite store (an edge room, like the store).
A compaction (DOMAIN §13.2, ADR 0018) replaces the live log, under the
prune's write lock, by a ``log.compacted`` event that continues the
old head, followed by the backup's events that :func:`pwf.events.compaction.compacted`
keeps, re-sealed in order: each keeps its time, actor, cause and batch
grouping; seq, batch numbers and hashes continue from the replaced head.
The kept events and the projections they fold into were prepared outside
the lock in a scratch file that becomes the whole compacted database (ADR
0047, 0051); :func:`compact` seals their templates after the live head,
into that file.

:func:`prove` repeats that walk from the backup and compares it event by
event with the live log, so an auditor holding the backup can show that the
compacted log is exactly the old one minus the removed runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pwf import canonical
from pwf._sqlite import exact_text, execute
from pwf.errors import ChainError, InputError, PwfError, StoreError
from pwf.events import Entry, LogCompacted, open_body, seal
from pwf.events.compaction import compacted
from pwf.store import EMPTY, Head, check_link, check_position
from pwf.store.log_writes import write
from pwf.store.rows import BODY, columns
from pwf.store.segment import (
    KEPT_SCHEMA,
    KEPT_TABLE,
    TEMPLATE_COLUMNS,
    Kept,
    Segment,
    sealed_rows,
)
from pwf.store.sqlite import SqliteStore
from pwf.store.sqlite_schema import HEAD_UPSERT, translate_error
from pwf.store.tree import build

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from collections.abc import Set as AbstractSet
    from pathlib import Path

    from pwf.events import Actor, Cause
    from pwf.store import EventLog, EventStore

__all__ = ["KEPT_SELECT", "Proof", "compact", "file_sha256", "prove"]

KEPT_SELECT: Final = (
    f"SELECT batch_index, {TEMPLATE_COLUMNS} FROM {KEPT_SCHEMA}.{KEPT_TABLE} ORDER BY n"  # noqa: S608
)
"""The templates in log order, as :func:`compact` seals them."""

_CHUNK: Final = 1 << 20


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _open_backup(path: Path) -> sqlite3.Connection:
    """The backup, read-only and immutable: reading it can never change its bytes."""
    try:
        connection = exact_text(
            sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
        )
        connection.execute("SELECT count(*) FROM events").fetchone()
    except sqlite3.Error as error:
        raise translate_error(error, path) from None
    return connection


def _kept(backup: sqlite3.Connection, removed: AbstractSet[str]) -> Iterator[Kept]:
    """The backup's events as the compacted log keeps them, numbering the batches that remain."""
    index, last_batch = 0, None
    for (body,) in backup.execute("SELECT body FROM events ORDER BY seq"):
        entry = open_body(body)
        event = compacted(entry.event, removed)
        if event is None:
            continue
        if entry.batch != last_batch:
            index, last_batch = index + 1, entry.batch
        yield Kept(batch_index=index, original=entry, event=event)


def compact(  # noqa: PLR0913 - the compaction's whole record
    image: sqlite3.Connection,
    head: Head,
    backup: Path,
    segment: Segment,
    tail: Sequence[Kept],
    *,
    cutoff: int,
    at: int,
    actor: Actor,
    cause: Cause | None,
    templates: Iterable[Sequence[Any]] | None = None,
) -> tuple[LogCompacted, list[Entry]]:
    """Write the compaction of the log ending at ``head`` into the image; the opening and the tail.

    ``image`` is the scratch database the live file is to become (ADR 0051),
    its ``events`` still empty, with the kept events of the backup up to
    ``segment.seq`` waiting as templates in its attached ``kept`` schema;
    ``tail`` is what the events after ``segment.seq`` keep.  ``backup``
    holds exactly the live log up to ``head`` (the caller has just brought
    it up to the head under the write lock).  ``log.compacted`` is sealed
    after ``head``, every kept event after it, and the head row moves to the
    last; the caller folds the returned tail into the image's projections.
    """
    try:
        if _backup_head(backup) != head:
            raise StoreError(f"{backup}: the backup does not end at the live head")
        opening = _opening(head, backup, segment, len(tail), cutoff)
        sealed = seal(
            opening,
            seq=head.seq + 1,
            batch=head.batch + 1,
            at=at,
            actor=actor,
            cause=cause,
            event_id=f"evt-{head.seq + 1}",
            prev_hash=head.content_hash,
        )
        write(image, [(columns(sealed.entry), sealed.body)], previous=None)
        last = _write_segment(image, sealed.entry, head.batch + 1, templates)
        last, entries = _write_tail(image, last, head.batch + 1, tail)
        image.execute(HEAD_UPSERT, (last.seq, last.content_hash, last.batch))
        build(image, last)  # the compacted log is a new tree, from its log.compacted (ADR 0083)
    except sqlite3.Error as error:
        raise translate_error(error, backup) from None
    return opening, entries


def _opening(head: Head, backup: Path, segment: Segment, tail: int, cutoff: int) -> LogCompacted:
    """The ``log.compacted`` event that replaces the log ending at ``head`` (DOMAIN §13.2)."""
    return LogCompacted(
        replaced_seq=head.seq,
        replaced_hash=head.content_hash or "",
        replaced_batch=head.batch,
        backup_path=str(backup.absolute()),
        backup_sha256=file_sha256(backup),
        cutoff=cutoff,
        removed_run_ids=tuple(sorted(segment.removed)),
        removed_events=segment.dropped,
        retained_events=segment.kept + tail,
    )


def _write_tail(
    image: sqlite3.Connection, last: Head, opening_batch: int, tail: Sequence[Kept]
) -> tuple[Head, list[Entry]]:
    """Seal the kept events after the segment behind ``last``; the new head and their entries.

    Each keeps its time, actor and cause, and its batch steps on from the
    opening's batch as its batch index says.
    """
    entries: list[Entry] = []
    for item in tail:
        original = item.original
        again = seal(
            item.event,
            seq=last.seq + 1,
            batch=opening_batch + item.batch_index,
            at=original.at,
            actor=original.actor,
            cause=original.cause,
            event_id=f"evt-{last.seq + 1}",
            prev_hash=last.content_hash,
        )
        write(image, [(columns(again.entry), again.body)], previous=last.content_hash)
        entries.append(again.entry)
        last = Head(again.entry.seq, again.entry.content_hash, again.entry.batch)
    return last, entries


def _write_segment(
    connection: sqlite3.Connection,
    opening: Entry,
    first_batch: int,
    templates: Iterable[Sequence[Any]] | None,
) -> Head:
    """Re-seal the kept events waiting as templates after ``opening``; the last head."""
    if templates is None:
        templates = connection.execute(KEPT_SELECT)
    rows = sealed_rows(
        templates, seq=opening.seq, first_batch=first_batch, prev_hash=opening.content_hash.encode()
    )
    write(
        connection,
        [(tuple(row[:BODY]), _bytes(row[BODY])) for row in rows],
        previous=opening.content_hash,
    )
    last = connection.execute(
        "SELECT seq, content_hash, batch FROM main.events ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    return Head(seq=last[0], content_hash=last[1], batch=last[2])


def _bytes(value: object) -> bytes:
    assert isinstance(value, bytes)
    return value


def _backup_head(backup: Path) -> Head:
    connection = _open_backup(backup)
    try:
        row = connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
    finally:
        connection.close()
    return EMPTY if row is None else Head(seq=row[0], content_hash=row[1], batch=row[2])


# --------------------------------------------------------------------------- proof


@dataclass(frozen=True)
class Proof:
    """What :func:`prove` established, or the first thing that failed."""

    compacted: LogCompacted | None
    backup_events: int = 0
    compared: int = 0
    removed_runs: int = 0
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """True when the live log is exactly the backup's log, compacted."""
        return self.compacted is not None and self.failure is None


def prove(store: EventStore, backup: Path) -> Proof:
    """Show that ``store``'s log is the compaction of the log in ``backup``.

    Checks, in order: the live log opens with ``log.compacted``; the backup's
    SHA-256 is the one recorded; the backup's own chain verifies and ends at
    the replaced head; every removed run was terminal and finished before the
    cutoff in the backup's projections; and walking the backup through the
    compaction rule gives the live events after ``log.compacted``, one for
    one (type, time, actor, cause, data, batch grouping).

    Raises:
        InputError: the backup is missing or the live log was never compacted.
    """
    origin = store.origin()
    if origin == EMPTY:
        raise InputError(f"{store.log_name}: the log was never compacted; nothing to prove")
    first = next(store.entries(origin.seq + 1, origin.seq + 1))
    opening = first.event
    assert isinstance(opening, LogCompacted)  # origin_of checked it
    if not backup.is_file():
        raise InputError(f"no backup at {backup}")
    if file_sha256(backup) != opening.backup_sha256:
        return Proof(opening, failure=f"{backup}: its SHA-256 is not the one log.compacted records")
    with contextlib.ExitStack() as held:
        try:
            copy = held.enter_context(SqliteStore(f"{backup.absolute()}", read_only=True))
            held.enter_context(copy.snapshot())  # one read of the backup, walked and compared
            report = copy.verify(deep=True)
            if not report.ok:
                return Proof(
                    opening,
                    failure=f"the backup's log is broken at seq {report.first_bad_seq}"
                    f" ({report.reason})",
                )
            if report.head != Head(
                opening.replaced_seq, opening.replaced_hash, opening.replaced_batch
            ):
                return Proof(opening, failure="the backup does not end at the replaced head")
            ineligible = _ineligible(copy.connection, opening)
            if ineligible is not None:
                return Proof(opening, failure=ineligible)
        except PwfError as error:
            return Proof(opening, failure=str(error))
        # The backup's own connection: a second one would read its whole schema again (ADR 0067).
        return _compare(store, copy.connection, opening, first)


_TERMINAL: Final = ("completed", "failed", "timed_out", "cancelled")


def _ineligible(connection: sqlite3.Connection, opening: LogCompacted) -> str | None:
    """The first removed run that the backup does not show finished before the cutoff."""
    for run_id in opening.removed_run_ids:
        row = execute(  # a run id with a lone surrogate is looked up exactly (ADR 0071)
            connection, "SELECT status, finished_at FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            return f"removed run {run_id} is not in the backup"
        status, finished_at = row
        if status not in _TERMINAL or finished_at is None or finished_at >= opening.cutoff:
            return f"removed run {run_id} was {status}, not finished before the cutoff"
    return None


def _compare(
    store: EventLog, connection: sqlite3.Connection, opening: LogCompacted, first: Entry
) -> Proof:
    """Walk the backup's events through the compaction rule against the live log's, one for one.

    ``connection`` reads the backup whose chain :func:`prove` has just verified.
    """
    removed = frozenset(opening.removed_run_ids)
    compared = 0
    head = store.head()
    try:
        live = _live(store, first.seq + 1)
        batch_base = first.batch
        before = Head(seq=first.seq, content_hash=first.content_hash, batch=first.batch)
        for kept in _kept(connection, removed):
            entry = next(live, None)
            if entry is None:
                missing = f"seq {before.seq + 1}: the live log ends early"
                return Proof(opening, compared=compared, failure=missing)
            _linked(entry, before)
            before = Head(seq=entry.seq, content_hash=entry.content_hash, batch=entry.batch)
            mismatch = _mismatch(kept, entry, batch_base)
            if mismatch is not None:
                return Proof(opening, compared=compared, failure=f"seq {entry.seq}: {mismatch}")
            compared += 1
        for entry in live:  # what was appended since the compaction: links only
            _linked(entry, before)
            before = Head(seq=entry.seq, content_hash=entry.content_hash, batch=entry.batch)
        _at_head(before, head)
        total = connection.execute("SELECT count(*) FROM events").fetchone()[0]
    except (ChainError, InputError) as error:
        return Proof(opening, compared=compared, failure=str(error))
    if compared != opening.retained_events or total - compared != opening.removed_events:
        return Proof(opening, compared=compared, failure="the recorded event counts do not match")
    return Proof(opening, backup_events=total, compared=compared, removed_runs=len(removed))


def _at_head(last: Head, head: Head) -> None:
    """The walk ended at the head row (or past it, at events appended meanwhile).

    Raises:
        ChainError: the log ends before its head, or its last event is not the head's.
    """
    if last.seq < head.seq:
        raise ChainError(last.seq + 1, f"the log ends at seq {last.seq} but its head does not")
    if last.seq == head.seq and last != head:
        raise ChainError(head.seq, "the log's head does not match its last event")


def _live(store: EventLog, first: int) -> Iterator[Entry]:
    """The live events from ``first``, each checked on its own; a bad one names its seq.

    Raises:
        ChainError: an event's bytes are not a sound event.
    """
    for stored in store.read(first):
        try:
            yield open_body(stored.body)
        except InputError as error:
            raise ChainError(stored.seq, str(error)) from None


def _linked(entry: Entry, before: Head) -> None:
    """The live event follows the one before it by the one link rule.

    Raises:
        ChainError: it does not.
    """
    check_position(before.seq + 1, entry.seq)
    compacted = isinstance(entry.event, LogCompacted)
    check_link(entry.seq, entry.prev_hash, entry.batch, before, opens=False, compacted=compacted)


def _mismatch(kept: Kept, entry: Entry, batch_base: int) -> str | None:
    original = kept.original
    if entry.type != kept.event.TAG:
        return f"{entry.type} where the backup's seq {original.seq} gives {kept.event.TAG}"
    if (entry.at, entry.actor, entry.cause) != (original.at, original.actor, original.cause):
        return f"time, actor or cause differ from the backup's seq {original.seq}"
    if canonical.encode(entry.event) != canonical.encode(kept.event):
        return f"data differs from the backup's seq {original.seq}"
    if entry.batch != batch_base + kept.batch_index:
        return f"batch {entry.batch} does not group like the backup's seq {original.seq}"
    return None
