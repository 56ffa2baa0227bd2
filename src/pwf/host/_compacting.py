"""A prune's compacted database, built whole in a scratch file outside the write lock.

The projections of the compacted log do not depend on where it will stand:
a projection reads an event's data and time, never its seq, batch or
hashes.  So the kept events of the backup are folded into a scratch file
beside the live database while writers carry on (ADR 0047), and stored as
:class:`pwf.store.segment.Template` rows in a second scratch file attached
beside it.  The first file is the image of the whole database the live
file is to become (ADR 0051): the live file's page size, header marks and
schema, its projections and views, the log's tables still empty.

Under the write lock :meth:`Prepared.install` has the caller check what it
must, then :meth:`Prepared.seal` seals the templates after the live head
into the image, folds the few events committed meanwhile (:func:`tail`) on
top and moves its checkpoints and head row; the image is then copied over
the live file in the same write transaction (:func:`pwf.store.image.install`).

The scratch files are held while they live and swept by the next fold of
the database if a killed prune left them (:mod:`pwf.fold.scratchfiles`);
neither is the live database, so a crash anywhere before the install's
commit leaves the live file as it was.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import replace
from itertools import islice
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pwf import logs
from pwf._sqlite import exact_text, execute_many, transaction
from pwf.events import open_body, seal
from pwf.events.compaction import compacted
from pwf.fold import scratchfiles
from pwf.fold.bulk import BulkFold
from pwf.store.compaction import KEPT_SELECT, compact
from pwf.store.image import begin_image, carry_over, finish_image, index_events
from pwf.store.opening import open_file
from pwf.store.rows import columns
from pwf.store.segment import (
    KEPT_DDL,
    KEPT_SCHEMA,
    KEPT_TABLE,
    TEMPLATE_COLUMNS,
    Kept,
    Segment,
    Template,
)
from pwf.store.sqlite import translate_error

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path

    from pwf.events import Actor, Cause, Entry, Event, LogCompacted
    from pwf.store import FileTransaction, LogFile, StoredEvent
    from pwf.store.image import Shape

__all__ = ["Prepared", "prepared", "tail"]

T = TypeVar("T")

READ_AHEAD: Final = 256 << 20
"""Template bytes read into memory before the write lock is taken, at most."""
CHUNK: Final = 10_000
"""Backup events folded per scratch transaction, as a rebuild folds them (ADR 0013 D2)."""
_PRAGMAS: Final = (
    "PRAGMA journal_mode = OFF",
    "PRAGMA main.cache_size = -131072",
    "PRAGMA main.synchronous = OFF",
    f"PRAGMA {KEPT_SCHEMA}.synchronous = OFF",
)
_INSERT: Final = (
    f"INSERT INTO {KEPT_SCHEMA}.{KEPT_TABLE} (n, batch_index, {TEMPLATE_COLUMNS})"  # noqa: S608
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


class Prepared:
    """The scratch files of one compaction and how far into the backup they have got."""

    def __init__(self, path: Path, kept: Path, removed: frozenset[str], live: Shape) -> None:
        """Nothing folded yet; :meth:`extend` folds into ``path`` shaped like ``live``."""
        self.path = path
        self.kept = kept
        self.live = live
        self.segment = Segment(removed=removed, seq=0, kept=0, dropped=0, batch_index=0, batch=None)
        self._model = BulkFold()
        self._indexed = False
        self.templates: list[tuple[Any, ...]] | None = None
        """The templates read ahead by :meth:`read_ahead`, or None: read under the lock."""

    def read_ahead(self, budget: int = READ_AHEAD) -> None:
        """Read the templates into memory, off the lock, when their bytes fit in ``budget``.

        The write lock then spends no time reading them; a larger segment is
        read as it is sealed.

        Raises:
            StoreError: the templates' file cannot be read.
        """
        connection = self.connect()
        try:
            size = connection.execute(
                "SELECT coalesce(sum(length(opening) + length(cause) + length(data)), 0)"  # noqa: S608
                f" FROM {KEPT_SCHEMA}.{KEPT_TABLE}"
            ).fetchone()[0]
            self.templates = (
                [tuple(row) for row in connection.execute(KEPT_SELECT)] if size <= budget else None
            )
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        finally:
            connection.close()

    def connect(self) -> sqlite3.Connection:
        """The image, with the templates' file attached as :data:`KEPT_SCHEMA`.

        Raises:
            StoreError: either file cannot be opened.
        """
        try:
            connection = exact_text(sqlite3.connect(self.path, isolation_level=None))
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        try:
            connection.execute(f"ATTACH DATABASE ? AS {KEPT_SCHEMA}", (str(self.kept),))
            for pragma in _PRAGMAS:
                connection.execute(pragma)
        except sqlite3.Error as error:
            connection.close()
            raise translate_error(error, self.path) from None
        return connection

    def extend(self, backup: Path, chunk: int = CHUNK) -> None:
        """Fold the backup's events after :attr:`segment` into the scratch files.

        The first call gives the image the live file's marks and log tables,
        folds the bulk without the projections' secondary indexes and CHECK
        constraints and adds them and the views after, as a rebuild does;
        later calls fold the events the backup gained since.

        Raises:
            StoreError: the backup or a scratch file cannot be read or written.
        """
        connection = self.connect()
        try:
            if not self._indexed:
                begin_image(connection, self.live)
                with transaction(connection):
                    connection.execute(KEPT_DDL)
                    self._model.install(connection)
            with open_file(backup, read_only=True) as copy:  # a backup is a file
                events = copy.read(self.segment.seq + 1)
                while rows := list(islice(events, chunk)):
                    with transaction(connection):
                        self._fold(connection, rows)
            if not self._indexed:
                with transaction(connection):
                    self._model.create_indexes(connection)
                    finish_image(connection, self.live)
                self._indexed = True
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        finally:
            connection.close()

    def install(
        self, store: LogFile, work: Callable[[FileTransaction, sqlite3.Connection], T]
    ) -> T:
        """Copy the image over ``store``'s file in one write transaction, ``work`` done first.

        ``work`` is given a read transaction of the live file through a
        connection of its own, which sees the last commit since the write
        lock is held, and the image's connection; what it returns is
        returned once the image is installed.  An exception from it leaves
        the live file as it was.

        Raises:
            StoreError: the lock was not free in time or the copy failed.
        """
        connection = self.connect()
        try:
            return store.install_image(connection, lambda tx: work(tx, connection))
        finally:
            connection.close()

    def seal(  # noqa: PLR0913 - the compaction's whole record
        self,
        tx: FileTransaction,
        image: sqlite3.Connection,
        backup: Path,
        *,
        cutoff: int,
        at: int,
        actor: Actor,
        cause: Cause | None,
    ) -> LogCompacted:
        """Under the lock, write the compacted log after ``tx.head`` into the image, and the rest.

        The templates are sealed after ``log.compacted``, the events committed
        since the last fold are sealed after them and folded on top; the
        image's checkpoints, head row and ``_pwf_meta`` become the live
        file's moved to the new head, and its shape is checked against the
        live file's.  ``backup`` must hold exactly the live log up to
        ``tx.head``.

        Raises:
            StoreError: a write failed, or the live file is not shaped as this pwf makes it.
        """
        segment, kept = tail(tx, self.segment)
        try:
            with transaction(image):
                opening, entries = compact(
                    image,
                    tx.head,
                    backup,
                    segment,
                    kept,
                    cutoff=cutoff,
                    at=at,
                    actor=actor,
                    cause=cause,
                    templates=self.templates,
                )
                self.templates = None
                index_events(image, self.live)
                BulkFold().fold(image, entries)
                carry_over(image, tx)
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        return opening

    def _fold(self, connection: sqlite3.Connection, rows: Iterable[StoredEvent]) -> None:
        segment = self.segment
        kept = segment.kept
        walk = _Renumbering(segment)
        templates: list[tuple[object, ...]] = []
        entries: list[Entry] = []
        for stored in rows:
            found = walk.keep(stored)
            if found is None:
                continue
            entry, event = found
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
            templates.append((kept, walk.index, *Template.of(body, entry), *columns(entry)[2:9]))
            entries.append(entry)
        execute_many(connection, _INSERT, templates)
        self._model.fold(connection, entries)
        self.segment = Segment(
            removed=segment.removed,
            seq=walk.seq,
            kept=kept,
            dropped=walk.dropped,
            batch_index=walk.index,
            batch=walk.batch,
        )


class _Renumbering:
    """The compaction's rule for each event after a segment: dropped, or kept in a new batch.

    A kept event whose original batch differs from the last kept one's
    opens the next batch index.
    """

    def __init__(self, segment: Segment) -> None:
        self.removed = segment.removed
        self.seq = segment.seq
        self.dropped = segment.dropped
        self.index = segment.batch_index
        self.batch = segment.batch

    def keep(self, stored: StoredEvent) -> tuple[Entry, Event] | None:
        """The entry and the event kept of it (``index`` is then its batch), or None: dropped."""
        self.seq = stored.seq
        entry = open_body(stored.body)
        event = compacted(entry.event, self.removed)
        if event is None:
            self.dropped += 1
            return None
        if entry.batch != self.batch:
            self.index, self.batch = self.index + 1, entry.batch
        return entry, event


@contextlib.contextmanager
def prepared(store: LogFile, removed: frozenset[str]) -> Iterator[Prepared]:
    """New scratch files beside the live database, deleted when the block ends, whatever happens.

    The image is shaped like the live file as it stands now.  Scratch files
    a killed fold or prune left beside it are swept first, each with a warning.

    Raises:
        StoreError: the live file's shape cannot be read.
    """
    live = store.shape()
    path, held = scratchfiles.make(f"{store.path.name}.rebuild-", store.path.parent)
    try:
        kept, holds = scratchfiles.make(f"{store.path.name}.rebuild-", store.path.parent)
        try:
            for orphan in scratchfiles.sweep(store.path, path):
                logs.warning("scratch.orphan_removed", path=str(orphan))
            yield Prepared(path, kept, removed, live)
        finally:
            scratchfiles.release(kept, holds)
    finally:
        scratchfiles.release(path, held)


def tail(tx: FileTransaction, segment: Segment) -> tuple[Segment, list[Kept]]:
    """What the live events after the prepared segment keep, under the write lock.

    Returns the segment with their drops counted and the kept ones, numbered
    on from the segment's batches.
    """
    walk = _Renumbering(segment)
    kept: list[Kept] = []
    for stored in tx.store.read(segment.seq + 1, tx.head.seq):
        found = walk.keep(stored)
        if found is not None:
            kept.append(Kept(batch_index=walk.index, original=found[0], event=found[1]))
    return replace(segment, dropped=walk.dropped, batch_index=walk.index, batch=walk.batch), kept
