"""A pwf database read as a SQLite file, beside the store that has it open.

The store's connection is the store's own (ADR 0059): a test that reads a
database's rows, dumps its projections or checkpoints it opens the file
itself, as any other program would, and sees what is committed.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING, Any

from pwf._sqlite import dump, exact_text
from pwf.store.rows import COLUMNS
from pwf.store.sqlite_rows import CHAIN_COLUMNS, LAST, chain_rows, event_rows

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator

    from tests._tamper import editable
else:
    from _tamper import editable

__all__ = ["assert_rows_as_viewed", "change", "checkpoint", "opened", "projections", "rows"]


@contextlib.contextmanager
def opened(path: str | os.PathLike[str]) -> Iterator[sqlite3.Connection]:
    """A connection of its own to the file at ``path``, closed after the block.

    It reads text as pwf does, a lone surrogate included (ADR 0071).
    """
    connection = exact_text(sqlite3.connect(path, isolation_level=None))
    try:
        yield connection
    finally:
        connection.close()


def rows(path: str | os.PathLike[str], sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Every row of one query of the committed file."""
    with opened(path) as connection:
        return [tuple(row) for row in connection.execute(sql, params)]


def change(path: str | os.PathLike[str], sql: str, *params: object) -> None:
    """Change the file by hand, as a damaged disk or another program would (one statement).

    ``events`` takes a change as format v1's table did (:mod:`tests._tamper`).
    """
    with opened(path) as connection:
        editable(connection).execute(sql, params)


def projections(path: str | os.PathLike[str]) -> dict[str, list[tuple[object, ...]]]:
    """Every projection row of the committed file, table by table (:func:`pwf._sqlite.dump`)."""
    with opened(path) as connection:
        return dump(connection)


def checkpoint(path: str | os.PathLike[str]) -> None:
    """Move the file's write-ahead log into it and truncate the log."""
    with opened(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def assert_rows_as_viewed(connection: sqlite3.Connection) -> None:
    """The readers of the log's parts give the view's rows, whole and from any seq (ADR 0109).

    :func:`~pwf.store.sqlite_rows.chain_rows` against the view's chain
    columns, :func:`~pwf.store.sqlite_rows.event_rows` against every column
    the deep verify reads.
    """
    for read, columns in ((chain_rows, CHAIN_COLUMNS), (event_rows, COLUMNS)):
        view = connection.execute(f"SELECT {columns} FROM events ORDER BY seq").fetchall()  # noqa: S608 - constant
        assert list(read(connection, 1, LAST)) == view, read
        for start in range(0, len(view), max(1, len(view) // 50)):
            low, high = view[start][0], view[min(start + 2, len(view) - 1)][0]
            assert list(read(connection, low, high)) == view[start : start + 3], (read, low)
