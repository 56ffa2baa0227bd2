"""A whole database image built beside a live SQLite log and installed into it in one step.

Imports errors, the SQLite store and its errors (plus sqlite3: an edge room).
A prune builds the file its live database should become in a scratch file
(ADR 0051): the same page size, header marks and schema as the live file,
already compact.  :func:`install` copies it over the live database with
one run of SQLite's online backup API, in one write transaction of the
live file: readers see the old database or the new one, never a mix, a
crash before its commit leaves the old one, and no vacuum follows.

The backup takes the live file's write lock at its first step and keeps it
until it commits; :func:`install` runs the caller's head-dependent work
right after that first step, so the work and the copy see the same head
and no writer commits in between.  The work writes the image through the
connection the backup reads it from, so SQLite carries the pages already
copied along.

The file work a :class:`pwf.store.LogFile` offers outside this package is
here too (ADR 0059): SQLite's integrity checks (:func:`integrity`), the
online copy of a live file (:func:`copy_file`), and the install with its
work under the lock (:func:`install_over`, :func:`carry_over`), so that no
room outside the store touches a store's connection.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar, cast

from pwf._sqlite import exact_text, transaction
from pwf.errors import StoreBusyError, StoreError
from pwf.store.sqlite import SqliteStore, SqliteTransaction

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pwf.store import FileTransaction
    from pwf.store.sqlite_file import SqliteFile

__all__ = [
    "LOG_TABLES",
    "Shape",
    "begin_image",
    "carry_over",
    "copy_file",
    "finish_image",
    "install",
    "install_over",
    "integrity",
    "same_shape",
    "shape_of",
]

T = TypeVar("T")

LOG_TABLES: Final = frozenset(
    {
        "events",
        "_pwf_events",
        "_pwf_batches",
        "_pwf_whole",
        "_pwf_pruned",
        "_pwf_meta",
        "_pwf_head",
        "_pwf_checkpoint",
        "_pwf_tree",
    }
)
"""The log's own tables: an image takes their definitions from the live file."""
STEP_PAGES: Final = 256
"""Pages copied per step of the backup once the work under the lock is done."""
_INDEXED: Final = frozenset({"_pwf_events", "_pwf_batches"})
"""The log's tables whose secondary indexes an image builds once it is written."""
_FEWEST: Final = 4
"""An image has at least this many pages, so its first step of a quarter of them copies one."""
_BUSY: Final = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_SCHEMA: Final = (
    "SELECT type, name, tbl_name, sql FROM {schema}.sqlite_master"
    " WHERE name NOT LIKE 'sqlite\\_stat%' ESCAPE '\\' ORDER BY rowid"
)
_MARKS: Final = ("page_size", "encoding", "auto_vacuum", "application_id", "user_version")

Entry = tuple[str, str, str, str | None]
"""One ``sqlite_master`` row: type, name, table name and SQL text."""


@dataclass(frozen=True)
class Shape:
    """What a database file is made of beyond its rows: its header marks and its schema."""

    marks: tuple[tuple[str, object], ...]
    """``PRAGMA`` name and value, in the order a new file must be given them."""
    schema: tuple[Entry, ...]
    """``sqlite_master`` in its own order."""


def shape_of(connection: sqlite3.Connection, schema: str = "main") -> Shape:
    """The header marks and schema of the database ``schema`` on ``connection``."""
    marks = tuple(
        (mark, connection.execute(f"PRAGMA {schema}.{mark}").fetchone()[0]) for mark in _MARKS
    )
    rows = connection.execute(_SCHEMA.format(schema=schema))
    return Shape(marks=marks, schema=tuple((a, b, c, d) for a, b, c, d in rows))


def begin_image(connection: sqlite3.Connection, live: Shape) -> None:
    """Give a new, empty image the live file's marks and the log's tables, still empty.

    The secondary indexes of the log's tables wait for :func:`index_events`:
    an index built once the backup's rows are all copied costs a sort, not
    one insertion per event and index.
    """
    for mark, value in live.marks:
        shown = f"'{value}'" if isinstance(value, str) else str(int(str(value)))
        connection.execute(f"PRAGMA main.{mark} = {shown}")
    _create(
        connection,
        [entry for entry in live.schema if entry[2] in LOG_TABLES and entry not in _events(live)],
    )


def index_events(connection: sqlite3.Connection, live: Shape) -> None:
    """Create the secondary indexes of the image's ``events``, now that it is written."""
    _create(connection, _events(live))


def _events(live: Shape) -> list[Entry]:
    return [
        entry
        for entry in live.schema
        if entry[0] == "index" and entry[2] in _INDEXED and entry[3] is not None
    ]


def finish_image(connection: sqlite3.Connection, live: Shape) -> None:
    """Add the live file's views and triggers, once the image's tables are all there.

    A read model's own triggers (the runs' kept totals, ADR 0094) came with its
    tables, which the fold made: only the ones the image lacks are added.
    """
    held = {name for (name,) in connection.execute("SELECT name FROM main.sqlite_master")}
    _create(
        connection,
        [
            entry
            for entry in live.schema
            if entry[0] in {"view", "trigger"} and entry[1] not in held
        ],
    )


def _create(connection: sqlite3.Connection, entries: list[Entry]) -> None:
    for kind, _name, _table, sql in entries:
        if sql is not None and kind in {"table", "index", "view", "trigger"}:
            connection.execute(sql)


def same_shape(image: Shape, live: Shape) -> None:
    """The image is made exactly like the live file (rows apart).

    Raises:
        StoreError: it is not: the live projections are not the ones this pwf folds.
    """
    if image.marks != live.marks or set(image.schema) != set(live.schema):
        raise StoreError(
            "the live projections are not at the versions this pwf writes: run `pwf rebuild` first"
        )


def install(
    source: sqlite3.Connection,
    destination: sqlite3.Connection,
    work: Callable[[], T],
    *,
    busy_timeout_ms: int,
    what: str = "the compacted database",
) -> T:
    """Copy ``source``'s main database over ``destination``'s, with ``work`` done under the lock.

    ``what`` names the image in errors.

    ``work`` runs once the backup holds the destination's write lock and has
    copied its first few pages, before anything is committed; it may write
    ``source`` (through ``source`` only: SQLite carries the pages already
    copied along) but must not use ``destination``, whose transaction is the
    backup's.  The image only grows while the work runs, so the first step
    never finishes the copy before the work.  An exception from ``work``
    aborts the backup, which rolls the destination back.

    Raises:
        StoreBusyError: the write lock was not free within ``busy_timeout_ms``.
        StoreError: SQLite failed to copy.
    """
    pages = int(source.execute("PRAGMA main.page_count").fetchone()[0])
    if pages < _FEWEST:
        raise StoreError(f"{what} of {pages} page(s) is not a whole pwf database")
    progress = _Progress(work, busy_timeout_ms / 1000)
    try:
        source.backup(
            destination, pages=max(1, min(STEP_PAGES, pages // 4)), progress=progress, sleep=0.005
        )
    except sqlite3.Error as error:
        raise StoreError(f"installing {what} failed: {error}") from None
    if not progress.done:
        raise StoreError(f"installing {what} failed: it finished before its work")
    return cast("T", progress.result)


class _Progress:
    """The backup's progress callback: the work under the lock on the first step that copied."""

    def __init__(self, work: Callable[[], object], patience: float) -> None:
        self.work = work
        self.deadline = time.monotonic() + patience
        self.done = False
        self.result: object = None

    def __call__(self, status: int, _remaining: int, _total: int) -> None:
        if self.done:
            return
        if status in _BUSY:
            if time.monotonic() > self.deadline:
                raise StoreBusyError(
                    "the database is locked by another writer (the install waited)"
                )
            return
        if status == sqlite3.SQLITE_DONE:
            return  # reported by install: the copy outran the work
        self.result = self.work()
        self.done = True


def integrity(connection: sqlite3.Connection) -> str | None:
    """None when SQLite's integrity and foreign-key checks pass, else what they found."""
    rows = connection.execute("PRAGMA integrity_check").fetchall()
    found = "; ".join(str(row[0]) for row in rows)
    if found != "ok":
        return found
    keys = connection.execute("PRAGMA foreign_key_check").fetchall()
    if keys:
        return "; ".join(f"foreign key violation in {row[0]} (rowid {row[1]})" for row in keys)
    return None


def copy_file(live: Path, target: Path) -> None:
    """Copy one committed state of the database ``live`` into ``target``, in one step.

    A read-only connection of its own runs SQLite's online backup to its
    end in one step: it reads one committed state of the WAL database from
    start to end, so the copy is a consistent point of the log, and no
    write transaction is held for it.

    Raises:
        StoreError: SQLite failed to read or write (its own message).
    """
    try:
        source = exact_text(sqlite3.connect(f"{live.absolute().as_uri()}?mode=ro", uri=True))
    except sqlite3.Error as error:
        raise StoreError(str(error)) from None
    try:
        copy = exact_text(sqlite3.connect(target))
        try:
            source.backup(copy)
        finally:
            copy.close()
    except sqlite3.Error as error:
        raise StoreError(str(error)) from None
    finally:
        source.close()


def install_over(
    store: SqliteFile, image: sqlite3.Connection, work: Callable[[SqliteTransaction], T]
) -> T:
    """Copy ``image`` over ``store``'s file in one write transaction, ``work`` done first.

    ``work`` is given a read transaction of the live file through a
    connection of its own, which sees the last commit since the write lock
    is held; what it returns is returned once the image is installed.  An
    exception from it leaves the live file as it was.

    Raises:
        StoreError: the lock was not free in time or the copy failed.
    """
    with SqliteStore(store.path, read_only=True) as reader:

        def under_lock() -> T:
            with transaction(reader.connection):
                return work(SqliteTransaction(reader, reader.connection))

        return install(image, store.connection, under_lock, busy_timeout_ms=store.busy_timeout_ms)


def carry_over(image: sqlite3.Connection, live: FileTransaction) -> None:
    """Give the image the live file's checkpoints (at the image's head) and ``_pwf_meta``.

    Then its shape is checked against the live file's.

    Raises:
        StoreError: the live file is not shaped as this pwf makes it.
        sqlite3.Error: a read or write failed.
    """
    last = image.execute("SELECT seq FROM main._pwf_head").fetchone()[0]
    checkpoints = live.connection.execute("SELECT projection, version FROM _pwf_checkpoint")
    image.execute("DELETE FROM main._pwf_checkpoint")
    image.executemany(
        "INSERT INTO main._pwf_checkpoint (projection, version, last_seq) VALUES (?, ?, ?)",
        [(name, version, last) for name, version in checkpoints],
    )
    image.execute("DELETE FROM main._pwf_meta")
    image.executemany(
        "INSERT INTO main._pwf_meta (key, value) VALUES (?, ?)",
        live.connection.execute("SELECT key, value FROM _pwf_meta").fetchall(),
    )
    same_shape(shape_of(image), shape_of(live.connection))
