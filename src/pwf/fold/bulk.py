"""The bulk fold: many events into new tables, their indexes and CHECKs after; imports readmodel.

Replay and rebuild run the projections of the live path (:class:`~pwf.readmodel.ReadModel`)
through :meth:`BulkFold.fold`, which moves the checkpoints once per call and routes events the
same way.  A fold into new tables leaves their secondary indexes, CHECK constraints and
kept-row triggers to :meth:`BulkFold.create_indexes` (ADR 0013).  :func:`rebuild_into` is the
whole of it on one connection, for a fold small enough to need neither chunks nor a scratch file.
"""

from __future__ import annotations

import contextlib
import gc
import re
import sqlite3
from typing import TYPE_CHECKING, Final

from pwf._sqlite import exact_statement
from pwf.errors import StoreError
from pwf.projections import PROJECTIONS, Projection, Statement
from pwf.projections.blobs import UPSERT
from pwf.readmodel import CHECKPOINT_TABLE, ReadModel

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from pwf.events import Entry

__all__ = ["STATEMENTS_HELD", "BulkFold", "check_expressions", "rebuild_into", "run_statements"]

_INDEX: Final = re.compile(
    r"\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE
)
_TRIGGER: Final = re.compile(r"\s*CREATE\s+TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_TABLE: Final = re.compile(r"\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_CHECK: Final = re.compile(r"\bCHECK\s*\(", re.IGNORECASE)

STATEMENTS_HELD: Final = 25_000
"""A fold executes its statements in runs of about this many (a chunk of ten thousand events)."""


class BulkFold(ReadModel):
    """Projections folded in bulk into new tables, their indexes and CHECKs left for the end."""

    def __init__(self, projections: Sequence[Projection] = PROJECTIONS) -> None:
        """Keep the projections in application order; nothing is deferred yet."""
        super().__init__(projections)
        self.deferred: list[tuple[str, str]] = []
        """(projection name, CREATE INDEX statement) left by ``install`` for later."""
        self.unchecked: list[tuple[str, str, list[str]]] = []
        """(projection name, table, CHECK expressions) that ``install`` left for later."""
        self._kept: set[str] = set()
        """The read models whose kept rows :meth:`_keep` made."""

    def install(self, connection: sqlite3.Connection) -> None:
        """Create every projection's tables and checkpoint rows, deferring indexes and CHECKs.

        The ``CREATE [UNIQUE] INDEX`` statements are kept in :attr:`deferred`
        instead, for :meth:`create_indexes` to run once the tables are filled:
        a bulk fold then maintains only the primary keys and inline ``UNIQUE``
        constraints, which its upserts need.  So are the ``CREATE TRIGGER``
        statements of a read model that says how to make the rows they keep
        from its tables (its ``KEPT``: the runs' totals, ADR 0094).  The tables' CHECK constraints
        wait too (``PRAGMA ignore_check_constraints``, a third of the
        statements' cost): :meth:`create_indexes` checks every row against
        them before it creates an index.
        """
        connection.execute("PRAGMA ignore_check_constraints = ON")
        super().install(connection)

    def _create(self, connection: sqlite3.Connection, name: str, statement: str) -> None:
        """Run one DDL statement of projection ``name``, or keep it for :meth:`create_indexes`."""
        if _INDEX.match(statement) or (_TRIGGER.match(statement) and _kept_by(self, name)):
            self.deferred.append((name, statement))
            return
        connection.execute(statement)
        table = _TABLE.match(statement)
        checks = check_expressions(statement)
        if table and checks:
            self.unchecked.append((name, table.group(1), checks))

    def create_indexes(self, connection: sqlite3.Connection) -> None:
        """Check the deferred CHECK constraints, then create the deferred indexes and triggers.

        A read model's triggers come after the rows they keep were made from
        its tables (:meth:`_keep`).

        From here on every statement checks its constraints again.  Indexes
        come in the order the projections list them.

        Raises:
            StoreError: the rows break a CHECK constraint or a unique index:
                the log holds what the live path would have refused, so it
                cannot be folded.
        """
        self.check_constraints(connection)
        while self.deferred:
            name, statement = self.deferred[0]
            if _TRIGGER.match(statement) and name not in self._kept:
                self._keep(connection, name)
            try:
                connection.execute(statement)
            except sqlite3.IntegrityError as error:
                found = _INDEX.match(statement)
                index = found.group(1) if found else statement[:60]
                raise StoreError(
                    f"the log cannot be folded: read model {name} breaks its index {index}"
                    f" ({error})"
                ) from None
            del self.deferred[0]

    def _keep(self, connection: sqlite3.Connection, name: str) -> None:
        """Make the rows read model ``name``'s triggers keep, from its folded tables, once.

        Its triggers wait with the indexes: run row by row they would cost a
        bulk fold about a sixth of its statements' time, and their kept rows
        are made at once here (the read model's ``KEPT``) before they are
        created, to be kept by them from then on.
        """
        for statement in _kept_by(self, name):
            connection.execute(statement)
        self._kept.add(name)

    def check_constraints(self, connection: sqlite3.Connection) -> None:
        """Enforce CHECK constraints again and check the rows ``install`` let in unchecked.

        Each table's rows are scanned once for a row that makes one of its
        CHECK expressions false, as SQLite would have refused it.

        Raises:
            StoreError: a row breaks a CHECK constraint of its table.
        """
        if not self.unchecked:
            return
        connection.execute("PRAGMA ignore_check_constraints = OFF")
        while self.unchecked:
            name, table, checks = self.unchecked[0]
            where = " OR ".join(f"NOT ({check})" for check in checks)
            found = connection.execute(
                f"SELECT rowid FROM main.{table} WHERE {where} LIMIT 1"
            ).fetchone()
            if found is not None:
                broken = next(
                    check
                    for check in checks
                    if connection.execute(
                        f"SELECT NOT ({check}) FROM main.{table} WHERE rowid = ?",
                        found,
                    ).fetchone()[0]
                )
                raise StoreError(
                    f"the log cannot be folded: read model {name} breaks a CHECK constraint"
                    f" of {table}, rowid {found[0]}: CHECK ({' '.join(broken.split())})"
                )
            del self.unchecked[0]

    def fold(self, connection: sqlite3.Connection, entries: Iterable[Entry]) -> int:
        """Fold ``entries`` in seq order and advance the checkpoints once, to the last one.

        The rows are what the live append hook (:class:`~pwf.readmodel.ReadModel`) writes
        event by event; moving the checkpoints once per call instead of once
        per event and projection, and offering each event only to the handlers
        of its class, is what makes a rebuild fast.  The statements of all the
        entries are built first and executed after, in the same order: SQLite
        then runs in a tight loop that keeps its code and pages hot, which
        saves a tenth of the fold.  The cyclic garbage collector waits
        meanwhile, as nothing built here forms a cycle.  Returns the number of
        events folded.
        """
        routes, route = self._routes, self.handlers
        execute = connection.cursor().execute  # one cursor: no new object per statement
        statements: list[Statement] = []
        stored: set[tuple[object, object]] = set()
        add = statements.extend
        count, last = 0, None
        collecting = gc.isenabled()
        gc.disable()
        try:
            for entry in entries:
                cls = type(entry.event)
                for handler in routes[cls] if cls in routes else route(cls):
                    add(handler(entry))
                count, last = count + 1, entry.seq
                if len(statements) >= STATEMENTS_HELD:
                    run_statements(execute, statements, stored)
                    statements.clear()
            run_statements(execute, statements, stored)
        finally:
            if collecting:
                gc.enable()
        if last is not None:
            connection.executemany(
                "UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection = ?",
                [(last, projection.NAME) for projection in self.projections],
            )
        return count


def _kept_by(model: ReadModel, name: str) -> tuple[str, ...]:
    """Read model ``name``'s ``KEPT``: what makes the rows its triggers keep; none without."""
    projection = next(p for p in model.projections if name == p.NAME)
    kept: tuple[str, ...] = getattr(projection, "KEPT", ())
    return kept


def check_expressions(ddl: str) -> list[str]:
    """The expressions of every ``CHECK (...)`` in a ``CREATE TABLE`` statement, in order.

    Parentheses are balanced outside single-quoted strings; the projections'
    DDL holds no comments and no ``CHECK (`` inside a string.
    """
    found = []
    start = 0
    while match := _CHECK.search(ddl, start):
        depth, quoted, at = 1, False, match.end()
        while depth:
            char = ddl[at]
            if quoted:
                quoted = char != "'"
            elif char == "'":
                quoted = True
            elif char in "()":
                depth += 1 if char == "(" else -1
            at += 1
        found.append(ddl[match.end() : at - 1])
        start = at
    return found


def run_statements(
    execute: Callable[[str, Sequence[object]], object],
    statements: list[Statement],
    stored: set[tuple[object, object]],
) -> None:
    """Execute statements in order; text with a lone surrogate is bound exactly (ADR 0071).

    A blob whose hash and media type are in ``stored`` is not upserted
    again: in the same transaction :data:`~pwf.projections.blobs.UPSERT`
    would change nothing (its first carrier dated it), as the live read model
    skips it.  ``stored`` gains each blob upserted; the caller keeps it for
    one transaction.
    """
    for text, params in statements:
        if text is UPSERT:
            key = (params[0], params[1])
            if key in stored:
                continue
            stored.add(key)
        try:
            execute(text, params)
        except UnicodeEncodeError:
            execute(*exact_statement(text, params))


def rebuild_into(
    connection: sqlite3.Connection,
    entries: Iterable[Entry],
    projections: Sequence[Projection] = PROJECTIONS,
) -> int:
    """Fold ``entries`` into fresh projection tables on ``connection``; return the events folded.

    Indexes the tables lack are created after the fold, as a rebuild does.
    """
    model = BulkFold(projections)
    connection.execute(CHECKPOINT_TABLE)
    model.install(connection)
    try:
        count = model.fold(connection, entries)
        model.create_indexes(connection)
    finally:
        with contextlib.suppress(sqlite3.Error):  # keep the fold's own error
            connection.execute("PRAGMA ignore_check_constraints = OFF")
    return count
