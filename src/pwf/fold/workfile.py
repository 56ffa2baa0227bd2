"""A fold into a throw-away work file, in chunks of seq; imports the fold's rooms and store.

A :class:`ScratchFold` is a new SQLite file with the live database attached
as ``live``: it creates every projection without its secondary indexes (the
first fold of a process runs their DDL and keeps the file's bytes as a
template, later ones start from a copy of it: :class:`Template`), folds
the log in chunks of seq (one transaction each, so memory stays flat however
long the log is), splitting long folds with a forked process, and indexes
the tables afterwards (ADR 0013).  :func:`scratch_fold` makes one and deletes
it whatever happens; replay, rebuild and verify build on it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple

from pwf import logs
from pwf._sqlite import exact_text, transaction
from pwf.errors import ChainError
from pwf.fold import scratchfiles
from pwf.fold.bulk import BulkFold
from pwf.fold.chain import Chain
from pwf.fold.decode import decoded
from pwf.fold.parallel import fold
from pwf.projections import PROJECTIONS
from pwf.readmodel import CHECKPOINT_TABLE
from pwf.store import EMPTY, Head, origin_of
from pwf.store.schema import FORMAT
from pwf.store.sqlite_rows import chain_rows
from pwf.store.sqlite_schema import APPLICATION_ID, HEAD_UPSERT, SCHEMA, TREE_DDL, translate_error
from pwf.store.tree import EMPTY_TREE, Tree, extend, leaf_of

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pwf.store import ProjectionFile

__all__ = ["CHUNK", "TEMPLATES", "Progress", "ScratchFold", "Template", "scratch_fold"]

CHUNK: Final = 10_000
"""Events folded per transaction: enough to amortise a commit, few enough to stream."""

Progress = Callable[[int, int], None]
"""Told ``(events folded so far, events to fold)`` after every chunk."""

_SCRATCH_PRAGMAS: Final = (
    # A scratch file is deleted on any error, so it needs neither a journal nor fsync.
    "PRAGMA main.journal_mode = OFF",
    "PRAGMA main.synchronous = OFF",
    "PRAGMA temp_store = FILE",
)


class Template(NamedTuple):
    """A scratch file just after :meth:`ScratchFold.install`, and what its fold left for later."""

    image: bytes
    """The file's bytes: the schema, the checkpoint rows, nothing folded."""
    deferred: tuple[tuple[str, str], ...]
    """:attr:`pwf.fold.bulk.BulkFold.deferred` after the install."""
    unchecked: tuple[tuple[str, str, tuple[str, ...]], ...]
    """:attr:`pwf.fold.bulk.BulkFold.unchecked` after the install."""


TEMPLATES: Final[dict[tuple[object, ...], Template]] = {}
"""This process's templates, by :func:`_template_key` (forked processes inherit them).

Built from the schema code that runs, never read from elsewhere; a
process that folds once pays the DDL once, as before (ADR 0058).
"""


_COPY: Final = (
    (
        "INSERT OR IGNORE INTO main._pwf_batches SELECT * FROM live._pwf_batches"
        " WHERE seq IN (SELECT head FROM live._pwf_events WHERE seq BETWEEN ?1 AND ?2)"
        " ORDER BY seq"
    ),
    (
        "INSERT INTO main._pwf_events SELECT * FROM live._pwf_events"
        " WHERE seq BETWEEN ? AND ? ORDER BY seq"
    ),
    (
        "INSERT INTO main._pwf_whole SELECT * FROM live._pwf_whole"
        " WHERE seq BETWEEN ? AND ? ORDER BY seq"
    ),
    (
        "INSERT INTO main._pwf_pruned SELECT * FROM live._pwf_pruned"
        " WHERE seq BETWEEN ? AND ? ORDER BY seq"
    ),
)
"""Copy the log's rows of seqs ``?1..?2`` (and their batches) as they are stored (ADR 0102)."""


def _template_key(copy_events: bool) -> tuple[object, ...]:
    """Everything the bytes of a freshly installed scratch file depend on."""
    projections = tuple((p.NAME, p.VERSION, tuple(p.DDL)) for p in PROJECTIONS)
    log = (SCHEMA, FORMAT, APPLICATION_ID) if copy_events else (CHECKPOINT_TABLE,)
    return (copy_events, log, projections, _SCRATCH_PRAGMAS, sqlite3.sqlite_version)


class ScratchFold:
    """A scratch database with the live one attached as ``live``; folds its log in chunks."""

    bulk: BulkFold | None = None
    """While a forked process folds some read models, the model of the caller's others."""

    def __init__(  # noqa: PLR0913 - each keyword shapes the fold
        self,
        path: Path,
        connection: sqlite3.Connection,
        *,
        copy_events: bool,
        progress: Progress | None,
        chunk: int,
        verified: int = 0,
        template: Template | None = None,
    ) -> None:
        """Fold from ``live.events``; with ``copy_events`` copy those rows into ``main`` too.

        The content hashes of the events up to seq ``verified`` are trusted.
        ``template`` is what the file was written from before it was opened.
        """
        self.path = path
        self.template = template
        self.connection = connection
        self.copy_events = copy_events
        self.progress = progress
        self.chunk = chunk
        self.model = BulkFold()
        row = connection.execute("SELECT seq, body FROM live.events ORDER BY seq LIMIT 1")
        found = row.fetchone()
        self.chain = Chain(EMPTY if found is None else origin_of(found[0], found[1]), verified)
        self.total = 0
        self.tree: Tree | None = None
        """The copy's Merkle tree so far (with ``copy_events``)."""

    def install(self) -> None:
        """Create the bookkeeping tables (and the log's, when copying) and every projection.

        The projections' secondary indexes wait for :meth:`index`, after the bulk of the fold.
        A file written from a :class:`Template` holds all that already; the
        first install of a process keeps its file's bytes as the template.
        """
        template = self.template
        if template is not None:
            self.connection.execute("PRAGMA ignore_check_constraints = ON")
            self.model.deferred = list(template.deferred)
            self.model.unchecked = [(n, t, list(c)) for n, t, c in template.unchecked]
            return
        key = _template_key(self.copy_events)
        with transaction(self.connection):
            if self.copy_events:
                for statement in SCHEMA:
                    self.connection.execute(statement)
                self.connection.execute(
                    "INSERT INTO _pwf_meta (key, value) VALUES ('format', ?)", (FORMAT,)
                )
                self.connection.execute(f"PRAGMA main.application_id = {APPLICATION_ID}")
            else:
                self.connection.execute(CHECKPOINT_TABLE)
            self.model.install(self.connection)
        if self.model.projections == PROJECTIONS:
            # Journal off: the commit left every page in the file.
            TEMPLATES[key] = Template(
                self.path.read_bytes(),
                tuple(self.model.deferred),
                tuple((n, t, tuple(c)) for n, t, c in self.model.unchecked),
            )

    def index(self) -> None:
        """Create the indexes :meth:`install` left out; what is folded after keeps them up."""
        with transaction(self.connection):
            self.model.create_indexes(self.connection)

    def live_head(self) -> Head:
        """The live log's head, as the current transaction (if any) sees it."""
        row = self.connection.execute("SELECT seq, content_hash, batch FROM live._pwf_head")
        found = row.fetchone()
        return Head(seq=found[0], content_hash=found[1], batch=found[2]) if found else EMPTY

    def fold_split(self, last: int) -> None:
        """:meth:`fold_until` ``last``, with a forked process for some read models when it pays.

        See :func:`pwf.fold.parallel.fold`: this process reads and checks the
        chain and folds the read models the forked process leaves to it.
        """
        fold(self, self.chain.head.seq + 1, last, decoded)

    def fold_until(self, last: int) -> None:
        """Fold every event after the chain's head up to seq ``last``, committing per chunk."""
        self.total = max(self.total, last)
        while self.chain.head.seq < last:
            first = self.chain.head.seq + 1
            self._chunk(first, min(first + self.chunk - 1, last))

    def _chunk(self, first: int, last: int) -> None:
        connection = self.connection
        with transaction(connection):
            if self.copy_events:
                for statement in _COPY:
                    connection.execute(statement, (first, last))
            schema = "main." if self.copy_events else "live."
            rows = chain_rows(connection, first, last, schema=schema)
            model = self.model if self.bulk is None else self.bulk
            model.fold(connection, self.chain.entries(rows))
            head = self.chain.head
            if head.seq != last:
                raise ChainError(head.seq + 1, f"seq {head.seq + 1} is missing from the log")
            if self.copy_events:
                connection.execute(HEAD_UPSERT, (head.seq, head.content_hash, head.batch))
                self._grow_tree(first, last)
        if self.progress is not None:
            self.progress(last, self.total)

    def _grow_tree(self, first: int, last: int) -> None:
        """Add the copied events ``first..last`` to the copy's Merkle tree (ADR 0083).

        The tree is made from the copied bytes, not copied: a copy of a file
        not yet upgraded gets its tree all the same.
        """
        connection = self.connection
        tree = self.tree
        if tree is None:
            connection.execute(TREE_DDL.format(schema="main"))
            tree = EMPTY_TREE
        bodies = connection.execute(
            "SELECT e.seq, e.body, p.leaf FROM main.events e"
            " LEFT JOIN main._pwf_pruned p ON p.seq = e.seq"
            " WHERE e.seq BETWEEN ? AND ? ORDER BY e.seq",
            (first, last),
        )
        self.tree = extend(connection, tree, first, (leaf_of(*row) for row in bodies))


@contextlib.contextmanager
def scratch_fold(  # noqa: PLR0913 - each keyword shapes the scratch database
    store: ProjectionFile,
    beside: Path,
    infix: str,
    *,
    copy_events: bool,
    writable: bool,
    progress: Progress | None,
    chunk: int,
    anywhere: bool = False,
    verified: int = 0,
) -> Iterator[ScratchFold]:
    """A new SQLite file next to ``beside``, deleted when the block ends, whatever happens.

    With ``anywhere`` it goes to the system's temporary directory when
    ``beside``'s directory is not writable.  The live database is attached
    read-only unless ``writable``; sqlite3 errors leave the block as pwf's.
    The file is held while it lives (:mod:`pwf.fold.scratchfiles`), and scratch
    files of ``beside`` that a killed fold left are swept first, each with a
    warning.
    """
    path, held = _scratch_file(beside, infix, anywhere=anywhere)
    try:
        template = TEMPLATES.get(_template_key(copy_events))
        if template is not None:
            _write_all(held, template.image)
        connection = exact_text(sqlite3.connect(path, isolation_level=None))
        try:
            _attach_live(connection, store, writable=writable)
            yield ScratchFold(
                path,
                connection,
                copy_events=copy_events,
                progress=progress,
                chunk=chunk,
                verified=verified,
                template=template,
            )
        except sqlite3.Error as error:
            raise translate_error(error, store.path) from None
        finally:
            connection.close()
    finally:
        scratchfiles.release(path, held)


def _scratch_file(beside: Path, infix: str, *, anywhere: bool) -> tuple[Path, int]:
    """A new scratch file next to ``beside`` (or, ``anywhere``, in the temporary directory).

    Scratch files of ``beside`` that a killed fold left are swept, each with
    a warning.
    """
    prefix = f"{beside.name}.{infix}-"
    try:
        path, held = scratchfiles.make(prefix, beside.parent)
    except OSError:
        if not anywhere:
            raise
        path, held = scratchfiles.make(prefix, None)
    for orphan in scratchfiles.sweep(beside, path):
        logs.warning("scratch.orphan_removed", path=str(orphan))
    return path, held


def _attach_live(connection: sqlite3.Connection, store: ProjectionFile, *, writable: bool) -> None:
    """Set the scratch file's pragmas and attach the live database as ``live``."""
    for pragma in _SCRATCH_PRAGMAS:
        connection.execute(pragma)
    connection.execute(f"PRAGMA busy_timeout = {store.busy_timeout_ms}")
    mode = "rw" if writable else "ro"
    connection.execute("ATTACH DATABASE ? AS live", (f"{store.path.as_uri()}?mode={mode}",))
    if writable:
        connection.execute(f"PRAGMA live.synchronous = {store.synchronous_level}")


def _write_all(descriptor: int, data: bytes) -> None:
    """Write ``data`` at the start of the empty file behind ``descriptor``."""
    view = memoryview(data)
    while view:
        view = view[os.pwrite(descriptor, view, len(data) - len(view)) :]
