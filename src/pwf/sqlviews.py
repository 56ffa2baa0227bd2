"""Read-only SQL views for people browsing the file; imports pwf._sqlite only (plus sqlite3).

``readable_events`` and one ``readable_<table>`` per projection table show
hashes (BLOB columns) as lowercase hex and times (integer ``at``/``*_at``
columns, epoch milliseconds) as ISO 8601 text in UTC.  Nothing of pwf reads
them: rebuild drops them before it swaps the tables they read and makes them
again after.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Final

from pwf._sqlite import projection_tables, quote

if TYPE_CHECKING:
    import sqlite3

__all__ = ["READABLE_PREFIX", "drop_views", "install_views", "readable_views", "views_current"]

READABLE_PREFIX: Final = "readable_"
"""Read-only views for people: ``readable_events`` and ``readable_<table>`` per projection."""


def _readable(column: str, declared: str) -> str:
    """One column of a readable view: BLOBs as lowercase hex, ``*_at`` times as ISO text."""
    quoted = quote(column)
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
        connection.execute(f"DROP VIEW {schema}.{quote(name)}")
    return names


_COLUMNS: Final = (
    "SELECT t.value, c.name, c.type FROM json_each(?) AS t, pragma_table_info(t.value, ?) AS c"
    " ORDER BY t.key, c.cid"
)
"""Every column (name, declared type) of the tables named in a JSON array, in one query."""


def _view_statements(connection: sqlite3.Connection, schema: str) -> dict[str, str]:
    """The ``CREATE VIEW`` statement of every readable view the tables call for, by view name.

    Each is written as SQLite stores it in ``sqlite_master`` (no schema
    name), so the views a database holds can be compared with them.  Every
    writing command asks (ADR 0049): the columns come in one query and the
    statements of columns seen before are not written again (ADR 0064).
    """
    tables = projection_tables(connection, schema)
    if connection.execute(f"PRAGMA {schema}.table_info(events)").fetchone() is not None:
        tables.insert(0, "events")
    columns: dict[str, list[tuple[str, str]]] = {table: [] for table in tables}
    for table, name, declared in connection.execute(_COLUMNS, (json.dumps(tables), schema)):
        columns[table].append((name, declared))
    return dict(_statement(table, tuple(columns[table])) for table in tables)


@functools.lru_cache(maxsize=512)
def _statement(table: str, info: tuple[tuple[str, str], ...]) -> tuple[str, str]:
    """The readable view of ``table`` with these columns: its name and ``CREATE VIEW`` text."""
    columns = [_readable(name, declared) for name, declared in info]
    if table == "events":
        columns = [
            "CAST(body AS TEXT) AS body" if name == "body" else column
            for (name, _), column in zip(info, columns, strict=True)
        ]
    view = f"{READABLE_PREFIX}{table}"
    return view, f"CREATE VIEW {quote(view)} AS SELECT {', '.join(columns)} FROM {quote(table)}"


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
