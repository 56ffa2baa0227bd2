"""Proving a log compacted by an earlier pwf against its backup (ADR 0018).

Imports events, errors and the SQLite store (an edge room, like the store).
Before ADR 0103 a prune compacted the log: a ``log.compacted`` event that
continues the old head, followed by the backup's events that
:func:`pwf.events.compaction.compacted` keeps, re-sealed in order.  A prune
now keeps every seq (:mod:`pwf.host._compacting`), but logs compacted then
still open with that event: :func:`prove` repeats the walk from their
backup and compares it event by event with the live log, so an auditor
holding the backup can show that the compacted log is exactly the old one
minus the removed runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, get_args

from pwf import canonical
from pwf._sqlite import exact_text, execute
from pwf.errors import ChainError, InputError, PwfError
from pwf.events import Entry, LogCompacted, open_body
from pwf.events.compaction import compacted
from pwf.events.runs import TerminalStatus
from pwf.store import EMPTY, Head, check_link, check_position
from pwf.store.segment import (
    Kept,
)
from pwf.store.sqlite import SqliteStore
from pwf.store.sqlite_schema import translate_error

if TYPE_CHECKING:
    from collections.abc import Iterator
    from collections.abc import Set as AbstractSet
    from pathlib import Path

    from pwf.store import EventLog, EventStore

__all__ = ["Proof", "file_sha256", "prove"]

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


_TERMINAL: Final = get_args(TerminalStatus)


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
