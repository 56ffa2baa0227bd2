"""Run projections inside the append transaction; imports projections, events, errors, sqlite3.

:class:`ReadModel` is an append hook: for every sealed event it executes the
statements of the projections that handle its class, and once per
transaction, just before the commit, it moves ``_pwf_checkpoint`` to the
transaction's head, all through the store's own connection, so rows and
checkpoint commit together with the batch (ADR 0005, ADR 0033).  It also
installs the projections' tables; replay and rebuild fold through its bulk
form, :class:`pwf.fold.bulk.BulkFold` (ADR 0013).  :class:`RowReader` (kept in
:mod:`pwf.sqlreader`, which the store uses too) reads rows by column name
for the deciders, which see it only as :class:`pwf.commands.Reader`.
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING, Final

from pwf._sqlite import exact_statement
from pwf.errors import BlobConflictError, StoreError
from pwf.projections import PROJECTIONS, Projection
from pwf.projections.blobs import BLOB_CONFLICT, UPSERT
from pwf.sqlreader import RowReader

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pwf.events import Entry, Event, Sealed
    from pwf.projections import Statement

    Handler = Callable[[Entry], Sequence[Statement]]
    Handlers = tuple[Handler, ...]

__all__ = ["CHECKPOINT_TABLE", "ReadModel", "RowReader", "indexes_current", "install_indexes"]


CHECKPOINT_TABLE: Final = """CREATE TABLE IF NOT EXISTS _pwf_checkpoint (
  projection TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
) STRICT"""
"""Each projection's version and last folded seq; the store's schema creates the same table."""


_INDEX: Final = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+ON\s+(\w+)\s*\("
)


def _missing_indexes(connection: sqlite3.Connection) -> dict[str, str]:
    """The projections' indexes the file lacks on tables it holds: name and statement.

    A table the file does not hold is not made here: a projection that
    lost a table is for ``pwf verify`` and ``pwf rebuild`` to name and mend.
    Nor is a projection at another version: its tables have another shape,
    which only ``pwf rebuild`` replaces, with every index (ADR 0085).
    """
    held: dict[str, set[str]] = {}
    for kind, name in connection.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index')"
    ):
        held.setdefault(kind, set()).add(name)
    versions: dict[str, int] = {}
    if "_pwf_checkpoint" in held.get("table", set()):
        versions = dict(connection.execute("SELECT projection, version FROM _pwf_checkpoint"))
    missing: dict[str, str] = {}
    for projection in PROJECTIONS:
        if versions.get(projection.NAME, projection.VERSION) != projection.VERSION:
            continue
        for statement in projection.DDL:
            match = _INDEX.match(statement)
            if match is None or match.group(1) in held.get("index", set()):
                continue
            if match.group(2) in held.get("table", set()):
                missing[match.group(1)] = statement
    return missing


def indexes_current(connection: sqlite3.Connection) -> bool:
    """Whether the file holds every index of the projections' DDL on its tables (reads only).

    A database made before an index was added (ADR 0077) answers false;
    :func:`install_indexes` makes the missing ones.  Adding an index keeps a
    projection's version: its rows, and so the digests, are the same.
    """
    return not _missing_indexes(connection)


def install_indexes(connection: sqlite3.Connection) -> list[str]:
    """Create the projections' indexes the file lacks on its tables; their names."""
    missing = _missing_indexes(connection)
    for statement in missing.values():
        connection.execute(statement)
    return list(missing)


def stale_projections(connection: sqlite3.Connection) -> list[str]:
    """The projections the file holds at another version than this pwf reads (reads only).

    A database written before a projection's version moved (ADR 0085, ADR
    0094) has tables of the old shape until ``pwf rebuild``; a reader that
    fails on them names these, so the operator learns the cure, not only
    the missing table.
    """
    try:
        versions = dict(connection.execute("SELECT projection, version FROM _pwf_checkpoint"))
    except sqlite3.Error:
        return []
    return [
        f"{projection.NAME} is at version {versions[projection.NAME]},"
        f" this pwf reads version {projection.VERSION}"
        for projection in PROJECTIONS
        if versions.get(projection.NAME, projection.VERSION) != projection.VERSION
    ]


class ReadModel:
    """Projections applied live, inline with every append."""

    def __init__(self, projections: Sequence[Projection] = PROJECTIONS) -> None:
        """Keep the projections in application order."""
        self.projections = tuple(projections)
        self._routes: dict[type[Event], Handlers] = {}
        self._names = tuple(projection.NAME for projection in self.projections)
        self._settle: str | None = None
        self._stored: set[tuple[object, object]] = set()
        """(hash, media type) of each blob upserted in this transaction since its last rollback."""

    def install(self, connection: sqlite3.Connection) -> None:
        """Create every projection's tables and indexes, and a checkpoint row at its version.

        Raises:
            StoreError: a checkpoint row holds another version of its projection.
        """
        for projection in self.projections:
            for statement in projection.DDL:
                self._create(connection, projection.NAME, statement)
            row = connection.execute(
                "SELECT version FROM _pwf_checkpoint WHERE projection = ?", (projection.NAME,)
            ).fetchone()
            if row is None:
                connection.execute(
                    "INSERT INTO _pwf_checkpoint (projection, version, last_seq) VALUES (?, ?, 0)",
                    (projection.NAME, projection.VERSION),
                )
            elif row[0] != projection.VERSION:
                raise StoreError(
                    f"projection {projection.NAME} is at version {row[0]},"
                    f" this pwf writes version {projection.VERSION}: run `pwf rebuild`"
                )

    def _create(self, connection: sqlite3.Connection, _name: str, statement: str) -> None:
        """Run one DDL statement of projection ``_name`` (a bulk fold defers some)."""
        connection.execute(statement)

    def handlers(self, cls: type[Event]) -> Handlers:
        """What folds an event of class ``cls``: each projection's handler for it, in order.

        A projection with ``HANDLERS`` contributes its handler for ``cls``, if
        any; one without contributes its ``apply``.
        """
        found = self._routes.get(cls)
        if found is None:
            chosen: list[Handler] = []
            for projection in self.projections:
                table: Mapping[type[Event], Handler] | None = getattr(projection, "HANDLERS", None)
                if table is None:
                    chosen.append(projection.apply)
                elif cls in table:
                    chosen.append(table[cls])
            found = self._routes[cls] = tuple(chosen)
        return found

    def __call__(self, connection: object, batch: Sequence[Sealed]) -> None:
        """Append hook: project a freshly written batch; :meth:`settle` moves the checkpoints.

        Each event goes to the handlers of its class only, as in a bulk fold,
        so a projection that ignores it executes nothing (ADR 0033).
        A blob already upserted in this transaction is not upserted again
        (:data:`pwf.projections.blobs.UPSERT` would change nothing): a group
        of served requests stores one workflow's definition once, not once per
        request.  The store calls :meth:`forget` when a transaction begins and
        whenever a savepoint rolls back.
        """
        assert isinstance(connection, sqlite3.Connection)
        routes, route = self._routes, self.handlers
        execute = connection.execute
        stored = self._stored
        for item in batch:
            entry = item.entry
            cls = type(entry.event)
            for handler in routes[cls] if cls in routes else route(cls):
                for text, params in handler(entry):
                    if text is UPSERT:
                        key = (params[0], params[1])
                        if key in stored:
                            continue
                        _upsert(connection, params)
                        stored.add(key)
                        continue
                    try:
                        execute(text, params)
                    except UnicodeEncodeError:  # a lone surrogate: bound exactly (ADR 0071)
                        execute(*exact_statement(text, params))

    def forget(self) -> None:
        """A transaction began or a savepoint rolled back: no blob is known to be stored."""
        self._stored.clear()

    def settle(self, connection: object, seq: int) -> None:
        """Before the commit: move every projection's checkpoint to ``seq``, the new head.

        The append hook projected every event up to ``seq``, so one statement
        per transaction keeps the checkpoints exact (ADR 0033).
        """
        assert isinstance(connection, sqlite3.Connection)
        self._stored.clear()
        if self._settle is None:
            marks = ", ".join("?" for _ in self.projections)
            self._settle = f"UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection IN ({marks})"
        connection.execute(self._settle, (seq, *self._names))


def _upsert(connection: sqlite3.Connection, params: Sequence[object]) -> None:
    """Store one blob; its hash under another media type breaks NOT NULL, by design.

    Raises:
        BlobConflictError: the hash is stored with another media type (SQLite's
            ``SQLITE_CONSTRAINT_NOTNULL``, the only constraint the upsert provokes).
    """
    try:
        connection.execute(UPSERT, params)
    except sqlite3.IntegrityError as error:
        if error.sqlite_errorcode == sqlite3.SQLITE_CONSTRAINT_NOTNULL:
            raise BlobConflictError(BLOB_CONFLICT) from None
        raise
