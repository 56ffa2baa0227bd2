"""A pwf backup put into an empty shared log, row for row, in one transaction (ADR 0107).

Imports psycopg, sqlite3, _sqlite, errors, the store's rows and this package's
edge, reads and snapshot.  The inverse of :mod:`pwf.store.postgres.snapshot`:
the log's tables of format ``pwf.store.v2`` (ADR 0102) are the same in both
backends, so a backup's rows, its Merkle tree and its head go into the
shared log as the file stores them (text in the shared log's form, ADR
0071), ``_pwf_recorded`` gets the keys of every recorded command, and the
origin that names the log in its checkpoints comes along.  All of it under
the log's lock, in one transaction: a shared log that already holds an
event is refused, and a failure leaves it empty.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

import psycopg

from pwf._sqlite import exact_text
from pwf.errors import InputError, StoreError
from pwf.store import Head
from pwf.store.postgres.edge import translate_error
from pwf.store.postgres.schema import LOCK_KEY
from pwf.store.postgres.snapshot import TABLES
from pwf.store.rows import shared_row

if TYPE_CHECKING:
    from pathlib import Path

    from psycopg.rows import TupleRow

    from pwf.store.postgres.store import PostgresStore

__all__ = ["restore_into"]

_CHUNK: Final = 4096
_RECORDED: Final = (
    "SELECT request_id, client_id, idempotency_key, seq FROM events"
    " WHERE type = 'command.recorded' ORDER BY seq"
)
"""The keys ``_pwf_recorded`` holds unique, from each recorded command's own columns."""


def restore_into(store: PostgresStore, backup: Path) -> Head:
    """Copy the proved pwf database ``backup`` into the empty shared log ``store``; its head.

    Raises:
        InputError: the shared log holds an event already.
        StoreError: PostgreSQL refused a statement, or the file cannot be read.
    """
    try:
        source = exact_text(sqlite3.connect(f"{backup.absolute().as_uri()}?mode=ro", uri=True))
    except sqlite3.Error as error:
        raise StoreError(f"{backup}: {error}") from None
    connection = store.connection
    try:
        with connection.transaction():
            connection.execute(f"SELECT pg_advisory_xact_lock({int(LOCK_KEY)})")
            found = connection.execute("SELECT count(*) FROM _pwf_events").fetchone()
            if found is not None and int(found[0]):
                raise InputError(
                    f"{store.path} holds {found[0]} events: a backup is restored into an empty"
                    " shared log only (`pwf init --store` a new database)"
                )
            head = _copy(source, connection)
        store.tree_cache = None
    except psycopg.Error as error:
        store.tree_cache = None
        raise translate_error(error, store.path) from None
    except sqlite3.Error as error:
        raise StoreError(f"{backup}: {error}") from None
    finally:
        source.close()
    return head


def _copy(source: sqlite3.Connection, connection: psycopg.Connection[TupleRow]) -> Head:
    """Every row of the log's tables, the recorded keys, the head and the origin."""
    for table, columns in TABLES:
        names = ", ".join(columns)
        marks = ", ".join(["%s"] * len(columns))
        rows = source.execute(f"SELECT {names} FROM {table} ORDER BY {columns[0]}")
        insert = f"INSERT INTO {table} ({names}) VALUES ({marks})"
        with connection.cursor() as cursor:
            while chunk := rows.fetchmany(_CHUNK):
                cursor.executemany(insert, [shared_row(row) for row in chunk])
    recorded = source.execute(_RECORDED)
    with connection.cursor() as cursor:
        while chunk := recorded.fetchmany(_CHUNK):
            cursor.executemany(
                "INSERT INTO _pwf_recorded (request_id, client_id, idempotency_key, seq)"
                " VALUES (%s, %s, %s, %s)",
                [shared_row(row) for row in chunk],
            )
    row = source.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
    head = Head(0, None, 0) if row is None else Head(row[0], row[1], row[2])
    connection.execute(
        "UPDATE _pwf_head SET seq = %s, content_hash = %s, batch = %s WHERE id = 1",
        (head.seq, head.content_hash, head.batch),
    )
    origin = source.execute("SELECT value FROM _pwf_meta WHERE key = 'origin'").fetchone()
    if origin is not None:
        connection.execute(
            "INSERT INTO _pwf_meta (key, value) VALUES ('origin', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (origin[0],),
        )
    return head
