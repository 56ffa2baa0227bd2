"""Run projections inside the append transaction; imports projections, events, errors, sqlite3.

:class:`ReadModel` is an append hook: for every sealed event it executes the
statements of the projections that handle its class, and once per
transaction, just before the commit, it moves ``_pwf_checkpoint`` to the
transaction's head, all through the store's own connection, so rows and
checkpoint commit together with the batch (ADR 0005, ADR 0033).  Replay and
rebuild run the same projections through :meth:`ReadModel.fold`, which moves
the checkpoints once per call and routes events the same way; a fold into new
tables may leave their secondary indexes and CHECK constraints to
:meth:`ReadModel.create_indexes` (ADR 0013).
"""

from __future__ import annotations

import contextlib
import gc
import re
import sqlite3
from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.errors import StoreError
from pwf.projections import PROJECTIONS, Projection, Statement

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from pwf.commands import Row
    from pwf.events import Entry, Event, Sealed

    Handler = Callable[[Entry], Sequence[Statement]]
    Handlers = tuple[Handler, ...]

__all__ = [
    "CHECKPOINT_TABLE",
    "ReadModel",
    "RowReader",
    "check_expressions",
    "drop_views",
    "dump",
    "install_views",
    "projection_tables",
    "rebuild_into",
    "views_current",
]

_INDEX: Final = re.compile(
    r"\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE
)
_TABLE: Final = re.compile(r"\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_CHECK: Final = re.compile(r"\bCHECK\s*\(", re.IGNORECASE)


CHECKPOINT_TABLE: Final = """CREATE TABLE IF NOT EXISTS _pwf_checkpoint (
  projection TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
) STRICT"""
"""Each projection's version and last folded seq; the store's schema creates the same table."""

STATEMENTS_HELD: Final = 25_000
"""A fold executes its statements in runs of about this many (a chunk of ten thousand events)."""


class ReadModel:
    """Projections applied live, inline with every append."""

    def __init__(self, projections: Sequence[Projection] = PROJECTIONS) -> None:
        """Keep the projections in application order."""
        self.projections = tuple(projections)
        self.deferred: list[tuple[str, str]] = []
        """(projection name, CREATE INDEX statement) left by ``install`` for later."""
        self.unchecked: list[tuple[str, str, list[str]]] = []
        """(projection name, table, CHECK expressions) that ``install`` left for later."""
        self._routes: dict[type[Event], Handlers] = {}
        self._names = tuple(projection.NAME for projection in self.projections)
        self._settle: str | None = None

    def install(self, connection: sqlite3.Connection, *, defer_indexes: bool = False) -> None:
        """Create every projection's tables and a checkpoint row at its version.

        With ``defer_indexes`` the ``CREATE [UNIQUE] INDEX`` statements are
        kept in :attr:`deferred` instead, for :meth:`create_indexes` to run
        once the tables are filled: a bulk fold then maintains only the
        primary keys and inline ``UNIQUE`` constraints, which its upserts need.
        The tables' CHECK constraints wait too (``PRAGMA
        ignore_check_constraints``, a third of the statements' cost):
        :meth:`create_indexes` checks every row against them before it
        creates an index.
        """
        if defer_indexes:
            connection.execute("PRAGMA ignore_check_constraints = ON")
        for projection in self.projections:
            for statement in projection.DDL:
                if defer_indexes and _INDEX.match(statement):
                    self.deferred.append((projection.NAME, statement))
                else:
                    connection.execute(statement)
                    table = _TABLE.match(statement)
                    checks = check_expressions(statement)
                    if table and checks and defer_indexes:
                        self.unchecked.append((projection.NAME, table.group(1), checks))
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
        """Check the deferred CHECK constraints, then create the deferred indexes.

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

    def apply_entry(self, connection: sqlite3.Connection, entry: Entry) -> None:
        """Fold one event into every projection and advance their checkpoints."""
        for projection in self.projections:
            for text, params in projection.apply(entry):
                try:
                    connection.execute(text, params)
                except UnicodeEncodeError:  # a lone surrogate: bound as Node binds it
                    connection.execute(text, canonical.bindable(params))
            connection.execute(
                "UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection = ?",
                (entry.seq, projection.NAME),
            )

    def fold(self, connection: sqlite3.Connection, entries: Iterable[Entry]) -> int:
        """Fold ``entries`` in seq order and advance the checkpoints once, to the last one.

        The rows are what :meth:`apply_entry` writes event by event; moving the
        checkpoints once per call instead of once per event and projection, and
        offering each event only to the handlers of its class, is what makes a
        rebuild fast.  The statements of all the entries are built first and
        executed after, in the same order: SQLite then runs in a tight loop
        that keeps its code and pages hot, which saves a tenth of the fold.
        The cyclic garbage collector waits meanwhile, as nothing built here
        forms a cycle.  Returns the number of events folded.
        """
        routes, route = self._routes, self.handlers
        execute = connection.cursor().execute  # one cursor: no new object per statement
        statements: list[Statement] = []
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
                    _run(execute, statements)
                    statements.clear()
            _run(execute, statements)
        finally:
            if collecting:
                gc.enable()
        if last is not None:
            connection.executemany(
                "UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection = ?",
                [(last, projection.NAME) for projection in self.projections],
            )
        return count

    def __call__(self, connection: object, batch: Sequence[Sealed]) -> None:
        """Append hook: project a freshly written batch; :meth:`settle` moves the checkpoints.

        Each event goes to the handlers of its class only, as in :meth:`fold`,
        so a projection that ignores it executes nothing (ADR 0033).
        """
        assert isinstance(connection, sqlite3.Connection)
        routes, route = self._routes, self.handlers
        execute = connection.execute
        for item in batch:
            entry = item.entry
            cls = type(entry.event)
            for handler in routes[cls] if cls in routes else route(cls):
                for text, params in handler(entry):
                    try:
                        execute(text, params)
                    except UnicodeEncodeError:  # a lone surrogate: bound as Node binds it
                        execute(text, canonical.bindable(params))

    def settle(self, connection: object, seq: int) -> None:
        """Before the commit: move every projection's checkpoint to ``seq``, the new head.

        The append hook projected every event up to ``seq``, so one statement
        per transaction keeps the checkpoints exact (ADR 0033).
        """
        assert isinstance(connection, sqlite3.Connection)
        if self._settle is None:
            marks = ", ".join("?" for _ in self.projections)
            self._settle = f"UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection IN ({marks})"
        connection.execute(self._settle, (seq, *self._names))


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


class RowReader:
    """Rows of one connection by column name: what deciders and rules read through a Context."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        """Read through ``connection`` (its transaction, if one is open)."""
        self.connection = connection

    def one(self, sql: str, params: tuple[object, ...] = ()) -> Row | None:
        """The first row of a query, or None."""
        try:
            cursor = self.connection.execute(sql, params)
        except UnicodeEncodeError:  # a lone surrogate: looked up as Node binds it
            cursor = self.connection.execute(sql, canonical.bindable(params))
        cursor.row_factory = sqlite3.Row
        row: Row | None = cursor.fetchone()
        return row

    def all(self, sql: str, params: tuple[object, ...] = ()) -> list[Row]:
        """Every row of a query."""
        try:
            cursor = self.connection.execute(sql, params)
        except UnicodeEncodeError:  # a lone surrogate: looked up as Node binds it
            cursor = self.connection.execute(sql, canonical.bindable(params))
        cursor.row_factory = sqlite3.Row
        return list(cursor.fetchall())


def _run(execute: Callable[[str, Sequence[object]], object], statements: list[Statement]) -> None:
    """Execute statements in order; text with a lone surrogate is bound as Node binds it."""
    for text, params in statements:
        try:
            execute(text, params)
        except UnicodeEncodeError:
            execute(text, canonical.bindable(params))


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
    connection.execute(CHECKPOINT_TABLE)
    model.install(connection, defer_indexes=True)
    try:
        count = model.fold(connection, entries)
        model.create_indexes(connection)
    finally:
        with contextlib.suppress(sqlite3.Error):  # keep the fold's own error
            connection.execute("PRAGMA ignore_check_constraints = OFF")
    return count


READABLE_PREFIX: Final = "readable_"
"""Read-only views for people: ``readable_events`` and ``readable_<table>`` per projection."""


def _readable(column: str, declared: str) -> str:
    """One column of a readable view: BLOBs as lowercase hex, ``*_at`` times as ISO text."""
    quoted = f'"{column}"'
    if declared.upper() == "BLOB":
        return f"lower(hex({quoted})) AS {quoted}"
    if (column == "at" or column.endswith("_at")) and declared.upper() == "INTEGER":
        iso = (
            f"strftime('%Y-%m-%dT%H:%M:%S', {quoted} / 1000, 'unixepoch')"
            f" || printf('.%03dZ', {quoted} % 1000)"
        )
        return f"CASE WHEN {quoted} IS NULL THEN NULL ELSE {iso} END AS {quoted}"
    return quoted


def readable_views(connection: sqlite3.Connection, schema: str = "main") -> list[str]:
    """The names of the readable views a database holds."""
    rows = connection.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'view'"
        f" AND name LIKE '{READABLE_PREFIX}%' ORDER BY name"
    ).fetchall()
    return [row[0] for row in rows]


def drop_views(connection: sqlite3.Connection, schema: str = "main") -> list[str]:
    """Drop the readable views (before the tables they read are replaced); their names."""
    names = readable_views(connection, schema)
    for name in names:
        connection.execute(f'DROP VIEW {schema}."{name}"')
    return names


def _view_statements(connection: sqlite3.Connection, schema: str) -> dict[str, str]:
    """The ``CREATE VIEW`` statement of every readable view the tables call for, by view name.

    Each is written as SQLite stores it in ``sqlite_master`` (no schema
    name), so the views a database holds can be compared with them.
    """
    tables = connection.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'"
        " AND name NOT LIKE '\\_pwf\\_%' ESCAPE '\\'"
        " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name = 'events' DESC, name"
    ).fetchall()
    statements = {}
    for (table,) in tables:
        info = connection.execute(f'PRAGMA {schema}.table_info("{table}")').fetchall()
        columns = [_readable(row[1], row[2]) for row in info]
        if table == "events":
            columns = [
                "CAST(body AS TEXT) AS body" if row[1] == "body" else column
                for row, column in zip(info, columns, strict=True)
            ]
        view = f"{READABLE_PREFIX}{table}"
        statements[view] = f'CREATE VIEW "{view}" AS SELECT {", ".join(columns)} FROM "{table}"'
    return statements


def install_views(connection: sqlite3.Connection, schema: str = "main") -> list[str]:
    """(Re)create the readable views over the log and every projection table; their names.

    They are plain SQL views for ``sqlite3`` and Datasette users: hashes
    (BLOB columns) as lowercase hex, times (integer ``at``/``*_at`` columns,
    epoch milliseconds) as ISO 8601 text in UTC, the event body as JSON
    text.  Nothing of pwf reads them; every listing of projection tables
    (``pwf diff``, ``digest``, ``verify``, rebuild) takes tables only.
    """
    drop_views(connection, schema)
    statements = _view_statements(connection, schema)
    for statement in statements.values():
        connection.execute(statement.replace("CREATE VIEW ", f"CREATE VIEW {schema}.", 1))
    return list(statements)


def views_current(connection: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether the database holds exactly the readable views its tables call for (reads only).

    A database made before the views existed, or before a projection
    table gained a column, answers false; :func:`install_views` mends it.
    """
    held = dict(
        connection.execute(
            f"SELECT name, sql FROM {schema}.sqlite_master WHERE type = 'view'"
            f" AND name LIKE '{READABLE_PREFIX}%'"
        ).fetchall()
    )
    return held == _view_statements(connection, schema)
