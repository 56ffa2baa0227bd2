"""The SQLite file as a file: the capability backup, prune and the folds ask for (ADR 0059).

Imports the SQLite helpers, the read model's reader and the store's schema
errors (plus sqlite3: this is an edge room).  :class:`SqliteFile` is the half
of :class:`~pwf.store.sqlite.SqliteStore` that reads, checks, copies and
installs the database file itself; nothing above the store names it: it is
reached as the port's :class:`~pwf.store.ProjectionFile` or
:class:`~pwf.store.LogFile`.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from pwf.sqlreader import RowReader
from pwf.store.sqlite_reads import SqliteReads
from pwf.store.sqlite_schema import translate_error

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from pathlib import Path

    from pwf.store.image import Shape
    from pwf.store.sqlite_transaction import SqliteTransaction

__all__ = ["SqliteFile"]

T = TypeVar("T")


class SqliteFile(SqliteReads):
    """One SQLite file's own members: projections, pragmas, checks, copies and images.

    It builds on the log's reads (:class:`SqliteReads`), whose snapshot it shares.
    """

    def file_transaction(self) -> AbstractContextManager[SqliteTransaction]:
        """The file's own write transaction."""
        raise NotImplementedError

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
