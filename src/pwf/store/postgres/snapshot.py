"""One consistent snapshot of the shared log, copied as stored into a new SQLite file (ADR 0106).

Imports psycopg, sqlite3, _sqlite, errors, the SQLite store and this package's edge.
:func:`snapshot_to` reads the whole log in one ``REPEATABLE READ, READ
ONLY`` transaction of a connection of its own: PostgreSQL gives it one
snapshot of every table without a lock a writer waits for (the advisory
lock is never taken), so writers on every host commit meanwhile, and what
they commit after the snapshot began is not in it.  The log's tables of
format ``pwf.store.v2`` (ADR 0102) are the same in both backends; their rows,
the Merkle tree, the head row and ``_pwf_meta`` (the format, the log's id and
origin) are written as the shared log holds them, in one SQLite transaction
of the new file.  Only text written in the shared log's form
(:func:`pwf.store.rows.shared_text`, ADR 0071) is given back its SQLite form.
The projections are not the store's job: the caller folds them from the file.
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING, Final

import psycopg

from pwf._sqlite import execute_many
from pwf.errors import StoreError
from pwf.store.postgres.edge import as_bytes, translate_error
from pwf.store.postgres.reads import HEAD, head_of
from pwf.store.sqlite import SqliteStore
from pwf.store.sqlite import translate_error as sqlite_error
from pwf.store.sqlite_schema import HEAD_UPSERT

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from psycopg.rows import TupleRow

    from pwf.store import Head

__all__ = ["TABLES", "snapshot_to"]

TABLES: Final = (
    ("_pwf_batches", ("seq", "batch", "at", "request_id", "client_id", "idempotency_key", "head")),
    (
        "_pwf_events",
        ("seq", "head", "type", "run_id", "session_id", "content_hash", "link", "data"),
    ),
    ("_pwf_whole", ("seq", "prev_hash", "body")),
    ("_pwf_pruned", ("seq", "leaf", "taken")),
    ("_pwf_tree", ("pos", "hash")),
)
"""The tables copied row for row, with their columns in table order (the first is the key)."""
_SNAPSHOT: Final = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
"""The first statement of the transaction: every later one reads the snapshot it takes."""
_CHUNK: Final = 4096
"""Rows fetched from the server per round trip, and written to the file per statement."""
_SHARED: Final = re.compile("\ufffd([0-9a-f]{4})")
"""A code unit the shared log's text replaced: U+FFFD and its four hex digits (ADR 0071)."""


def local_text(text: str) -> str:
    """Text as SQLite keeps it, from the shared log's form (the inverse of ``shared_text``)."""
    if "\ufffd" not in text:
        return text
    return _SHARED.sub(lambda unit: chr(int(unit.group(1), 16)), text)


def _local(value: object) -> object:
    """A cell as the SQLite file stores it: bytes for ``BYTEA``, SQLite's form of text."""
    if isinstance(value, memoryview | bytes):
        return as_bytes(value)
    if isinstance(value, str):
        return local_text(value)
    return value


def snapshot_to(url: str, where: str, target: Path) -> Head:
    """Write one snapshot of the shared log at ``url`` into the new SQLite file ``target``.

    ``target`` is empty or missing; it becomes a pwf database whose log is
    the shared log's at the snapshot, without projections.  Returns that
    head (the shared log's head when the snapshot was taken).

    Raises:
        StoreError: PostgreSQL cannot be reached or read, the log is not of
            this pwf's format, or the file cannot be written.
    """
    try:
        connection = psycopg.connect(url, autocommit=True)
    except psycopg.Error as error:
        raise translate_error(error, where) from None
    try:
        with connection.transaction():
            connection.execute(_SNAPSHOT)
            return _copy(connection, target)
    except psycopg.Error as error:
        raise translate_error(error, where) from None
    finally:
        connection.close()


def _copy(connection: psycopg.Connection[TupleRow], target: Path) -> Head:
    """Copy every table of the snapshot the transaction on ``connection`` reads."""
    head = head_of(connection.execute(HEAD).fetchone())
    meta = [(str(key), str(value)) for key, value in connection.execute(_META).fetchall()]
    file = SqliteStore(target, create=True)
    try:
        if dict(meta).get("format") != _format(file):
            raise StoreError(f"{target}: the shared log's format is not this pwf's")
        sqlite = file.connection
        sqlite.execute("BEGIN IMMEDIATE")
        try:
            for table, names in TABLES:
                insert = (
                    f"INSERT INTO {table} ({', '.join(names)})"
                    f" VALUES ({', '.join('?' * len(names))})"
                )
                for rows in _rows(connection, table, names):
                    execute_many(sqlite, insert, rows)  # a lone surrogate bound exactly
            sqlite.executemany("INSERT OR REPLACE INTO _pwf_meta (key, value) VALUES (?, ?)", meta)
            sqlite.execute(HEAD_UPSERT, (head.seq, head.content_hash, head.batch))
        except BaseException:
            sqlite.execute("ROLLBACK")
            raise
        sqlite.execute("COMMIT")
    except sqlite3.Error as error:
        raise sqlite_error(error, target) from None
    finally:
        file.close()
    return head


_META: Final = "SELECT key, value FROM _pwf_meta ORDER BY key"


def _format(file: SqliteStore) -> str:
    row = file.connection.execute("SELECT value FROM _pwf_meta WHERE key = 'format'").fetchone()
    return str(row[0])


def _rows(
    connection: psycopg.Connection[TupleRow], table: str, names: tuple[str, ...]
) -> Iterator[list[tuple[object, ...]]]:
    """The rows of ``table`` in key order, in chunks, each cell in the SQLite file's form."""
    select = f"SELECT {', '.join(names)} FROM {table} ORDER BY {names[0]}"
    with connection.cursor(name=f"pwf_snapshot{table}") as cursor:
        cursor.itersize = _CHUNK
        cursor.execute(select)
        while chunk := cursor.fetchmany(_CHUNK):
            yield [tuple(_local(cell) for cell in row) for row in chunk]
