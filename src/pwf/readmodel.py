"""Run projections inside the append transaction; imports projections, events, errors, sqlite3.

:class:`ReadModel` is an append hook: for every sealed event it executes each
projection's statements and then moves ``_pwf_checkpoint`` to that seq, all
through the store's own connection, so rows and checkpoint commit together
with the batch (ADR 0005).  Replay and rebuild run the same projections through
:meth:`ReadModel.fold`, which moves the checkpoints once per call and sends
each event only to the handlers of its class; a fold into new tables may leave
their secondary indexes to :meth:`ReadModel.create_indexes` (ADR 0013).
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING, Final

from pwf.errors import StoreError
from pwf.projections import PROJECTIONS, Projection

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from pwf.events import Entry, Event, Sealed
    from pwf.projections import Sql

    Handlers = tuple[Callable[[Entry], list[Sql]], ...]

__all__ = ["ReadModel", "dump", "projection_tables", "rebuild_into"]

_INDEX: Final = re.compile(
    r"\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE
)


class ReadModel:
    """Projections applied live, inline with every append."""

    def __init__(self, projections: Sequence[Projection] = PROJECTIONS) -> None:
        """Keep the projections in application order."""
        self.projections = tuple(projections)
        self.deferred: list[tuple[str, str]] = []
        """(projection name, CREATE INDEX statement) left by ``install`` for later."""
        self._routes: dict[type[Event], Handlers] = {}

    def install(self, connection: sqlite3.Connection, *, defer_indexes: bool = False) -> None:
        """Create every projection's tables and a checkpoint row at its version.

        With ``defer_indexes`` the ``CREATE [UNIQUE] INDEX`` statements are
        kept in :attr:`deferred` instead, for :meth:`create_indexes` to run
        once the tables are filled: a bulk fold then maintains only the
        primary keys and inline ``UNIQUE`` constraints, which its upserts need.
        """
        for projection in self.projections:
            for statement in projection.DDL:
                if defer_indexes and _INDEX.match(statement):
                    self.deferred.append((projection.NAME, statement))
                else:
                    connection.execute(statement)
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

    def create_indexes(self, connection: sqlite3.Connection) -> None:
        """Create the indexes ``install`` deferred, in the order the projections list them.

        Raises:
            StoreError: the rows break a unique index: the log holds what the
                live path would have refused, so it cannot be folded.
        """
        while self.deferred:
            name, statement = self.deferred[0]
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

    def handlers(self, cls: type[Event]) -> Handlers:
        """What folds an event of class ``cls``: each projection's handler for it, in order.

        A projection with ``HANDLERS`` contributes its handler for ``cls``, if
        any; one without contributes its ``apply``.
        """
        found = self._routes.get(cls)
        if found is None:
            chosen: list[Callable[[Entry], list[Sql]]] = []
            for projection in self.projections:
                table: Mapping[type[Event], Callable[[Entry], list[Sql]]] | None = getattr(
                    projection, "HANDLERS", None
                )
                if table is None:
                    chosen.append(projection.apply)
                elif cls in table:
                    chosen.append(table[cls])
            found = self._routes[cls] = tuple(chosen)
        return found

    def apply_entry(self, connection: sqlite3.Connection, entry: Entry) -> None:
        """Fold one event into every projection and advance their checkpoints."""
        for projection in self.projections:
            for text, params in projection.apply(entry):
                connection.execute(text, params)
            connection.execute(
                "UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection = ?",
                (entry.seq, projection.NAME),
            )

    def fold(self, connection: sqlite3.Connection, entries: Iterable[Entry]) -> int:
        """Fold ``entries`` in seq order and advance the checkpoints once, to the last one.

        The rows are what :meth:`apply_entry` writes event by event; moving the
        checkpoints once per call instead of once per event and projection, and
        offering each event only to the handlers of its class, is what makes a
        rebuild fast.  Returns the number of events folded.
        """
        execute = connection.cursor().execute  # one cursor: no new object per statement
        routes, route = self._routes, self.handlers
        count, last = 0, None
        for entry in entries:
            cls = type(entry.event)
            for handler in routes[cls] if cls in routes else route(cls):
                for text, params in handler(entry):
                    execute(text, params)
            count, last = count + 1, entry.seq
        if last is not None:
            connection.executemany(
                "UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection = ?",
                [(last, projection.NAME) for projection in self.projections],
            )
        return count

    def __call__(self, connection: object, batch: Sequence[Sealed]) -> None:
        """Append hook: project a freshly written batch."""
        assert isinstance(connection, sqlite3.Connection)
        for item in batch:
            self.apply_entry(connection, item.entry)


def projection_tables(connection: sqlite3.Connection) -> list[str]:
    """The projection tables of a database (bookkeeping and log tables excluded), sorted."""
    rows = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'"
        " AND name NOT LIKE '\\_pwf\\_%' ESCAPE '\\'"
        " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name != 'events' ORDER BY name"
    ).fetchall()
    return [row[0] for row in rows]


def dump(connection: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every projection row, table by table, in a stable order (all columns)."""
    tables: dict[str, list[tuple[object, ...]]] = {}
    for table in projection_tables(connection):
        columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
        order = ", ".join(columns)
        tables[table] = connection.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
    return tables


def rebuild_into(
    connection: sqlite3.Connection,
    entries: Iterable[Entry],
    projections: Sequence[Projection] = PROJECTIONS,
) -> int:
    """Fold ``entries`` into fresh projection tables on ``connection``; return the events folded.

    Indexes the tables lack are created after the fold, as a rebuild does.
    """
    model = ReadModel(projections)
    connection.execute(
        "CREATE TABLE IF NOT EXISTS _pwf_checkpoint (projection TEXT PRIMARY KEY,"
        " version INTEGER NOT NULL, last_seq INTEGER NOT NULL) STRICT"
    )
    model.install(connection, defer_indexes=True)
    count = model.fold(connection, entries)
    model.create_indexes(connection)
    return count
