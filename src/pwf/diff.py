"""Compare read models; imports readmodel, store, canonical and errors (plus sqlite3).

:func:`diff_databases` pairs the rows of two projection databases by primary
key and names every row only in A, only in B, and every changed column.
:func:`digest_database` hashes each projection table over a canonical dump, so
two machines compare by exchanging a few lines.  :func:`diff_logs` finds the
first seq where two event logs part.  Every side is opened read-only inside one
read transaction and streamed in key order, so memory grows with the
differences found, never with the tables (ADR 0012).
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from itertools import zip_longest
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from pwf import canonical
from pwf._sqlite import (
    Value,
    begin_snapshot,
    changed_cells,
    exact_text,
    projection_tables,
    quote,
    shown,
)
from pwf.errors import InputError, NotPwfDatabaseError
from pwf.store.sqlite import FORMAT, translate_error
from pwf.store.sqlite_schema import wrong_format

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from os import PathLike

__all__ = [
    "DatabaseDiff",
    "Difference",
    "Digest",
    "LogDiff",
    "Value",
    "diff_databases",
    "diff_logs",
    "digest_database",
    "open_read_only",
]

Row = tuple[object, ...]
LogRow = tuple[int, bytes]
Kind = Literal["onlyInA", "onlyInB", "changed"]


# --------------------------------------------------------------------------- opening


def open_read_only(path: str | PathLike[str]) -> sqlite3.Connection:
    """Open a pwf database read-only, inside one read transaction (a stable snapshot).

    Raises:
        InputError: the file does not exist or is not a pwf database.
        StoreError: SQLite could not open or read it.
    """
    where = Path(path)
    if not where.is_file():
        raise InputError(f"no such database: {path}")
    uri = f"{where.absolute().as_uri()}?mode=ro"
    try:
        connection = exact_text(sqlite3.connect(uri, uri=True, isolation_level=None))
    except sqlite3.Error as error:
        raise translate_error(error, where) from None
    try:
        _check_format(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def _check_format(connection: sqlite3.Connection, path: str | PathLike[str]) -> None:
    """Start the read transaction and insist on pwf's format row."""
    try:
        begin_snapshot(connection)
        row = connection.execute("SELECT value FROM _pwf_meta WHERE key = 'format'").fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" not in str(error):
            raise translate_error(error, Path(path)) from None
        row = None
    except sqlite3.DatabaseError:
        row = None  # "file is not a database"
    if row is not None and str(row[0]).startswith("pwf.store.") and row[0] != FORMAT:
        raise wrong_format(path, row[0])
    if row is None or row[0] != FORMAT:
        raise NotPwfDatabaseError(f"not a pwf database: {path} (expected format {FORMAT})")


@contextmanager
def _opened(path: str | PathLike[str]) -> Iterator[sqlite3.Connection]:
    connection = open_read_only(path)
    try:
        yield connection
    finally:
        connection.close()


# --------------------------------------------------------------------------- schema

MADE_WHEN_USED: Final = frozenset({"host_state"})
"""Tables made by their first event (``pwf.projections.host``): a database never served
has none, so an absent one compares as an empty table, not as a different schema."""


@dataclass(frozen=True, slots=True)
class _Table:
    """A projection table: its columns in declared order and its key columns' positions."""

    name: str
    columns: tuple[str, ...]
    key: tuple[int, ...]

    def select(self, *, hex_blobs: bool = False) -> str:
        """Every row, all columns, in primary-key order (byte order for text).

        With ``hex_blobs`` SQLite itself turns BLOB cells into lower-case hex text.
        """
        cell = "CASE WHEN typeof({0}) = 'blob' THEN lower(hex({0})) ELSE {0} END"
        shown = cell if hex_blobs else "{0}"
        columns = ", ".join(shown.format(quote(column)) for column in self.columns)
        order = ", ".join(f"{quote(self.columns[i])} COLLATE BINARY" for i in self.key)
        table = quote(self.name)
        return f"SELECT {columns} FROM {table} ORDER BY {order}"  # noqa: S608 - quoted names

    def key_names(self) -> tuple[str, ...]:
        """The key columns' names, in pairing order."""
        return tuple(self.columns[i] for i in self.key)


def _table(connection: sqlite3.Connection, name: str) -> _Table:
    """Read a table's columns; its key is the primary key, else every column."""
    info = connection.execute(f"PRAGMA table_info({quote(name)})").fetchall()
    columns = tuple(str(row[1]) for row in info)
    ranked = sorted((int(row[5]), int(row[0])) for row in info if row[5])
    key = tuple(position for _, position in ranked) or tuple(range(len(columns)))
    return _Table(name, columns, key)


@dataclass(frozen=True, slots=True)
class _Schema:
    """What must match before rows can be compared."""

    versions: dict[str, int]
    tables: dict[str, _Table]


def _schema(connection: sqlite3.Connection) -> _Schema:
    try:
        rows = connection.execute("SELECT projection, version FROM _pwf_checkpoint").fetchall()
    except sqlite3.OperationalError:
        rows = []
    versions = {str(name): int(version) for name, version in rows}
    tables = {name: _table(connection, name) for name in sorted(projection_tables(connection))}
    return _Schema(versions, tables)


def _mismatch(a: _Schema, b: _Schema) -> str | None:
    """The first schema difference between A and B, as one line, or None."""
    for name in sorted(a.versions.keys() | b.versions.keys()):
        found = _version_mismatch(name, a.versions.get(name), b.versions.get(name))
        if found:
            return found
    for name in sorted((a.tables.keys() ^ b.tables.keys()) - MADE_WHEN_USED):
        return f"table {name} is only in {'A' if name in a.tables else 'B'}"
    for name, table in a.tables.items():
        if name not in b.tables:
            continue
        found = _table_mismatch(table, b.tables[name])
        if found:
            return found
    return None


def _table_mismatch(a: _Table, b: _Table) -> str | None:
    if a.columns != b.columns:
        return f"table {a.name} has columns {_listed(a.columns)} in A, {_listed(b.columns)} in B"
    if a.key != b.key:
        keys = _listed(a.key_names()), _listed(b.key_names())
        return f"table {a.name} is keyed by {keys[0]} in A, {keys[1]} in B"
    return None


def _listed(names: Iterable[str]) -> str:
    return f"({', '.join(names)})"


def _version_mismatch(name: str, a: int | None, b: int | None) -> str | None:
    if a == b:
        return None
    if a is None:
        return f"A has no projection {name}, B has it at version {b}"
    if b is None:
        return f"A has projection {name} at version {a}, B has none"
    return f"A has projection {name} at version {a}, B at version {b}"


# --------------------------------------------------------------------------- diff


@dataclass(frozen=True, slots=True)
class Difference:
    """One row only on one side, or one changed column of a row on both."""

    kind: Kind
    key: tuple[Value, ...]
    column: str = ""
    a: Value = None
    b: Value = None


@dataclass(frozen=True, slots=True)
class DatabaseDiff:
    """Every difference, table by table in name order, each table's in key order."""

    compared: tuple[str, ...]
    tables: dict[str, list[Difference]]

    @property
    def equal(self) -> bool:
        """No table differs."""
        return not self.tables

    @property
    def count(self) -> int:
        """How many differences were found in all."""
        return sum(len(found) for found in self.tables.values())


def diff_databases(
    path_a: str | PathLike[str], path_b: str | PathLike[str], tables: Sequence[str] = ()
) -> DatabaseDiff:
    """Compare the projection tables of two databases (only ``tables`` when given).

    Raises:
        InputError: a file is missing or not a pwf database, the schemas or
            projection versions differ, or a named table is not a projection table.
    """
    with ExitStack() as stack:
        a = stack.enter_context(_opened(path_a))
        b = stack.enter_context(_opened(path_b))
        schema_a, schema_b = _schema(a), _schema(b)
        mismatch = _mismatch(schema_a, schema_b)
        if mismatch:
            raise InputError(mismatch)
        chosen = _chosen(schema_a, schema_b, tables)
        differing: dict[str, list[Difference]] = {}
        for name in chosen:
            table = schema_a.tables.get(name) or schema_b.tables[name]
            rows_a = a.execute(table.select()) if name in schema_a.tables else ()
            rows_b = b.execute(table.select()) if name in schema_b.tables else ()
            found = list(_differences(table, rows_a, rows_b))
            if found:
                differing[name] = found
    return DatabaseDiff(tuple(chosen), differing)


def _chosen(a: _Schema, b: _Schema, tables: Sequence[str]) -> list[str]:
    known = sorted(a.tables.keys() | b.tables.keys())
    unknown = sorted(set(tables) - set(known))
    if unknown:
        raise InputError(f"no projection table {unknown[0]} (tables: {', '.join(known)})")
    return sorted(set(tables)) if tables else known


def _differences(
    table: _Table, rows_a: Iterable[Row], rows_b: Iterable[Row]
) -> Iterator[Difference]:
    """Turn the unequal pairs of a merge into differences, in key order."""
    key = _key_of(table)
    for row_a, row_b in _merge(rows_a, rows_b, key):
        if row_a is None:
            assert row_b is not None
            yield Difference("onlyInB", _values(key(row_b)))
        elif row_b is None:
            yield Difference("onlyInA", _values(key(row_a)))
        else:
            where = _values(key(row_a))
            for column, value_a, value_b in changed_cells(table.columns, row_a, row_b):
                yield Difference("changed", where, column, value_a, value_b)


def _key_of(table: _Table) -> Callable[[Row], Row]:
    if len(table.key) == 1:
        [position] = table.key
        return lambda row: (row[position],)
    return itemgetter(*table.key)


def _merge(
    rows_a: Iterable[Row], rows_b: Iterable[Row], key: Callable[[Row], Row]
) -> Iterator[tuple[Row | None, Row | None]]:
    """Walk two key-ordered streams together; yield only the pairs that are not identical.

    Identical rows (the common case) cost one tuple comparison each.
    """
    stream_a, stream_b = iter(rows_a), iter(rows_b)
    row_a, row_b = next(stream_a, None), next(stream_b, None)
    while row_a is not None or row_b is not None:
        if row_a == row_b:
            row_a, row_b = next(stream_a, None), next(stream_b, None)
        elif row_b is None or (row_a is not None and _before(key(row_a), key(row_b))):
            yield row_a, None
            row_a = next(stream_a, None)
        elif row_a is None or _before(key(row_b), key(row_a)):
            yield None, row_b
            row_b = next(stream_b, None)
        else:
            yield row_a, row_b
            row_a, row_b = next(stream_a, None), next(stream_b, None)


def _before(left: Row, right: Row) -> bool:
    """SQLite's order: NULL, then numbers, then text, then BLOBs (each by value or bytes)."""
    try:
        return left < right
    except TypeError:  # mixed storage classes somewhere in the keys
        return tuple(map(_ranked, left)) < tuple(map(_ranked, right))


def _ranked(value: object) -> tuple[int, object]:
    if value is None:
        return (0, 0)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, bytes):
        return (3, value)
    return (1, value)


def _values(row: Row) -> tuple[Value, ...]:
    return tuple(shown(value) for value in row)


# --------------------------------------------------------------------------- digest


@dataclass(frozen=True, slots=True)
class Digest:
    """SHA-256 per projection table (name order) and one over those lines."""

    tables: dict[str, str]

    @property
    def all(self) -> str:
        """SHA-256 over one line ``TABLE HEX`` per table, in name order."""
        lines = "".join(f"{name} {value}\n" for name, value in sorted(self.tables.items()))
        return hashlib.sha256(lines.encode()).hexdigest()


def digest_database(path: str | PathLike[str]) -> Digest:
    """Hash every projection table of a database over its canonical dump.

    A table's dump is one canonical JSON array per row (columns in declared
    order, BLOBs as lower-case hex), each followed by a newline, rows in
    primary-key order.

    Raises:
        InputError: the file is missing or is not a pwf database.
    """
    with _opened(path) as connection:
        schema = _schema(connection)
        return Digest(
            {name: _table_digest(connection, table) for name, table in schema.tables.items()}
        )


def _table_digest(connection: sqlite3.Connection, table: _Table) -> str:
    sha = hashlib.sha256()
    encode = canonical.encode
    for row in connection.execute(table.select(hex_blobs=True)):
        sha.update(encode(row) + b"\n")  # a tuple encodes as the JSON array of its cells
    return sha.hexdigest()


# --------------------------------------------------------------------------- logs


@dataclass(frozen=True, slots=True)
class LogDiff:
    """Where two logs part: the events they share and the first seq that differs."""

    common: int
    first_divergence: int | None = None
    shorter: Literal["A", "B"] | None = None
    """When one log is a prefix of the other: the side that ends first."""
    shorter_ends_at: int | None = None

    @property
    def identical(self) -> bool:
        """Same events, same bytes, same length."""
        return self.first_divergence is None


def diff_logs(path_a: str | PathLike[str], path_b: str | PathLike[str]) -> LogDiff:
    """Compare two event logs seq by seq over their stored bytes.

    Raises:
        InputError: a file is missing or is not a pwf database.
    """
    query = "SELECT seq, body FROM events ORDER BY seq"
    with _opened(path_a) as a, _opened(path_b) as b:
        return _diverge(a.execute(query), b.execute(query))


def _diverge(rows_a: Iterable[LogRow], rows_b: Iterable[LogRow]) -> LogDiff:
    """Walk two seq-ordered logs together up to the first pair that differs."""
    common, last = 0, 0
    for row_a, row_b in zip_longest(rows_a, rows_b):
        if row_a is None:
            return LogDiff(common, row_b[0], "A", last)
        if row_b is None:
            return LogDiff(common, row_a[0], "B", last)
        if row_a != row_b:
            return LogDiff(common, min(row_a[0], row_b[0]))
        common, last = common + 1, row_a[0]
    return LogDiff(common)
