"""``pwf rebuild``: the whole log folded beside the live database and swapped in (ADR 0013).

:func:`rebuild` folds the log into a scratch file beside the live database
while writers carry on, then swaps the rebuilt tables in under the live write
lock, in one transaction; :func:`refold_blobs` folds the blobs alone again after a
shared log's prune.  Imports events, bulk, decode, workfile, projections, _sqlite,
sqlviews and errors.
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
from pwf.projections import blobs
from pwf.sqlviews import drop_views, install_views

if TYPE_CHECKING:
    import sqlite3

    from pwf.projections import Statement
    from pwf.store import EventStore

__all__ = ["RebuildReport", "rebuild", "refold_blobs"]

_CREATE: Final = re.compile(r"^CREATE (UNIQUE INDEX|INDEX|TABLE|TRIGGER) ")


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


_CARRYING: Final = tuple(sorted(cls.TAG for cls in EVENT_TYPES if cls.JSON_BLOBS or cls.TEXT_BLOBS))
"""The tags of the events that carry blobs."""
_CARRIERS: Final = (
    "SELECT seq, body FROM events WHERE body IS NOT NULL"  # noqa: S608 - marks only
    f" AND type IN ({', '.join('?' * len(_CARRYING))}) ORDER BY seq"
)


def refold_blobs(store: EventStore) -> int:
    """Fold the ``blobs`` table again from the store's own log, in one transaction; the blobs.

    What a host runs after its copy of a shared log lost the bytes a prune
    took (ADR 0107).  The removed run trees went with the ``log.pruned``'s own
    fold; what no fold of what stays can give back is the blobs': a value
    only removed events carried is gone, and one a kept event carries too
    is dated by the first kept carrier.  So the table is emptied and the
    blobs of every event that kept its bytes are stored again, in seq order,
    as a fold of the pruned log stores them.  Returns the rows it holds.
    """
    file = store.projections_file
    connection = cast("sqlite3.Connection", getattr(file, "connection"))  # noqa: B009 - a file's
    with transaction(connection, "BEGIN IMMEDIATE"):
        connection.execute("DELETE FROM blobs")
        execute = connection.cursor().execute
        statements: list[Statement] = []
        rows = connection.execute(_CARRIERS, _CARRYING)  # the fold's decoding, not verify's
        for seq, body in rows:
            statements.extend(blobs.apply(entry_at(seq, seq, body)))
            if len(statements) >= STATEMENTS_HELD:
                run_statements(execute, statements)
                statements.clear()
        run_statements(execute, statements)
        return int(connection.execute("SELECT count(*) FROM blobs").fetchone()[0])


def _swap(connection: sqlite3.Connection) -> int:
    """Replace the live projections and checkpoints by the rebuilt ones, in the open transaction.

    The readable views are dropped first and made again last, so the live
    schema keeps its order: the log's objects, the projections', the views.
    """
    views = drop_views(connection, "live")
    for table in projection_tables(connection, "live"):
        connection.execute(f"DROP TABLE live.{quote(table)}")
    tables = projection_tables(connection, "main")
    names = ", ".join("?" * len(tables))
    # Each table, then its indexes, as the projections' DDL creates them: the scratch file
    # created its indexes after the fold, but the live schema keeps its order.  A trigger
    # (the runs' kept totals, ADR 0094) keeps its own place, after the tables it names.
    query = (
        f"SELECT item.sql FROM main.sqlite_master AS item WHERE item.tbl_name IN ({names})"  # noqa: S608 - placeholders only
        " AND item.sql IS NOT NULL ORDER BY CASE item.type WHEN 'trigger' THEN item.rowid"
        " ELSE (SELECT owner.rowid FROM main.sqlite_master AS owner"
        " WHERE owner.type = 'table' AND owner.name = item.tbl_name) END,"
        " item.type = 'index', item.rowid"
    )
    schema = connection.execute(query, tables).fetchall()
    for (statement,) in schema:
        qualified, found = _CREATE.subn(r"CREATE \1 live.", statement, count=1)
        if not found:
            raise StoreError(f"cannot recreate a projection object: {statement[:60]}")
        connection.execute(qualified)
    # In the order the DDL made them: a table a trigger writes (the runs' kept totals, ADR
    # 0094) comes after the tables the trigger watches, and what their copies made it write
    # is replaced by its own copy.
    ordered = [
        name
        for (name,) in connection.execute(
            "SELECT name FROM main.sqlite_master WHERE type = 'table' ORDER BY rowid"
        )
        if name in tables
    ]
    for table in ordered:
        # Same definition on both sides and an empty target: SQLite copies the b-trees whole.
        connection.execute(f"DELETE FROM live.{quote(table)}")  # noqa: S608 - as below
        connection.execute(
            f"INSERT INTO live.{quote(table)} SELECT * FROM main.{quote(table)}"  # noqa: S608 - names from sqlite_master
        )
    connection.execute("DELETE FROM live._pwf_checkpoint")
    connection.execute("INSERT INTO live._pwf_checkpoint SELECT * FROM main._pwf_checkpoint")
    if views:
        install_views(connection, "live")
    return len(tables)
