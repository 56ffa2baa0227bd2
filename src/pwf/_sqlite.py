"""SQLite helpers every room shares; imports nothing of pwf (sqlite3 only: an edge room).

Written once here so that no room spells them its own way: an identifier in
double quotes (:func:`quote`), the list of a database's projection tables
(:func:`projection_tables`, :func:`dump`), a block run in one transaction
(:func:`transaction`), a connection held on one read snapshot
(:func:`begin_snapshot`), and a cell as reports show it, with the columns in
which two rows differ (:func:`shown`, :func:`changed_cells`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator, Sequence

__all__ = [
    "PROJECTION_TABLES",
    "Value",
    "begin_snapshot",
    "changed_cells",
    "dump",
    "projection_tables",
    "quote",
    "shown",
    "transaction",
]

Value = str | int | float | None
"""A cell as reports show it: BLOBs become lower-case hex text."""

PROJECTION_TABLES: Final = (
    "SELECT name FROM {schema}.sqlite_master WHERE type = 'table'"
    " AND name NOT LIKE '\\_pwf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    " AND name != 'events' ORDER BY name"
)


def quote(name: str) -> str:
    """A name as an SQL identifier, in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def projection_tables(connection: sqlite3.Connection, schema: str = "main") -> list[str]:
    """The projection tables of one attached database (bookkeeping and log tables excluded), sorted.

    ``schema`` is ``main`` or the name a caller attached a database as, never user input.
    """
    query = PROJECTION_TABLES.format(schema=schema)
    return [row[0] for row in connection.execute(query)]


def dump(connection: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every projection row, table by table, in a stable order (all columns)."""
    tables: dict[str, list[tuple[object, ...]]] = {}
    for table in projection_tables(connection):
        columns = [row[1] for row in connection.execute(f"PRAGMA table_info({quote(table)})")]
        order = ", ".join(quote(column) for column in columns)
        tables[table] = connection.execute(
            f"SELECT * FROM {quote(table)} ORDER BY {order}"  # noqa: S608 - names from sqlite_master
        ).fetchall()
    return tables


@contextlib.contextmanager
def transaction(
    connection: sqlite3.Connection, begin: Literal["BEGIN", "BEGIN IMMEDIATE"] = "BEGIN"
) -> Iterator[None]:
    """Run the block in a transaction, or inside the caller's when one is open.

    The transaction commits when the block ends and rolls back when it raises;
    for a block that only reads, it is one snapshot of the database.
    """
    if connection.in_transaction:
        yield
        return
    connection.execute(begin)
    try:
        yield
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def begin_snapshot(connection: sqlite3.Connection) -> None:
    """Hold the connection on one read snapshot until it commits, rolls back or closes.

    For a connection that only ever reads (a file opened read-only to compare
    or digest it); a block that reads once uses :func:`transaction` instead.
    The snapshot is taken at the first read, not here (SQLite's deferred
    ``BEGIN``); inside an open transaction this does nothing.
    """
    if not connection.in_transaction:
        connection.execute("BEGIN")


def shown(value: object) -> Value:
    """A cell as reports show it: BLOBs as lower-case hex, everything else as stored."""
    if isinstance(value, bytes):
        return value.hex()
    assert value is None or isinstance(value, str | int | float)
    return value


def changed_cells(
    columns: Sequence[str],
    row_a: Sequence[object],
    row_b: Sequence[object],
    *,
    storage_class: bool = False,
) -> list[tuple[str, Value, Value]]:
    """The columns in which two rows of one table differ, with both cells as shown.

    Cells differ when they compare unequal; with ``storage_class`` also when
    SQLite stores them in different classes (``1`` and ``1.0``), which
    ``pwf verify`` reports of a row that differs anyway.
    """
    return [
        (column, shown(a), shown(b))
        for column, a, b in zip(columns, row_a, row_b, strict=True)
        if a != b or (storage_class and type(a) is not type(b))
    ]
