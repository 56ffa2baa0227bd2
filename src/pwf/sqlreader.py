"""Rows of one SQLite connection by column name: the read-model port (ADR 0008).

Imports the SQLite helpers (plus sqlite3: this is an edge room).  A
:class:`RowReader` is what deciders and rules read the projections through
(:class:`pwf.commands.Reader`); the store hands one out for its write
transaction and one for committed state, so no caller builds it from a
connection of its own.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from pwf._sqlite import execute

if TYPE_CHECKING:
    from pwf.commands import Row

__all__ = ["RowReader"]


class RowReader:
    """Rows of one connection by column name: what deciders and rules read through a Context."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        """Read through ``connection`` (its transaction, if one is open)."""
        self.connection = connection

    def one(self, sql: str, params: tuple[object, ...] = ()) -> Row | None:
        """The first row of a query, or None."""
        cursor = execute(self.connection, sql, params)
        cursor.row_factory = sqlite3.Row
        row: Row | None = cursor.fetchone()
        return row

    def table(
        self, sql: str, params: tuple[object, ...] = ()
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The column names and the rows (as tuples) of a query, names even when it has none."""
        cursor = execute(self.connection, sql, params)
        return [column[0] for column in cursor.description], cursor.fetchall()

    def all(self, sql: str, params: tuple[object, ...] = ()) -> list[Row]:
        """Every row of a query."""
        cursor = execute(self.connection, sql, params)
        cursor.row_factory = sqlite3.Row
        return list(cursor.fetchall())
