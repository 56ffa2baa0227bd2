"""A prune's compacted segment, prepared in a scratch file outside the write lock (ADR 0047).

The projections of the compacted log do not depend on where it will stand:
a projection reads an event's data and time, never its seq, batch or
hashes.  So the kept events of the backup are folded into a scratch file
beside the live database while writers carry on, and stored there as
:class:`pwf.store.segment.Template` rows.  Under the write lock
:func:`pwf.store.compaction.compact` then only seals the templates after the
live head, copies the folded tables whole and adds the few events committed
meanwhile (:func:`tail`).

The scratch file is held while it lives and swept by the next fold of the
database if a killed prune left it (:mod:`pwf.fold.scratchfiles`); it is never
the live database, so a crash anywhere before the compaction's commit
leaves the live file as it was.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import replace
from itertools import islice
from typing import TYPE_CHECKING, Final

from pwf import logs
from pwf._sqlite import transaction
from pwf.events import open_body, seal
from pwf.events.compaction import compacted
from pwf.fold import scratchfiles
from pwf.fold.bulk import BulkFold
from pwf.readmodel import CHECKPOINT_TABLE
from pwf.store.compaction import compact
from pwf.store.rows import columns
from pwf.store.segment import KEPT_DDL, KEPT_TABLE, TEMPLATE_COLUMNS, Kept, Segment, Template
from pwf.store.sqlite import SqliteStore, translate_error

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

    from pwf.events import Actor, Cause, Entry, LogCompacted
    from pwf.store import StoredEvent
    from pwf.store.sqlite import SqliteTransaction

__all__ = ["Prepared", "prepared", "swap", "tail"]

CHUNK: Final = 10_000
"""Backup events folded per scratch transaction, as a rebuild folds them (ADR 0013 D2)."""
_PRAGMAS: Final = ("PRAGMA journal_mode = OFF", "PRAGMA synchronous = OFF")
_INSERT: Final = (
    f"INSERT INTO {KEPT_TABLE} (n, batch_index, {TEMPLATE_COLUMNS})"  # noqa: S608 - constants
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


class Prepared:
    """The scratch file of one compaction and how far into the backup it has got."""

    def __init__(self, path: Path, removed: frozenset[str]) -> None:
        """Nothing folded yet; :meth:`extend` folds."""
        self.path = path
        self.segment = Segment(removed=removed, seq=0, kept=0, dropped=0, batch_index=0, batch=None)
        self._model = BulkFold()
        self._indexed = False

    def extend(self, backup: Path, chunk: int = CHUNK) -> None:
        """Fold the backup's events after :attr:`segment` into the scratch file.

        The first call folds the bulk without the projections' secondary
        indexes and CHECK constraints and adds them after, as a rebuild does;
        later calls fold the events the backup gained since.

        Raises:
            StoreError: the backup or the scratch file cannot be read or written.
        """
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            for pragma in _PRAGMAS:
                connection.execute(pragma)
            if not self._indexed:
                with transaction(connection):
                    connection.execute(CHECKPOINT_TABLE)
                    connection.execute(KEPT_DDL)
                    self._model.install(connection)
            with SqliteStore(backup, read_only=True) as copy:
                events = copy.read(self.segment.seq + 1)
                while rows := list(islice(events, chunk)):
                    with transaction(connection):
                        self._fold(connection, rows)
            if not self._indexed:
                with transaction(connection):
                    self._model.create_indexes(connection)
                self._indexed = True
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        finally:
            connection.close()

    def _fold(self, connection: sqlite3.Connection, rows: Iterable[StoredEvent]) -> None:
        segment = self.segment
        kept, dropped = segment.kept, segment.dropped
        index, batch = segment.batch_index, segment.batch
        templates: list[tuple[object, ...]] = []
        entries: list[Entry] = []
        seq = segment.seq
        for stored in rows:
            seq = stored.seq
            entry = open_body(stored.body)
            event = compacted(entry.event, segment.removed)
            if event is None:
                dropped += 1
                continue
            if entry.batch != batch:
                index, batch = index + 1, entry.batch
            body = stored.body
            if event is not entry.event:
                again = seal(
                    event,
                    seq=entry.seq,
                    batch=entry.batch,
                    at=entry.at,
                    actor=entry.actor,
                    cause=entry.cause,
                    event_id=entry.event_id,
                    prev_hash=entry.prev_hash,
                )
                entry, body = again.entry, again.body
            kept += 1
            templates.append((kept, index, *Template.of(body, entry), *columns(entry)[2:9]))
            entries.append(entry)
        connection.executemany(_INSERT, templates)
        self._model.fold(connection, entries)
        self.segment = Segment(
            removed=segment.removed,
            seq=seq,
            kept=kept,
            dropped=dropped,
            batch_index=index,
            batch=batch,
        )


@contextlib.contextmanager
def prepared(store: SqliteStore, removed: frozenset[str]) -> Iterator[Prepared]:
    """A new scratch file beside the live database, deleted when the block ends, whatever happens.

    Scratch files a killed fold or prune left beside it are swept first, each with a warning.
    """
    path, held = scratchfiles.make(f"{store.path.name}.rebuild-", store.path.parent)
    try:
        for orphan in scratchfiles.sweep(store.path, path):
            logs.warning("scratch.orphan_removed", path=str(orphan))
        yield Prepared(path, removed)
    finally:
        scratchfiles.release(path, held)


def tail(tx: SqliteTransaction, segment: Segment) -> tuple[Segment, list[Kept]]:
    """What the live events after the prepared segment keep, under the write lock.

    Returns the segment with their drops counted and the kept ones, numbered
    on from the segment's batches.
    """
    index, batch, dropped = segment.batch_index, segment.batch, segment.dropped
    kept: list[Kept] = []
    for stored in tx.store.read(segment.seq + 1, tx.head.seq):
        entry = open_body(stored.body)
        event = compacted(entry.event, segment.removed)
        if event is None:
            dropped += 1
            continue
        if entry.batch != batch:
            index, batch = index + 1, entry.batch
        kept.append(Kept(batch_index=index, original=entry, event=event))
    return replace(segment, dropped=dropped, batch_index=index, batch=batch), kept


def swap(  # noqa: PLR0913 - the compaction's whole record
    tx: SqliteTransaction,
    backup: Path,
    scratch: Prepared,
    *,
    cutoff: int,
    at: int,
    actor: Actor,
    cause: Cause | None,
) -> LogCompacted:
    """Compact the live log from ``scratch`` (attached) and fold the tail on top, in ``tx``.

    ``backup`` must hold exactly the live log up to ``tx.head``.
    """
    segment, kept = tail(tx, scratch.segment)
    opening, entries = compact(
        tx, backup, segment, kept, cutoff=cutoff, at=at, actor=actor, cause=cause
    )
    BulkFold().fold(tx.connection, entries)
    return opening
