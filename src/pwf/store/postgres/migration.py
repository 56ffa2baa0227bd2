"""A shared log of ``pwf.store.v1`` upgraded to ``pwf.store.v2`` in one transaction (ADR 0104).

Imports psycopg, errors, events, private, the store's migration, rows and
writes, and this package's schema, reads, tree, append and edge.
:func:`migrate` does it all in one PostgreSQL transaction holding the log's
advisory lock, so no host appends meanwhile and a failure leaves the old
log as it was: it writes the old log's export (each event's stored bytes and
a newline, as ``pwf log export`` writes them) to the backup file and syncs
it, re-stores every event in the new tables (each one's bytes checked
against its content hash and link on the way, as the SQLite migration
does), drops the old ``events`` table, makes the view, checks that the view
gives back the backup's bytes, and appends ``log.migrated`` naming the
backup's SHA-256 and the old head.  ``pwf log verify --store URL --backup
FILE`` then proves the backup (:func:`pwf.store.migration.prove_backup`).
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, BinaryIO, Final

import psycopg

from pwf.errors import InputError, StoreError
from pwf.private import create_file, sync
from pwf.store.log_writes import pack
from pwf.store.migration import Migration, checked_rows, migrated, v1_origin
from pwf.store.postgres.append import PostgresTransaction
from pwf.store.postgres.edge import as_bytes, translate_error
from pwf.store.postgres.reads import HEAD, head_of
from pwf.store.postgres.schema import (
    EVENTS_VIEW,
    INDEXES,
    LOCK_KEY,
    TABLES,
    found_format,
)
from pwf.store.postgres.tree import build
from pwf.store.rows import COLUMNS
from pwf.store.schema import FORMAT, FORMAT_V1

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from psycopg.rows import TupleRow

    from pwf.events import Actor
    from pwf.store import Head
    from pwf.store.log_writes import Batch, Packed
    from pwf.store.postgres.store import PostgresStore

__all__ = ["CHUNK", "migrate"]

CHUNK: Final = 20_000
"""Old events read, checked and re-stored per step."""
_COPIES: Final = (
    ("batches", "_pwf_batches (seq, batch, at, request_id, client_id, idempotency_key, head)"),
    ("rows", "_pwf_events (seq, head, type, run_id, session_id, content_hash, link, data)"),
    ("whole", "_pwf_whole (seq, prev_hash, body)"),
)
"""Where each part of :class:`~pwf.store.log_writes.Packed` is copied to."""


def migrate(store: PostgresStore, backup: Path, *, at: int, actor: Actor) -> Migration:
    """Upgrade the v1 shared log ``store`` is connected to, its export kept at ``backup``.

    ``store`` was opened accepting format ``pwf.store.v1``.  The backup is
    created 0600 and refused if it exists; it is deleted again unless the
    migration committed.  ``log.migrated`` is sealed at ``at`` by ``actor``.

    Raises:
        InputError: the log is not in format ``pwf.store.v1``, or ``backup`` exists.
        ChainError: an event of the old log does not match its hash or link.
        StoreError: PostgreSQL failed, or the old log's head row is not its last event.
    """
    if store.format != FORMAT_V1:
        raise InputError(f"{store.path} is already in format {store.format}; nothing to migrate")
    try:
        descriptor = create_file(backup)
    except FileExistsError:
        raise InputError(
            f"{backup} exists; name another --backup for the {FORMAT_V1} log"
        ) from None
    done = False
    try:
        with os.fdopen(descriptor, "wb") as out:
            migration = _migrate(store, backup, out, at=at, actor=actor)
        done = True
    finally:
        if not done:
            backup.unlink(missing_ok=True)
    return migration


def _migrate(
    store: PostgresStore, backup: Path, out: BinaryIO, *, at: int, actor: Actor
) -> Migration:
    """Every step, in one transaction under the log's lock; committed only if all succeed."""
    connection = store.connection
    try:
        with connection.transaction():
            connection.execute(f"SELECT pg_advisory_xact_lock({int(LOCK_KEY)})")
            head, digest = _restore(store, backup, out)
            event = migrated(backup, digest, head)
            store.tree_cache = None
            sealed = PostgresTransaction(store, head).append([event], at=at, actor=actor)
    except psycopg.Error as error:
        store.tree_cache = None
        raise translate_error(error, store.path) from None
    except BaseException:
        store.tree_cache = None  # what the append cached was rolled back
        raise
    return Migration(
        backup=backup, backup_sha256=digest, head=head, event=event, seq=sealed[0].entry.seq
    )


def _restore(store: PostgresStore, backup: Path, out: BinaryIO) -> tuple[Head, str]:
    """Under the lock: the backup written, the log in the new tables; the old head, the SHA-256.

    Raises:
        InputError: the log is no longer in format ``pwf.store.v1``.
        StoreError: the head row is not the last event, or the view does not give the bytes back.
    """
    connection = store.connection
    found, _ = found_format(connection)  # another migration may have run meanwhile
    if found != FORMAT_V1:
        raise InputError(f"{store.path} is in format {found}; nothing to migrate")
    head = head_of(connection.execute(HEAD).fetchone())
    for table in TABLES:
        connection.execute(table)
    digest = hashlib.sha256()

    def export(lines: bytes) -> None:
        out.write(lines)
        digest.update(lines)

    if _copy_log(connection, export) != head:
        raise StoreError(
            f"{store.path}: the log's head row is not its last event;"
            " `pwf log verify --store` it first"
        )
    out.flush()
    os.fsync(out.fileno())
    _sync_folder(backup)
    connection.execute("DROP TABLE events")  # and its indexes
    for index in INDEXES:
        connection.execute(index)
    connection.execute(EVENTS_VIEW.format(schema=""))
    connection.execute("UPDATE _pwf_meta SET value = %s WHERE key = 'format'", (FORMAT,))
    _check_view(connection, digest.hexdigest(), store.path)
    build(connection, head)  # a log made before the tree gets it here (ADR 0083)
    return head, digest.hexdigest()


def _copy_log(connection: psycopg.Connection[TupleRow], export: Callable[[bytes], None]) -> Head:
    """Re-store every event of the old ``events`` table, checked, and ``export`` its lines.

    Returns the old log's last head.
    """
    first = connection.execute(
        "SELECT seq, prev_hash, batch FROM events ORDER BY seq LIMIT 1"
    ).fetchone()
    origin = v1_origin(first)
    head = origin
    last: Batch | None = None
    with connection.cursor(name="pwf_migrate") as cursor:
        cursor.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq")
        while rows := cursor.fetchmany(CHUNK):
            rows = [(*row[:11], as_bytes(row[11])) for row in rows]
            previous = None if head == origin else head.content_hash
            events, head = checked_rows(rows, head, origin)
            export(b"".join(body + b"\n" for _columns, body in events))
            packed = pack(events, previous=previous, last=last)
            _copy_in(connection, packed)
            last = packed.last
    return head


def _copy_in(connection: psycopg.Connection[TupleRow], packed: Packed) -> None:
    """Copy the packed rows into the log's three tables."""
    tables: dict[str, Sequence[tuple[object, ...]]] = {
        "batches": packed.batches,
        "rows": packed.rows,
        "whole": packed.whole,
    }
    with connection.cursor() as cursor:
        for name, target in _COPIES:
            if not tables[name]:
                continue
            with cursor.copy(f"COPY {target} FROM STDIN") as copy:
                for row in tables[name]:
                    copy.write_row(row)


def _check_view(connection: psycopg.Connection[TupleRow], expected: str, where: str) -> None:
    """The view gives back every event's bytes as the backup holds them.

    Raises:
        StoreError: the export through the new tables is not the backup.
    """
    digest = hashlib.sha256()
    with connection.cursor(name="pwf_migrated") as cursor:
        cursor.itersize = CHUNK
        cursor.execute("SELECT body FROM events ORDER BY seq")
        for (body,) in cursor:
            digest.update(as_bytes(body))
            digest.update(b"\n")
    if digest.hexdigest() != expected:
        raise StoreError(f"{where}: the new tables do not give back the old log's bytes")


def _sync_folder(path: Path) -> None:
    """Make the backup's name durable: sync the folder that holds it."""
    sync(path.absolute().parent)
