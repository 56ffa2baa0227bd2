"""A long fold split in two: a forked process folds some read models, the caller the rest.

Imports fold.bulk, readmodel, projections, events, errors, store, _process, _sqlite, scratchfiles.
Every statement a projection emits reads and writes one table of its own
read model, so read models fold independently of each other: the forked process
folds its read models over the same events into a file of its own, and the
caller copies those tables into its scratch database afterwards, row for row
and rowid for rowid (ADR 0013).  The caller keeps everything else: reading
and checking the whole chain, its own read models, the progress reports.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

from pwf._process import Forked, can_fork, processors
from pwf._sqlite import exact_text, projection_tables, quote, transaction
from pwf.errors import StoreError
from pwf.events import EVENT_TYPES
from pwf.fold import scratchfiles
from pwf.fold.bulk import BulkFold
from pwf.projections import PROJECTIONS
from pwf.readmodel import CHECKPOINT_TABLE
from pwf.store.sqlite_rows import chain_rows

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from pwf.events import Entry
    from pwf.projections import Projection
    from pwf.store.sqlite_rows import PartRow

__all__ = ["SPLIT_FROM", "SPLIT_OFF", "Part", "Scratch", "fold", "fold_part", "merge", "split"]

SPLIT_OFF: Final = ("blobs", "workers", "host_commands")
"""The read models a forked process folds.

On the demo traffic they run about half of the statements; the caller
reads, decodes and checks every event besides folding the other read
models, so both sides then take about as long.  The names are those of
:data:`pwf.projections.PROJECTIONS`, which a forked process folds by name.
"""
SPLIT_FROM: Final = 20_000
"""A fold of fewer events stays in one process: starting and merging would not pay."""


class Scratch(Protocol):
    """The scratch database a fold writes into, as :func:`fold` uses it."""

    path: Path
    connection: sqlite3.Connection
    chunk: int
    model: BulkFold
    bulk: BulkFold | None
    """While a forked process folds some read models, the model of the others."""

    def fold_until(self, last: int) -> None:
        """Fold with ``bulk`` (else ``model``) up to seq ``last``, checking the chain."""


def fold(scratch: Scratch, first: int, last: int, decode: Callable[[int, bytes], Entry]) -> None:
    """Fold seqs ``first..last`` into ``scratch``, with a forked process when it pays.

    The forked process folds the read models :func:`split` gives it into a part file
    beside the scratch file, decoding stored rows with ``decode`` (an
    importable function); this process folds the others through
    ``scratch.fold_until``.  Then the forked process's tables are copied in, and the
    part file is deleted whatever happens.  Without room for a part file
    this process folds alone.

    Raises:
        ForkedError: the forked process failed.
        StoreError: the forked process read another number of events than the span holds.
    """
    found = split(scratch.model.projections, last - first + 1)
    made = None
    if found is not None:
        with contextlib.suppress(OSError):
            made = scratchfiles.make(f"{scratch.path.name}.part-", scratch.path.parent)
    if found is None or made is None:
        scratch.fold_until(last)
        return
    part, held = made
    rest, names = found
    try:
        job = Part(
            path=str(part),
            live=_live_uri(scratch.connection),
            names=names,
            first=first,
            last=last,
            chunk=scratch.chunk,
            decode=decode,
        )
        with Forked(fold_part, job) as other:
            scratch.bulk = BulkFold(rest)
            try:
                scratch.fold_until(last)
            finally:
                scratch.bulk = None
            read = other.result()
        if read != last - first + 1:
            raise StoreError(
                f"the log changed during the fold: {read} events read, not {last - first + 1}"
            )
        merge(scratch.connection, part, names, last)
    finally:
        scratchfiles.release(part, held)


def _live_uri(connection: sqlite3.Connection) -> str:
    """A read-only URI of the live database attached to ``connection`` as ``live``."""
    live = next(row[2] for row in connection.execute("PRAGMA database_list") if row[1] == "live")
    return f"{Path(live).as_uri()}?mode=ro"


def split(
    projections: Sequence[Projection], events: int
) -> tuple[list[Projection], tuple[str, ...]] | None:
    """The caller's read models and the other process's names, or None to fold in one process.

    A fold is split when it covers at least :data:`SPLIT_FROM` events, this
    process may run on two processors and start a forked process, and both sides get
    read models.
    """
    others = tuple(projection.NAME for projection in projections if projection.NAME in SPLIT_OFF)
    rest = [projection for projection in projections if projection.NAME not in SPLIT_OFF]
    if events < SPLIT_FROM or not others or not rest or processors() < 2 or not can_fork():
        return None
    return rest, others


class Part(NamedTuple):
    """What a forked process folds: read models ``names`` over seqs ``first..last`` of ``live``."""

    path: str
    """The part file, created empty by the caller."""
    live: str
    """A read-only URI of the live database."""
    names: tuple[str, ...]
    first: int
    last: int
    chunk: int
    """Events folded per transaction."""
    decode: Callable[[int, bytes], Entry]
    """A stored row's typed event (an importable function, so that it pickles)."""


def fold_part(part: Part) -> int:
    """The forked process: fold ``part`` into its file; return how many rows it read.

    Events none of these read models folds are not decoded, and the chain is
    the caller's to check.  The caller compares the rows read with the span's
    length.
    """
    model = BulkFold([projection for projection in PROJECTIONS if projection.NAME in part.names])
    skipped = frozenset(cls.TAG for cls in EVENT_TYPES if not model.handlers(cls))
    decode, chunk = part.decode, part.chunk
    read = 0

    def wanted(rows: Iterable[PartRow]) -> Iterator[Entry]:
        nonlocal read
        for seq, body, *_ in rows:
            read += 1
            if body is not None:  # None: pruned (the caller's chain links it), or skipped
                yield decode(seq, body)

    connection = exact_text(sqlite3.connect(part.path, isolation_level=None))
    try:
        # A part file is deleted on any error, as the scratch file is.
        connection.execute("PRAGMA main.journal_mode = OFF")
        connection.execute("PRAGMA main.synchronous = OFF")
        connection.execute("ATTACH DATABASE ? AS live", (part.live,))
        with transaction(connection):
            connection.execute(CHECKPOINT_TABLE)
            model.install(connection)
        for low in range(part.first, part.last + 1, chunk):
            with transaction(connection):
                high = min(low + chunk - 1, part.last)
                rows = chain_rows(connection, low, high, schema="live.", without=skipped)
                model.fold(connection, wanted(rows))
    finally:
        connection.close()
    return read


def merge(connection: sqlite3.Connection, part: Path, names: tuple[str, ...], last: int) -> int:
    """Copy the other process's tables from ``part`` into ``main``; checkpoints move to ``last``.

    ``main`` holds the same tables, empty, with the same definitions and no
    secondary index yet, so SQLite copies each one whole, rowids included.
    A table a read model makes only when its first event comes (the host
    claim's ``host_state``, made by the first host event of a served log) is
    in the part alone: it is made in ``main`` from the part's own definition
    first, where the one-process fold would have made it (after the installed
    tables, before the indexes).  Every checkpoint of a fold moves to the
    last seq of its chunk, whichever read models the chunk's events concern,
    so the forked process's do too.  Returns the number of tables copied.

    Raises:
        StoreError: a table of ``main`` to copy into is not empty.
    """
    connection.execute("ATTACH DATABASE ? AS part", (f"{part.absolute().as_uri()}?mode=ro",))
    try:
        with transaction(connection):
            tables = projection_tables(connection, "part")
            made = set(projection_tables(connection))
            for table in tables:
                if table not in made:
                    _create(connection, table)
                _copy(connection, table)
            marks = ", ".join("?" * len(names))
            connection.execute(
                f"UPDATE main._pwf_checkpoint SET last_seq = ? WHERE projection IN ({marks})",  # noqa: S608 - placeholders only
                (last, *names),
            )
    finally:
        connection.execute("DETACH DATABASE part")
    return len(tables)


def _create(connection: sqlite3.Connection, table: str) -> None:
    """Make in ``main`` a table the part made on its first event, as the part defines it."""
    found = connection.execute(
        "SELECT sql FROM part.sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    # The part's own definition, written by a projection: unqualified, so it lands in main.
    connection.execute(found[0])


def _copy(connection: sqlite3.Connection, table: str) -> None:
    """Copy one table of the part into the same, empty table of ``main``."""
    quoted = quote(table)
    found = connection.execute(f"SELECT count(*) FROM main.{quoted}").fetchone()  # noqa: S608 - a name from sqlite_master
    if found[0]:
        raise StoreError(f"cannot merge {table}: the scratch table is not empty")
    connection.execute(f"INSERT INTO main.{quoted} SELECT * FROM part.{quoted}")  # noqa: S608 - same as above
