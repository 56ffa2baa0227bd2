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
from typing import TYPE_CHECKING, Final, TypeVar

from pwf._closing import Closing
from pwf._sqlite import exact_text
from pwf.errors import (
    InputError,
    NotPwfDatabaseError,
)
from pwf.store import AppendsAlone
from pwf.store.sqlite_file import SqliteFile
from pwf.store.sqlite_schema import (
    APPLICATION_ID,
    FORMAT,
    SCHEMA,
    Synchronous,
    prepare_file,
    translate_error,
    wrong_format,
)
from pwf.store.sqlite_transaction import SqliteTransaction

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator, Sequence
    from contextlib import AbstractContextManager

    from pwf.store import AppendHook, Head
    from pwf.store.sqlite_checkpoint import Checkpointer
    from pwf.store.tree import Tree
    from pwf.store.unit import Observe, Outcome, Work

__all__ = [
    "FORMAT",
    "SCHEMA",
    "SqliteStore",
    "SqliteTransaction",
    "Synchronous",
    "translate_error",
]


T = TypeVar("T")


class SqliteStore(AppendsAlone, Closing, SqliteFile):
    """A hash-chained event log in one SQLite file (WAL, ``synchronous=FULL`` by default).

    Its reads of the log are :class:`~pwf.store.sqlite_reads.SqliteReads`' and
    what acts on the file as a file (the SQLite-only capability backup, prune
    and the folds ask for) is :class:`~pwf.store.sqlite_file.SqliteFile`'s.
    """

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
        self.tree_cache: tuple[Head, Tree] | None = None  # as the last commit left it (ADR 0083)
        try:
            self.connection = _connect(
                self.path, create=create, read_only=read_only, busy_timeout_ms=busy_timeout_ms
            )
            self.connection.execute(f"PRAGMA synchronous = {synchronous}")
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
        if self.connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            self.connection.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # before the first table
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
    def shared_log(self) -> None:
        """None: the log of record is this file."""

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

    def close(self) -> None:
        """Close the connection (and stop the checkpoint thread)."""
        if self.checkpointer is not None:
            self.checkpointer.close()  # first: the last connection to close checkpoints
            self.checkpointer = None
        self.connection.close()

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
        """One decision in a write transaction of its own, committed before it returns.

        Repeatable work runs bare first, as a served group's does (ADR 0101).
        """
        from pwf.store.sqlite_unit import run_alone  # noqa: PLC0415 - with run_group

        return run_alone(self, work)

    def run_group(
        self, works: Iterator[Work[object]], observe: Observe | None = None
    ) -> list[Outcome]:
        """Decide ``works`` in one write transaction and commit; one outcome per work taken."""
        from pwf.store.sqlite_unit import run_group  # noqa: PLC0415 - a served host's only

        return run_group(self, works, observe)


PAGE_SIZE: Final = 1024
"""The page size of a new file (ADR 0102): a commit writes a page of each B-tree it changes."""


def _connect(
    path: Path, *, create: bool, read_only: bool, busy_timeout_ms: int
) -> sqlite3.Connection:
    """A connection to the file at ``path`` (made first, with ``create``), keys enforced.

    Raises:
        InputError: ``path`` is a directory, or it does not exist and ``create`` is false.
    """
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a database file")
    if not path.exists():
        if not create:
            raise InputError(f"no state database at {path} (run `pwf init` first)")
        prepare_file(path)
    uri = f"{path.as_uri()}?mode={'ro' if read_only else 'rw'}"
    connection = exact_text(
        sqlite3.connect(uri, uri=True, isolation_level=None, timeout=busy_timeout_ms / 1000)
    )
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    connection.execute("PRAGMA foreign_keys = ON")
    return connection
