"""SQLite helpers every room shares; imports nothing of pwf (sqlite3 only: an edge room).

Written once here so that no room spells them its own way: an identifier in
double quotes (:func:`quote`), the list of a database's projection tables
(:func:`projection_tables`, :func:`dump`), a block run in one transaction
(:func:`transaction`), a connection held on one read snapshot
(:func:`begin_snapshot`), a cell as reports show it, with the columns in
which two rows differ (:func:`shown`, :func:`changed_cells`), and text kept
by its UTF-16 code units, lone surrogates included (:func:`exact_text`,
:func:`exact_statement`, :func:`execute`, :func:`execute_many`; ADR 0071).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "PROJECTION_TABLES",
    "Value",
    "begin_snapshot",
    "changed_cells",
    "dump",
    "exact_statement",
    "exact_text",
    "execute",
    "execute_many",
    "projection_tables",
    "quote",
    "same_dump",
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
    return {
        table: _ordered(connection, table).fetchall() for table in projection_tables(connection)
    }


def same_dump(first: sqlite3.Connection, second: sqlite3.Connection) -> bool:
    """True when :func:`dump` of both is equal, read a row of each at a time.

    Memory holds one row a side, not two whole databases: at a million
    events the dumps a backup's check compared took gigabytes.
    """
    tables = projection_tables(first)
    if sorted(tables) != sorted(projection_tables(second)):
        return False
    for table in tables:
        rows = itertools.zip_longest(_ordered(first, table), _ordered(second, table))
        if any(mine != theirs for mine, theirs in rows):
            return False
    return True


def _ordered(connection: sqlite3.Connection, table: str) -> sqlite3.Cursor:
    """Every row of ``table``, ordered by all its columns."""
    columns = [row[1] for row in connection.execute(f"PRAGMA table_info({quote(table)})")]
    order = ", ".join(quote(column) for column in columns)
    return connection.execute(f"SELECT * FROM {quote(table)} ORDER BY {order}")  # noqa: S608 - names from sqlite_master


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


# --------------------------------------------------------------------------- exact text (ADR 0071)

EXACT_TEXT: Final = functools.partial(str, encoding="utf-8", errors="surrogatepass")
"""The text factory of every connection: a TEXT cell as the code units it was written with.

Text without a lone surrogate is stored as its UTF-8 and reads back as
before; text with one is stored as its WTF-8 (a lone surrogate as the three
bytes ``ED A0 80``..``ED BF BF``, which no UTF-8 text holds), and reads back
with the surrogate in ``str``.
"""
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_PLACEHOLDER: Final = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|\?(\d*)", re.DOTALL
)
"""A string literal, quoted identifier or comment (kept), or a parameter, ``?`` or ``?NNN``."""


def exact_text(connection: sqlite3.Connection) -> sqlite3.Connection:
    """Make ``connection`` read each TEXT cell by its code units (:data:`EXACT_TEXT`); return it."""
    connection.text_factory = EXACT_TEXT
    return connection


def exact_statement(sql: str, params: Sequence[object]) -> tuple[str, tuple[object, ...]]:
    """``sql`` and ``params`` with each text holding a lone surrogate bound as its WTF-8 text.

    Python's driver refuses to bind such text (``UnicodeEncodeError``); it is
    bound instead as the BLOB of its WTF-8 bytes, and its parameter in
    ``sql`` becomes ``CAST(? AS TEXT)``, which SQLite turns into TEXT of the
    same bytes.  So two ids that differ in one lone surrogate stay two ids in
    every column, index and comparison, and text without one is bound as it
    always was.  Callers use this only after the driver refused a statement,
    so the common path pays nothing.
    """
    cut = {
        number
        for number, value in enumerate(params, start=1)
        if type(value) is str and _SURROGATE.search(value) is not None
    }
    if not cut:
        return sql, tuple(params)
    last = 0

    def parameter(match: re.Match[str]) -> str:
        nonlocal last
        digits = match.group(1)
        if digits is None:
            return match.group(0)
        number = int(digits) if digits else last + 1
        last = max(last, number)
        return f"CAST({match.group(0)} AS TEXT)" if number in cut else match.group(0)

    exact = tuple(
        value.encode("utf-8", "surrogatepass")
        if isinstance(value, str) and number in cut
        else value
        for number, value in enumerate(params, start=1)
    )
    return _PLACEHOLDER.sub(parameter, sql), exact


def execute(
    connection: sqlite3.Connection, sql: str, params: Sequence[object] = ()
) -> sqlite3.Cursor:
    """Execute one statement; text with a lone surrogate is bound by :func:`exact_statement`."""
    try:
        return connection.execute(sql, params)
    except UnicodeEncodeError:
        return connection.execute(*exact_statement(sql, params))


def execute_many(
    connection: sqlite3.Connection, sql: str, rows: Iterable[Sequence[object]]
) -> None:
    """Execute one statement per row, in order; text with a lone surrogate is bound exactly.

    The driver takes, binds and runs the rows one at a time, and refuses a
    row that holds such text before running it; that row is run by
    :func:`execute`, and the driver goes on with the rows after it.
    """
    source = iter(rows)
    taken: list[Sequence[object]] = [()]

    def take() -> Iterator[Sequence[object]]:
        for row in source:
            taken[0] = row
            yield row

    while True:
        try:
            connection.executemany(sql, take())
        except UnicodeEncodeError:
            execute(connection, sql, taken[0])
        else:
            return
