"""The embedded event store: log and projections in one SQLite file.

Imports canonical, events and errors (plus sqlite3: this is an edge room); its
schema and errors are :mod:`pwf.store.sqlite_schema`'s, its write transaction
:mod:`pwf.store.sqlite_transaction`'s, and both are re-exported here.
One command is one batch is one write transaction (ADR 0005): ``BEGIN
IMMEDIATE`` takes the write lock, the caller decides from the projections it
can read through the same connection, the batch is sealed against the head
read *inside* the transaction, append hooks project it and advance their
checkpoints, and the commit makes all of it durable at once.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Self, TypeVar

from pwf._sqlite import exact_text, execute, transaction
from pwf.errors import (
    ChainError,
    InputError,
    NotPwfDatabaseError,
    StoreError,
)
from pwf.events import Actor, Cause, Entry, Event, Sealed, open_body
from pwf.sqlreader import RowReader
from pwf.store import EMPTY, AppendHook, Head, StoredEvent, VerifyReport, origin_of
from pwf.store.rows import COLUMNS, verify_rows
from pwf.store.sealing import lookup, report
from pwf.store.sqlite_schema import (
    APPLICATION_ID,
    FORMAT,
    HEAD_UPSERT,
    SCHEMA,
    Synchronous,
    prepare_file,
    translate_error,
    wrong_format,
)
from pwf.store.sqlite_transaction import SqliteTransaction

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterator, Sequence
    from contextlib import AbstractContextManager

    from pwf.store.image import Shape
    from pwf.store.sqlite_checkpoint import Checkpointer
    from pwf.store.tree import Tree
    from pwf.store.unit import Observe, Outcome, Work

__all__ = [
    "APPLICATION_ID",
    "FORMAT",
    "HEAD_UPSERT",
    "SCHEMA",
    "SqliteStore",
    "SqliteTransaction",
    "Synchronous",
    "translate_error",
]


T = TypeVar("T")


class SqliteStore:
    """A hash-chained event log in one SQLite file (WAL, ``synchronous=FULL`` by default)."""

    def __init__(  # noqa: PLR0913 - each keyword is an operator setting
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 5_000,
        hooks: Sequence[AppendHook] = (),
        read_only: bool = False,
        serving: bool = False,
        deciding: bool = False,
    ) -> None:
        """Open (or with ``create`` make) the database at ``path``.

        ``serving`` tunes the connection for one long-lived writer that
        commits many savepoints per transaction (a served host, ADR 0057):
        savepoint journals stay in memory instead of spilling to a
        temporary file, and checkpoints run on a thread of their own
        (:class:`pwf.store.sqlite_checkpoint.Checkpointer`) instead of inside
        the commits; :meth:`close` stops that thread.  ``deciding`` keeps
        only the savepoint journals in memory (direct mode's ``pwf request``
        and ``pwf worker``: one transaction per command, ADR 0061).

        Raises:
            InputError: the database does not exist and ``create`` is false.
            StoreError: SQLite refused to open it or it is not a pwf database.
        """
        self.path = Path(path).absolute()
        self.hooks: list[AppendHook] = list(hooks)
        self.checkpointer: Checkpointer | None = None
        self.tree_cache: tuple[Head, Tree] | None = None
        """The Merkle tree as the last commit of this connection left it, with its head."""
        if self.path.is_dir():
            raise InputError(f"{self.path} is a directory, not a database file")
        if not self.path.exists():
            if not create:
                raise InputError(f"no state database at {self.path} (run `pwf init` first)")
            prepare_file(self.path)
        try:
            uri = f"{self.path.as_uri()}?mode={'ro' if read_only else 'rw'}"
            self.connection = exact_text(
                sqlite3.connect(uri, uri=True, isolation_level=None, timeout=busy_timeout_ms / 1000)
            )
            self.connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self.connection.execute(f"PRAGMA synchronous = {synchronous}")
            self.connection.execute("PRAGMA foreign_keys = ON")
            # Nothing is written before the file is known to be pwf's (or empty):
            # the install refuses another program's tables, and the format check
            # comes before the switch to WAL, which rewrites the header.
            if create:
                self._install()
            self._check_format()
            if not read_only:
                self.connection.execute("PRAGMA journal_mode = WAL")
            if serving and not read_only:
                self._serve()
            elif deciding and not read_only:
                self.connection.execute("PRAGMA temp_store = MEMORY")
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None

    def _serve(self) -> None:
        """Savepoint journals in memory, checkpoints on their own thread (ADR 0057)."""
        from pwf.store.sqlite_checkpoint import BOUND_PAGES, Checkpointer  # noqa: PLC0415

        self.connection.execute("PRAGMA temp_store = MEMORY")
        self.connection.execute(f"PRAGMA wal_autocheckpoint = {BOUND_PAGES}")
        self.checkpointer = Checkpointer(self.path, self.synchronous_level)

    def _install(self) -> None:
        with self._immediate():
            names = {row[0] for row in self.connection.execute("SELECT name FROM sqlite_master")}
            if names and "_pwf_meta" not in names:
                raise NotPwfDatabaseError(
                    f"{self.path}: holds another program's tables; not a pwf database"
                )
            if names:
                self._check_format()
            for statement in SCHEMA:
                self.connection.execute(statement)
            self.connection.execute(
                "INSERT OR IGNORE INTO _pwf_meta (key, value) VALUES ('format', ?)", (FORMAT,)
            )
            self.connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _check_format(self) -> None:
        try:
            row = self.connection.execute(
                "SELECT value FROM _pwf_meta WHERE key = 'format'"
            ).fetchone()
        except sqlite3.OperationalError:
            row = None
        application = self.connection.execute("PRAGMA application_id").fetchone()[0]
        if application not in (0, APPLICATION_ID):
            raise NotPwfDatabaseError(
                f"{self.path}: not a pwf database (application_id {application},"
                f" pwf's is {APPLICATION_ID})"
            )
        if row is None or row[0] != FORMAT:
            raise wrong_format(self.path, None if row is None else row[0])

    @property
    def log_file(self) -> SqliteStore:
        """This file: it is the log of record, which file maintenance acts on."""
        return self

    @property
    def projections_file(self) -> SqliteStore:
        """This file holds the projections too."""
        return self

    @property
    def log_name(self) -> str:
        """What messages call the log of record: this file."""
        return str(self.path)

    def catch_up(self) -> int:
        """Nothing to fold: this file is the log of record."""
        return 0

    def reader(self) -> RowReader:
        """Read the committed projections (outside any write transaction of this store)."""
        return RowReader(self.connection)

    @contextmanager
    def snapshot(self) -> Iterator[RowReader]:
        """Read one committed moment of the projections (the open transaction's, inside one)."""
        with self._snapshot():
            yield self.reader()

    @property
    def busy_timeout_ms(self) -> int:
        """How long a writer waits for the write lock, as this connection has it."""
        return int(self.connection.execute("PRAGMA busy_timeout").fetchone()[0])

    @property
    def synchronous_level(self) -> int:
        """This connection's ``PRAGMA synchronous`` (0 OFF to 3 EXTRA), for files it attaches."""
        return int(self.connection.execute("PRAGMA synchronous").fetchone()[0])

    def checkpoint(self) -> None:
        """Move the write-ahead log into the file and truncate it (after a bulk write).

        A passive checkpoint moves the bulk while writers carry on; the
        truncating one after it has only what they wrote meanwhile left.
        """
        try:
            self.connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None

    def upgrade(
        self,
        current: Callable[[sqlite3.Connection], bool],
        install: Callable[[sqlite3.Connection], object],
    ) -> None:
        """Install schema that is not ``current``: asked first by reading, then under the lock.

        A file whose schema is current is not written at all.
        """
        if current(self.connection):
            return
        with self.file_transaction():
            if not current(self.connection):
                install(self.connection)

    def install(self, *installers: Callable[[sqlite3.Connection], object]) -> None:
        """Create schema beside the log (the projections' tables, the views) in one transaction.

        It is this file's own transaction, also when it is a mirror's local file.
        """
        with self.file_transaction():
            for install in installers:
                install(self.connection)

    def close(self) -> None:
        """Close the connection (and stop the checkpoint thread)."""
        if self.checkpointer is not None:
            self.checkpointer.close()  # first: the last connection to close checkpoints
            self.checkpointer = None
        self.connection.close()

    def __enter__(self) -> Self:
        """Use as a context manager that closes on exit."""
        return self

    def __exit__(self, *_: object) -> None:
        """Close the connection."""
        self.close()

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield self.connection
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def transaction(self) -> AbstractContextManager[SqliteTransaction]:
        """Take the write lock; decide and append inside; commit on exit, roll back on error."""
        return self.file_transaction()

    @contextmanager
    def file_transaction(self) -> Iterator[SqliteTransaction]:
        """This file's own write transaction (a mirror's catch-up and schema installs use it)."""
        try:
            with self._immediate() as connection:
                transaction = SqliteTransaction(self, connection)
                yield transaction
                transaction.settle()
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        if self.checkpointer is not None:
            self.checkpointer.committed()

    def run(self, work: Work[T]) -> T:
        """One decision in a write transaction of its own, committed before it returns."""
        with self.transaction() as tx:
            return work(tx)

    def run_group(
        self, works: Iterator[Work[object]], observe: Observe | None = None
    ) -> list[Outcome]:
        """Decide ``works`` in one write transaction and commit; one outcome per work taken."""
        from pwf.store.sqlite_unit import run_group  # noqa: PLC0415 - a served host's only

        return run_group(self, works, observe)

    def append(
        self,
        events: Sequence[Event],
        *,
        at: int,
        actor: Actor,
        cause: Cause | None = None,
    ) -> list[Sealed]:
        """Append one batch atomically and return it sealed."""
        with self.transaction() as tx:
            return tx.append(events, at=at, actor=actor, cause=cause)

    def head(self) -> Head:
        """The log's tip."""
        row = self.connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
        return Head(seq=row[0], content_hash=row[1], batch=row[2]) if row else Head(0, None, 0)

    def read(self, first: int = 1, last: int | None = None) -> Iterator[StoredEvent]:
        """Stream stored events with ``first <= seq <= last`` in seq order (constant memory)."""
        stop = last if last is not None else 2**63 - 1
        cursor = self.connection.execute(
            "SELECT seq, body FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq", (first, stop)
        )
        for seq, body in cursor:
            yield StoredEvent(seq=seq, body=body)

    def entries(self, first: int = 1, last: int | None = None) -> Iterator[Entry]:
        """Stream checked, typed events with ``first <= seq <= last``."""
        for stored in self.read(first, last):
            yield open_body(stored.body)

    def find(
        self, *, after: int = 0, until: int | None = None, **wanted: str | int | None
    ) -> Iterator[StoredEvent]:
        """Stream the events after seq ``after`` whose indexed columns equal every given value.

        Each lookup index ends with ``seq``, so ``after`` starts the walk
        there instead of at the first event that matches, and ``until``
        (a last seq) ends it there rather than at the end of the log when
        nothing more matches (ADR 0085).

        Raises:
            InputError: an unknown column, or an idempotency key without its client id.
        """
        given = lookup(wanted)
        bounds = ["seq > ?", *([] if until is None else ["seq <= ?"])]
        where = " AND ".join([*(f"{column} = ?" for column in given), *bounds])
        cursor = execute(  # an id with a lone surrogate is looked up exactly (ADR 0071)
            self.connection,
            f"SELECT seq, body FROM events WHERE {where} ORDER BY seq",
            (*given.values(), after, *([] if until is None else [until])),
        )
        for seq, body in cursor:
            yield StoredEvent(seq=seq, body=body)

    def origin(self) -> Head:
        """Where the chain starts: zeros, or the head a compaction replaced (DOMAIN §13.2).

        Raises:
            ChainError: the first stored event cannot start a log.
        """
        row = self.connection.execute(
            "SELECT seq, body FROM events ORDER BY seq LIMIT 1"
        ).fetchone()
        return EMPTY if row is None else origin_of(row[0], row[1])

    def verify(self, *, deep: bool = True) -> VerifyReport:
        """Check the chain from stored bytes and name the first bad seq.

        ``deep`` (the default) also parses every event (canonical form, typed
        data) and compares the indexed columns with the bytes.  Without it
        only the chain is walked: each body's SHA-256 against its own
        ``contentHash``, and ``seq``, ``batch`` and ``prevHash`` read from the
        bytes, which proves that no acknowledged byte changed.
        """
        with self._snapshot():
            return self._verify(deep=deep)

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction, so the head and the events come from the same moment."""
        with transaction(self.connection):
            yield

    def _walk(self, origin: Head, head: Head, *, deep: bool) -> Head:
        """The walk, shared across processes for a long log (``pwf.store.chainwalk``).

        The walkers read their own snapshots, bounded by the last seq of this
        one; whatever they report other than this snapshot's head is walked
        again here, in this snapshot, so a fault is named exactly and a
        concurrent compaction is not mistaken for one.
        """
        from pwf.store.chainwalk import walk_chain, walk_rows  # noqa: PLC0415 - verify only

        top = self.connection.execute("SELECT max(seq) FROM events").fetchone()[0]
        if top is not None:
            try:
                # This process's range is walked in this snapshot, on this connection.
                found = walk_chain(
                    self.path, origin, upto=top, deep=deep, connection=self.connection
                )
                if found == head:
                    return head
            except (ChainError, StoreError):
                pass
        if deep:
            select = f"SELECT {COLUMNS} FROM events ORDER BY seq"
            return verify_rows(self.connection.execute(select), origin)
        return walk_rows(
            self.connection.execute(
                "SELECT seq, CAST(content_hash AS BLOB), body FROM events ORDER BY seq"
            ),
            origin,
        )

    def _verify(self, *, deep: bool) -> VerifyReport:
        head = self.head()

        def walk(origin: Head) -> Head:
            last = self._walk(origin, head, deep=deep)
            if last == head:  # the chain holds: now the tree over it (ADR 0083)
                from pwf.store.tree import check  # noqa: PLC0415 - verify only

                check(self.connection)
            return last

        return report(head, self.origin, walk)

    # ------------------------------------------------------------ the file (ADR 0059)

    def integrity_check(self) -> str | None:
        """None when SQLite's integrity and foreign-key checks pass, else what they found.

        Raises:
            StoreError: SQLite could not run the checks.
        """
        from pwf.store.image import integrity  # noqa: PLC0415 - file checks only

        try:
            return integrity(self.connection)
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None

    def backup_to(self, target: Path) -> None:
        """Copy one committed state of this file into the empty file ``target``, in one step.

        Raises:
            StoreError: the copy failed.
        """
        from pwf.store.image import copy_file  # noqa: PLC0415 - file maintenance only

        copy_file(self.path, target)

    def shape(self) -> Shape:
        """The file's header marks and schema, which a compacted image copies.

        Raises:
            StoreError: SQLite could not read them.
        """
        from pwf.store.image import shape_of  # noqa: PLC0415 - file maintenance only

        try:
            return shape_of(self.connection)
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None

    def install_image(self, image: sqlite3.Connection, work: Callable[[SqliteTransaction], T]) -> T:
        """Copy the database ``image`` over this file in one write transaction, ``work`` first.

        ``work`` gets a read transaction of this file through a connection of
        its own, under the write lock the copy holds (:func:`pwf.store.image.install`).

        Raises:
            StoreError: the lock was not free in time or the copy failed.
        """
        from pwf.store.image import install_over  # noqa: PLC0415 - file maintenance only

        return install_over(self, image, work)
