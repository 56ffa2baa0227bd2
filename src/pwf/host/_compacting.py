"""A prune's new database, built whole in a scratch file outside the write lock (ADR 0103).

A prune keeps every seq: the events of the removed run trees keep their
place, hashes and Merkle leaves in the log, and only their bytes go (to
the backup the prune has just written).  The projections of the pruned log
do not depend on anything the live head decides, so the backup's events
are folded into a scratch file beside the live database while writers carry
on (ADR 0047): the kept events folded as the original's prune leaves them
(:func:`pwf.events.compaction.compacted`), the log's rows copied as they are
stored with the removed events' bytes taken out and their leaf hashes kept
in ``_pwf_pruned``.  That file is the image of the whole database the live
file is to become (ADR 0051): the live file's page size, header marks and
schema, its projections and views.

Under the write lock :meth:`Prepared.install` has the caller check what it
must, then :meth:`Prepared.seal` copies the few events committed meanwhile
(:func:`tail`), prunes those of them that go, appends ``log.pruned`` after
the live head and folds both on top, and moves its checkpoints, tree and
head row; the image is then copied over the live file in the same write
transaction (:func:`pwf.store.image.install`).

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
from typing import TYPE_CHECKING, Final, TypeVar

from pwf import logs, merkle
from pwf._sqlite import exact_text, execute_many, transaction
from pwf.events import LogCompacted, LogPruned, open_body, seal
from pwf.events.compaction import compacted
from pwf.fold import scratchfiles
from pwf.fold.bulk import BulkFold
from pwf.fold.decode import decoded
from pwf.store.compaction import file_sha256
from pwf.store.image import begin_image, carry_over, finish_image, index_events
from pwf.store.log_writes import write
from pwf.store.opening import open_file
from pwf.store.rows import columns
from pwf.store.segment import Segment
from pwf.store.sqlite import translate_error
from pwf.store.sqlite_schema import HEAD_UPSERT
from pwf.store.tree import extend, load

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path

    from pwf.events import Actor, Cause, Entry, Event
    from pwf.store import FileTransaction, LogFile, StoredEvent
    from pwf.store.image import Shape

__all__ = ["Prepared", "Pruning", "prepared", "tail"]

T = TypeVar("T")

CHUNK: Final = 10_000
"""Backup events folded per scratch transaction, as a rebuild folds them (ADR 0013 D2)."""
KEPT_SCHEMA: Final = "kept"
"""The name the second scratch file is attached under: the leaves of the events that go."""
_PRAGMAS: Final = (
    "PRAGMA journal_mode = OFF",
    "PRAGMA main.cache_size = -131072",
    "PRAGMA main.synchronous = OFF",
    f"PRAGMA {KEPT_SCHEMA}.synchronous = OFF",
)
_GOING_DDL: Final = (
    f"CREATE TABLE {KEPT_SCHEMA}.going (seq INTEGER PRIMARY KEY, leaf BLOB NOT NULL) STRICT"
)
"""The seq and Merkle leaf hash of each event whose bytes the prune takes out."""
_GOING: Final = f"INSERT INTO {KEPT_SCHEMA}.going (seq, leaf) VALUES (?, ?)"  # noqa: S608
_LOG_ROWS: Final = tuple(
    f"INSERT INTO main.{table} SELECT * FROM {{src}}.{table} WHERE seq BETWEEN ? AND ?"  # noqa: S608 - constant names
    for table in ("_pwf_batches", "_pwf_events", "_pwf_whole", "_pwf_pruned")
)
"""Copy the log's rows of a seq range as they are stored (ADR 0102), from an attached file."""
_GONE: Final = f"SELECT seq FROM {KEPT_SCHEMA}.going WHERE seq BETWEEN ? AND ?"  # noqa: S608
_PRUNE: Final = (
    (
        "INSERT INTO main._pwf_pruned (seq, leaf, taken)"  # noqa: S608 - constant names
        f" SELECT seq, leaf, 0 FROM {KEPT_SCHEMA}.going WHERE seq BETWEEN ? AND ?"
    ),
    f"UPDATE main._pwf_events SET data = NULL WHERE seq IN ({_GONE})",  # noqa: S608
    f"DELETE FROM main._pwf_whole WHERE seq IN ({_GONE})",  # noqa: S608
)
"""Take the bytes out of the events that go in a seq range, keeping their leaves (ADR 0103).

Their prune is named under the lock, once its ``log.pruned`` has a seq (0 until then)."""


class Prepared:
    """The scratch files of one prune and how far into the backup they have got."""

    def __init__(self, path: Path, kept: Path, removed: frozenset[str], live: Shape) -> None:
        """Nothing folded yet; :meth:`extend` folds into ``path`` shaped like ``live``."""
        self.path = path
        self.kept = kept
        self.live = live
        self.segment = Segment(removed=removed, seq=0, dropped=0)
        self._model = BulkFold()
        self._indexed = False

    def connect(self) -> sqlite3.Connection:
        """The image, with the second scratch file attached as :data:`KEPT_SCHEMA`.

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
        """Fold the backup's events after :attr:`segment` into the image, and copy its log rows.

        The first call gives the image the live file's marks and log tables,
        folds the bulk without the projections' secondary indexes and CHECK
        constraints and adds them and the views after, as a rebuild does;
        later calls fold the events the backup gained since.  The log's rows
        are copied as stored, then the bytes of the events that go are taken
        out (their leaves kept).

        Raises:
            StoreError: the backup or a scratch file cannot be read or written.
        """
        connection = self.connect()
        try:
            if not self._indexed:
                begin_image(connection, self.live)
                with transaction(connection):
                    connection.execute(_GOING_DDL)
                    self._model.install(connection)
            with open_file(backup, read_only=True) as copy:  # a backup is a file
                last = copy.head().seq
                events = copy.read(self.segment.seq + 1, last)
                while rows := list(islice(events, chunk)):
                    with transaction(connection):
                        self._fold(connection, rows)
            connection.execute("ATTACH DATABASE ? AS src", (str(backup),))
            with transaction(connection):
                _copy_rows(connection, "src", self.segment.seq + 1, last)
            connection.execute("DETACH DATABASE src")
            self.segment = replace(self.segment, seq=last)
            if not self._indexed:
                # Off the lock, by a sort: the catch-ups' rows and the tail then
                # maintain the indexes, a few rows each.
                with transaction(connection):
                    self._model.create_indexes(connection)
                    index_events(connection, self.live)
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
            # Read under the install's write lock, for the events committed since the last fold.
            connection.execute("ATTACH DATABASE ? AS live", (str(store.path),))
            return store.install_image(connection, lambda tx: work(tx, connection))
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        finally:
            connection.close()

    def seal(  # noqa: PLR0913 - the prune's whole record
        self,
        tx: FileTransaction,
        image: sqlite3.Connection,
        backup: Path,
        *,
        cutoff: int,
        at: int,
        actor: Actor,
        cause: Cause | None,
    ) -> LogPruned:
        """Under the lock, bring the image to ``tx.head``, append ``log.pruned``, and the rest.

        The live events committed since the last fold are copied, pruned and
        folded on top; ``log.pruned`` is sealed after the live head and
        folded; the image's tree, checkpoints, head row and ``_pwf_meta``
        become the live file's moved to the new head, and its shape is
        checked against the live file's.  ``backup`` must hold exactly the
        live log up to ``tx.head``.

        Raises:
            StoreError: a write failed, or the live file is not shaped as this pwf makes it.
        """
        head = tx.head
        first = self.segment.seq + 1
        segment, kept, going = tail(tx, self.segment)
        try:
            with transaction(image):
                execute_many(image, _GOING, going)
                _copy_rows(image, "live", first, head.seq)
                image.execute("DELETE FROM main._pwf_tree")
                image.execute("INSERT INTO main._pwf_tree SELECT * FROM live._pwf_tree")
                pruned = LogPruned(
                    cutoff=cutoff,
                    removed_run_ids=tuple(sorted(segment.removed)),
                    removed_events=segment.dropped,
                    backup_path=str(backup.absolute()),
                    backup_sha256=file_sha256(backup),
                    backup_seq=head.seq,
                    backup_hash=head.content_hash,
                )
                sealed = seal(
                    pruned,
                    seq=head.seq + 1,
                    batch=head.batch + 1,
                    at=at,
                    actor=actor,
                    cause=cause,
                    event_id=f"evt-{head.seq + 1}",
                    prev_hash=head.content_hash,
                )
                tree = load(image, head)
                write(
                    image,
                    [(columns(sealed.entry), sealed.body)],
                    previous=head.content_hash,
                    new_batch=True,
                )
                extend(image, tree, sealed.entry.seq, [sealed.body])
                last = sealed.entry
                image.execute("UPDATE main._pwf_pruned SET taken = ? WHERE taken = 0", (last.seq,))
                image.execute(HEAD_UPSERT, (last.seq, last.content_hash, last.batch))
                BulkFold().fold(image, [*kept, last])
                carry_over(image, tx)
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        return pruned

    def _fold(self, connection: sqlite3.Connection, rows: Iterable[StoredEvent]) -> None:
        segment = self.segment
        # The backup's events were each checked whole: by its deep verify when it was
        # made, or one by one as it was caught up (``pwf.host._backup.catch_up``).
        walk = Pruning(segment.removed, proven=True)
        entries = [entry for stored in rows if (entry := walk.keep(stored)) is not None]
        execute_many(connection, _GOING, walk.going)
        self._model.fold(connection, entries)
        self.segment = replace(segment, dropped=segment.dropped + len(walk.going))


def _decoded(stored: StoredEvent) -> Entry:
    return decoded(stored.seq, stored.body)


def replace_event(entry: Entry, event: Event) -> Entry:
    """``entry`` folding ``event`` instead: a kept event the prune unlinks from a removed run.

    Only the fold sees it: the log keeps the event's bytes as they are, and
    ``log.pruned`` unlinks it in every fold after (ADR 0103).
    """
    from msgspec.structs import replace as replaced  # noqa: PLC0415 - a prune's only

    return replaced(entry, event=event)


def _copy_rows(connection: sqlite3.Connection, source: str, first: int, last: int) -> None:
    """Copy the log rows ``first..last`` from ``source``, then prune those that go."""
    if last < first:
        return
    for statement in _LOG_ROWS:
        connection.execute(statement.format(src=source), (first, last))
    for statement in _PRUNE:
        connection.execute(statement, (first, last))


class Pruning:
    """The prune's rule for each event (ADR 0103): folded (unlinked or not), or its bytes going.

    A ``log.compacted`` that opens a log compacted before stays whole and is
    not folded, as a fold never folds it.
    """

    def __init__(self, removed: frozenset[str], *, proven: bool = False) -> None:
        """Nothing walked yet; ``removed`` are the run ids whose trees go.

        ``proven``: each event walked was checked whole before (canonical,
        typed, its hash), so it is only decoded (:func:`pwf.fold.decode.decoded`).
        """
        self.removed = removed
        self.going: list[tuple[int, bytes]] = []
        """The seq and Merkle leaf hash of each event walked whose bytes go."""
        self._open: Callable[[StoredEvent], Entry] = (
            _decoded if proven else lambda stored: open_body(stored.body)
        )

    def keep(self, stored: StoredEvent) -> Entry | None:
        """The entry the fold takes of ``stored``, or None: its bytes go, or a ``log.compacted``."""
        entry = self._open(stored)
        event = compacted(entry.event, self.removed)
        if event is None:
            if not isinstance(entry.event, LogCompacted):
                self.going.append((stored.seq, merkle.leaf_hash(stored.body)))
            return None
        return entry if event is entry.event else replace_event(entry, event)


@contextlib.contextmanager
def prepared(database: Path, live: Shape, removed: frozenset[str]) -> Iterator[Prepared]:
    """New scratch files beside ``database``, deleted when the block ends, whatever happens.

    The image is shaped like the live file (``live``, its shape as read
    now).  Scratch files a killed fold or prune left beside it are swept
    first, each with a warning.
    """
    path, held = scratchfiles.make(f"{database.name}.rebuild-", database.parent)
    try:
        kept, holds = scratchfiles.make(f"{database.name}.rebuild-", database.parent)
        try:
            for orphan in scratchfiles.sweep(database, path):
                logs.warning("scratch.orphan_removed", path=str(orphan))
            yield Prepared(path, kept, removed, live)
        finally:
            scratchfiles.release(kept, holds)
    finally:
        scratchfiles.release(path, held)


def tail(
    tx: FileTransaction, segment: Segment
) -> tuple[Segment, list[Entry], list[tuple[int, bytes]]]:
    """What the live events after the prepared segment keep, under the write lock.

    Returns the segment with their drops counted, the entries to fold and
    the seq and leaf hash of each event that goes.
    """
    walk = Pruning(segment.removed)
    kept = [
        entry
        for stored in tx.store.read(segment.seq + 1, tx.head.seq)
        if (entry := walk.keep(stored)) is not None
    ]
    dropped = segment.dropped + len(walk.going)
    return replace(segment, dropped=dropped, seq=tx.head.seq), kept, walk.going
