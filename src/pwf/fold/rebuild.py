"""``pwf rebuild``: the whole log folded beside the live database and swapped in (ADR 0013).

:func:`rebuild` folds the log into a scratch file beside the live database
while writers carry on, then swaps the rebuilt tables in under the live write
lock, in one transaction; :func:`refold_blobs` folds the blobs alone again after a
shared log's prune.  Imports events, bulk, decode, workfile, projections, _sqlite,
sqlviews, store.log_writes and errors.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

from pwf._sqlite import projection_tables, quote, transaction
from pwf.errors import ChainError, StoreError
from pwf.events import EVENT_TYPES
from pwf.fold.bulk import STATEMENTS_HELD, run_statements
from pwf.fold.decode import entry_at
from pwf.fold.workfile import CHUNK, Progress, scratch_fold
from pwf.projections import PROJECTIONS, blobs
from pwf.sqlviews import drop_views, install_views
from pwf.store.log_writes import refold_owed

if TYPE_CHECKING:
    import sqlite3

    from pwf.store import EventStore

__all__ = ["RebuildReport", "rebuild", "refold_blobs"]

_CREATE: Final = re.compile(r"^CREATE (UNIQUE INDEX|INDEX|TABLE|TRIGGER) ")
_NAMED: Final = re.compile(
    r"\s*CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|TRIGGER)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RebuildReport:
    """What :func:`rebuild` swapped in: the events folded, up to which seq, and the tables."""

    events: int
    """How many events were folded: from the log's origin (its opening, or a compaction) on."""
    seq: int
    """The head seq the projections now stand at."""
    tables: int


def rebuild(
    store: EventStore, *, progress: Progress | None = None, chunk: int = CHUNK
) -> RebuildReport:
    """Rebuild every projection of the live database from its log, atomically.

    The log is folded into a scratch file beside the database while writers
    carry on.  Then, holding the live write lock, the tail appended meanwhile
    is folded too, the rebuilt head is checked against the live head, and the
    live projection tables are dropped, recreated and filled from the scratch
    file, all in that one transaction.  Until it commits the live tables stay
    exactly as they were, whatever fails or crashes.  What is rebuilt is the
    store's projection file, from the log it holds (ADR 0059).

    Raises:
        ChainError: the log breaks its chain; nothing was changed.
        StoreBusyError: the write lock was not granted in time.
    """
    file = store.projections_file
    with scratch_fold(
        file,
        file.path,
        "rebuild",
        copy_events=False,
        writable=True,
        progress=progress,
        chunk=chunk,
    ) as scratch:
        scratch.install()
        scratch.fold_split(scratch.live_head().seq)
        scratch.index()
        with transaction(scratch.connection, "BEGIN IMMEDIATE"):
            head = scratch.live_head()
            scratch.fold_until(head.seq)
            if scratch.chain.head != head:
                raise ChainError(head.seq, "the log's head does not match its last event")
            tables = _swap(scratch.connection)
    with contextlib.suppress(StoreError):  # the rebuild committed; the checkpoint is a nicety
        file.checkpoint()
    return RebuildReport(events=head.seq - scratch.chain.origin.seq, seq=head.seq, tables=tables)


_UNZEROED: Final = "PRAGMA live.secure_delete = OFF"
"""Free a dropped table's pages as they are: the rebuild writes each page once (ADR 0013)."""
_ZEROED: Final = "PRAGMA live.secure_delete = ON"
"""Overwrite a dropped table's pages with zeros, whatever SQLite's build does by default."""

_CARRYING: Final = tuple(sorted(cls.TAG for cls in EVENT_TYPES if cls.JSON_BLOBS or cls.TEXT_BLOBS))
"""The tags of the events that carry blobs."""
_CARRIERS: Final = (
    "SELECT seq, body FROM events"  # noqa: S608 - marks only
    f" WHERE +type IN ({', '.join('?' * len(_CARRYING))}) ORDER BY seq"
)
"""Read along the log, not through its type index: most events carry blobs, and the index's
order would want a sort.  A pruned event's body, None, is passed over by the reader (a test of
``body`` here would make the view assemble every body twice)."""


_FIRST: Final = "_pwf_first_carriers"
"""A temporary table: each blob value the kept events carry, with its first carrier."""
_FIRST_DDL: Final = (
    f"CREATE TEMP TABLE {_FIRST} (blob_hash BLOB PRIMARY KEY, media_type TEXT NOT NULL,"
    " at INTEGER NOT NULL, seq INTEGER NOT NULL) WITHOUT ROWID"
)
_FIRST_INSERT: Final = f"INSERT OR IGNORE INTO temp.{_FIRST} VALUES (?, ?, ?, ?)"  # noqa: S608
_GONE: Final = (
    f"DELETE FROM main.blobs WHERE NOT EXISTS (SELECT 1 FROM temp.{_FIRST} f"  # noqa: S608
    " WHERE f.blob_hash = blobs.blob_hash AND f.media_type = blobs.media_type)"
)
_REDATED: Final = (
    f"UPDATE main.blobs SET created_at = f.at FROM temp.{_FIRST} f"  # noqa: S608
    " WHERE f.blob_hash = blobs.blob_hash AND blobs.created_at IS NOT f.at"
)
_MISSING: Final = (
    f"SELECT f.seq FROM temp.{_FIRST} f WHERE NOT EXISTS"  # noqa: S608
    " (SELECT 1 FROM main.blobs b WHERE b.blob_hash = f.blob_hash) ORDER BY f.seq"
)


def refold_blobs(store: EventStore) -> int:
    """Bring the ``blobs`` table to what a fold of the store's own log makes, in one transaction.

    What a host runs after its copy of a shared log lost the bytes a prune
    took (ADR 0107).  The removed run trees went with the ``log.pruned``'s own
    fold; what no fold of what stays can give back is the blobs': a value
    only removed events carried is gone, and one a kept event carries too
    is dated by the first kept carrier.  So every event that kept its bytes
    is read in seq order and each value it carries noted with its first
    carrier (hash, media type, time and seq, in a temporary table, not its
    bytes); then a row no kept event carries is deleted, a row dated
    otherwise is dated again, and a value without a row is stored from its
    first carrier.  Rows are compared by key, as ``pwf digest`` and ``pwf
    verify`` compare them; the values' bytes are not written again.
    Returns the rows the table holds.
    """
    file = store.projections_file
    connection = cast("sqlite3.Connection", getattr(file, "connection"))  # noqa: B009 - a file's
    with transaction(connection, "BEGIN IMMEDIATE"):
        connection.execute(f"DROP TABLE IF EXISTS temp.{_FIRST}")
        connection.execute(_FIRST_DDL)
        try:
            noted: list[tuple[object, ...]] = []
            seen: set[bytes] = set()
            rows = connection.execute(_CARRIERS, _CARRYING)  # the fold's decoding, not verify's
            for seq, body in rows:
                if body is None:  # its bytes were taken (ADR 0103)
                    continue
                for _text, params in blobs.apply(entry_at(seq, seq, body)):
                    digest = params[0]
                    assert isinstance(digest, bytes)
                    if digest not in seen:
                        seen.add(digest)
                        noted.append((digest, params[1], params[4], seq))
                if len(noted) >= STATEMENTS_HELD:
                    connection.executemany(_FIRST_INSERT, noted)
                    noted.clear()
                    seen.clear()  # a bound on memory: a repeat noted again is ignored
            connection.executemany(_FIRST_INSERT, noted)
            connection.execute(_GONE)
            connection.execute(_REDATED)
            missing = [seq for (seq,) in connection.execute(_MISSING).fetchall()]
            execute = connection.cursor().execute
            for seq in missing:  # only where the table lost a row a kept event carries
                (carried,) = connection.execute("SELECT body FROM events WHERE seq = ?", (seq,))
                run_statements(execute, list(blobs.apply(entry_at(seq, seq, carried[0]))), set())
        finally:
            connection.execute(f"DROP TABLE IF EXISTS temp.{_FIRST}")
        return int(connection.execute("SELECT count(*) FROM blobs").fetchone()[0])


def _ddl_order() -> dict[str, int]:
    """Each object the projections' DDL creates, by name, with its place in that DDL."""
    names = (_NAMED.match(statement) for p in PROJECTIONS for statement in p.DDL)
    return {found.group(1): place for place, found in enumerate(names) if found}


def _swap(connection: sqlite3.Connection) -> int:
    """Replace the live projections and checkpoints by the rebuilt ones, in the open transaction.

    The live schema keeps its order: the log's objects, then the projections'
    as their DDL makes them (an object the DDL does not name, a table a read
    model makes on its first event, after them), then the readable views,
    dropped first and made again last.  Each table's rows are copied once
    it and its indexes exist and before any trigger watches it: with the
    same definition on both sides, an empty target and no trigger, SQLite
    copies the b-trees whole.  The rows a trigger keeps (the runs' totals,
    ADR 0094) are copied as the fold made them; the dropped ones' pages are
    freed as :func:`_freeing` says.
    """
    views = drop_views(connection, "live")
    _freeing(connection)
    for table in projection_tables(connection, "live"):
        connection.execute(f"DROP TABLE live.{quote(table)}")
    tables = projection_tables(connection, "main")
    names = ", ".join("?" * len(tables))
    query = (
        "SELECT name, type, tbl_name, sql FROM main.sqlite_master"  # noqa: S608 - placeholders only
        f" WHERE tbl_name IN ({names}) AND sql IS NOT NULL ORDER BY rowid"
    )
    order = _ddl_order()
    schema = sorted(
        connection.execute(query, tables).fetchall(),
        key=lambda row: order.get(row[0], len(order)),  # stable: the rest in the file's order
    )
    made: list[str] = []
    copied: set[str] = set()
    for name, kind, table, statement in schema:
        qualified, found = _CREATE.subn(r"CREATE \1 live.", statement, count=1)
        if not found:
            raise StoreError(f"cannot recreate a projection object: {statement[:60]}")
        if kind != "index":
            _copy_made(connection, made, copied)
        if kind == "trigger" and table not in copied:
            raise StoreError(f"cannot recreate trigger {name}: its table {table} comes after it")
        connection.execute(qualified)
        if kind == "table":
            made.append(name)
    _copy_made(connection, made, copied)
    connection.execute("DELETE FROM live._pwf_checkpoint")
    connection.execute("INSERT INTO live._pwf_checkpoint SELECT * FROM main._pwf_checkpoint")
    if views:
        install_views(connection, "live")
    return len(tables)


def _freeing(connection: sqlite3.Connection) -> None:
    """Say how the swap frees the dropped tables' pages (ADR 0013 D10).

    Without being overwritten with zeros first (:data:`_UNZEROED`): what
    they hold is a fold of the log this file keeps, which the new tables
    hold again, and zeroing them wrote every page of the projections once
    more into the write-ahead log, under the live write lock.  While a
    shared log's prune is owed its refold (ADR 0107), the old ``blobs`` rows
    may hold values the log no longer has, so their pages are zeroed, as
    SQLite's ``secure_delete`` then says explicitly, whatever its build does.
    """
    connection.execute(_ZEROED if refold_owed(connection, "live") else _UNZEROED)


def _copy_made(connection: sqlite3.Connection, made: list[str], copied: set[str]) -> None:
    """Copy the rows of every table made in ``live`` and not yet copied."""
    for table in made:
        if table not in copied:
            connection.execute(
                f"INSERT INTO live.{quote(table)} SELECT * FROM main.{quote(table)}"  # noqa: S608 - names from sqlite_master
            )
            copied.add(table)
