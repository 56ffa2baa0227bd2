"""A SQLite log of ``pwf.store.v1`` upgraded to ``pwf.store.v2`` in one proven step (ADR 0102).

Imports the SQLite helpers, errors, events, and the store's schema, image,
packing and writes.  :func:`migrate` copies the old file whole to its
backup, builds the new file beside it (every table but the old ``events``
copied as it is, the log re-stored in the new tables, each event's bytes
checked against its hash and link on the way), appends ``log.migrated``
naming the backup's SHA-256 and head, and copies the new file over the
live one under its write lock.  :func:`prove_backup` is ``pwf log verify
--backup``'s check of such a backup: its bytes are the ones the event
names, its own chain holds, and each of its events is, byte for byte, the
event at the same seq of the migrated log.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pwf._sqlite import exact_text, quote
from pwf.errors import ChainError, InputError, StoreError
from pwf.events import LogMigrated, content_hash_of, open_body
from pwf.private import create_file
from pwf.store import Head
from pwf.store.image import copy_file, install, shape_of
from pwf.store.log_writes import write
from pwf.store.schema import FORMAT, FORMAT_V1
from pwf.store.sqlite_schema import LOG_SCHEMA, translate_error, wrong_format

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from pwf.store import EventLog

__all__ = ["BackupProof", "Migration", "file_format", "migrate", "prove_backup"]

CHUNK: Final = 20_000
"""Events re-stored per statement batch."""
_V1_ROWS: Final = (
    "SELECT seq, batch, type, at, run_id, session_id, request_id, client_id, idempotency_key,"
    " content_hash, prev_hash, body FROM old.events WHERE seq > ? ORDER BY seq LIMIT ?"
)


@dataclass(frozen=True)
class Migration:
    """What :func:`migrate` did: the old head, the backup and the event that names it."""

    backup: Path
    backup_sha256: str
    head: Head
    """The old log's head, which the backup holds."""
    event: LogMigrated
    seq: int
    """Where ``log.migrated`` stands."""


def file_format(path: Path) -> str | None:
    """The format row of the pwf file at ``path`` (None when it has none), read without a write.

    Raises:
        StoreError: the file cannot be read as a SQLite database.
    """
    try:
        connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise translate_error(error, path) from None
    try:
        row = connection.execute("SELECT value FROM _pwf_meta WHERE key = 'format'").fetchone()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    return None if row is None else str(row[0])


def migrate(
    path: Path,
    backup: Path,
    *,
    seal: Callable[[Path, LogMigrated], int],
    busy_timeout_ms: int,
) -> Migration:
    """Upgrade the v1 database at ``path`` to v2, keeping it whole at ``backup``.

    ``seal`` appends the ``log.migrated`` event to the new file at the path
    it is given (through the store, with its projections) and returns its
    seq.  Nothing changes at ``path`` unless every step succeeded: the new
    file is copied over it in one write transaction, and only if its head
    is still the backup's.

    Raises:
        InputError: ``path`` is not a v1 pwf database, or ``backup`` exists.
        ChainError: an event of the old log does not match its hash or link.
        StoreError: SQLite failed, or the log moved while it was migrated.
    """
    found = file_format(path)
    if found == FORMAT:
        raise InputError(f"{path} is already in format {FORMAT}; nothing to migrate")
    if found != FORMAT_V1:
        raise wrong_format(path, found)
    try:
        os.close(create_file(backup))
    except FileExistsError:
        raise InputError(
            f"{backup} exists; name another --backup for the {FORMAT_V1} file"
        ) from None
    scratch = path.with_name(path.name + ".migrating")
    done = False
    try:
        copy_file(path, backup)
        _settle_backup(backup)
        digest = _sha256(backup)
        for leftover in (scratch, *_sidecars(scratch)):
            leftover.unlink(missing_ok=True)
        head = _build(scratch, backup)
        event = LogMigrated(
            from_format=FORMAT_V1,
            to_format=FORMAT,
            backup_path=str(backup.absolute()),
            backup_sha256=digest,
            backup_seq=head.seq,
            backup_hash=head.content_hash,
        )
        seq = seal(scratch, event)
        _install(scratch, path, head, busy_timeout_ms)
        done = True
    finally:
        for leftover in (
            scratch,
            *_sidecars(scratch),
            *(() if done else (backup, *_sidecars(backup))),
        ):
            leftover.unlink(missing_ok=True)
    return Migration(backup=backup, backup_sha256=digest, head=head, event=event, seq=seq)


def _sidecars(path: Path) -> tuple[Path, ...]:
    return tuple(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _settle_backup(path: Path) -> None:
    """Leave the backup one file in rollback-journal mode, synced: its bytes are the whole log."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = DELETE")
    finally:
        connection.close()
    for sidecar in _sidecars(path):
        sidecar.unlink(missing_ok=True)
    _fsync(path)


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _build(scratch: Path, backup: Path) -> Head:
    """Write the v2 file at ``scratch`` from the v1 ``backup``; the old log's head."""
    connection = exact_text(
        sqlite3.connect(scratch.absolute().as_uri(), uri=True, isolation_level=None)
    )
    try:
        connection.execute("ATTACH DATABASE ? AS old", (f"{backup.absolute().as_uri()}?mode=ro",))
        return _fill(connection)
    except sqlite3.Error as error:
        raise translate_error(error, backup) from None
    finally:
        connection.close()


def _fill(connection: sqlite3.Connection) -> Head:
    """Copy every table of ``old`` but its log, re-store the log; the old log's head."""
    shape = shape_of(connection, "old")
    for mark, value in shape.marks:
        shown = f"'{value}'" if isinstance(value, str) else str(int(str(value)))
        connection.execute(f"PRAGMA main.{mark} = {shown}")
    connection.execute("PRAGMA main.journal_mode = OFF")
    connection.execute("PRAGMA main.synchronous = OFF")
    kept = [
        (kind, name, sql) for kind, name, table, sql in shape.schema if table != "events" and sql
    ]
    later = ("CREATE INDEX", "CREATE VIEW")
    connection.execute("BEGIN")
    for name, sql in ((n, q) for k, n, q in kept if k == "table" and not n.startswith("sqlite_")):
        connection.execute(sql)
        copy = f"INSERT INTO main.{quote(name)} SELECT * FROM old.{quote(name)}"  # noqa: S608 - the file's own names
        connection.execute(copy)
    for statement in (s for s in LOG_SCHEMA if not s.startswith(later)):
        connection.execute(statement.format(schema=""))
    head = _copy_log(connection)
    for statement in (s for s in LOG_SCHEMA if s.startswith(later)):
        connection.execute(statement.format(schema=""))
    for sql in (q for k, _n, q in kept if k in {"index", "view", "trigger"}):
        connection.execute(sql)
    connection.execute("UPDATE main._pwf_meta SET value = ? WHERE key = 'format'", (FORMAT,))
    stored = connection.execute("SELECT seq, content_hash, batch FROM main._pwf_head").fetchone()
    if (Head(*stored) if stored else Head(0, None, 0)) != head:
        raise StoreError("the old file's head row is not its last event; `pwf log verify` it first")
    connection.execute("COMMIT")
    connection.execute("PRAGMA main.journal_mode = DELETE")
    return head


def _copy_log(connection: sqlite3.Connection) -> Head:
    """Re-store every event of ``old.events``, checking each one's hash and link; the head."""
    origin = _origin(connection)
    head = origin
    while True:
        rows = connection.execute(_V1_ROWS, (head.seq, CHUNK)).fetchall()
        if not rows:
            return head
        previous = None if head == origin else head.content_hash
        events = []
        for row in rows:
            seq, batch, body, digest, prev = row[0], row[1], bytes(row[11]), row[9], row[10]
            if seq != head.seq + 1:
                raise ChainError(head.seq + 1, f"seq {head.seq + 1} is missing from the log")
            if content_hash_of(body) != digest:
                raise ChainError(seq, "the stored bytes do not match their content hash")
            if head.seq != origin.seq and prev != head.content_hash:
                raise ChainError(seq, "prevHash does not match the event before")
            events.append((tuple(row[:11]), body))
            head = Head(seq=seq, content_hash=digest, batch=batch)
        write(connection, events, previous=previous)


def _origin(connection: sqlite3.Connection) -> Head:
    """Where the old log starts: zeros, or just before the first event of a compacted log."""
    row = connection.execute(
        "SELECT seq, prev_hash, batch FROM old.events ORDER BY seq LIMIT 1"
    ).fetchone()
    if row is None or row[0] == 1:
        return Head(0, None, 0)
    return Head(row[0] - 1, row[1], row[2] - 1)


def _install(scratch: Path, path: Path, head: Head, busy_timeout_ms: int) -> None:
    """Copy ``scratch`` over ``path`` under its write lock, if its head is still ``head``."""
    source = exact_text(sqlite3.connect(scratch, isolation_level=None))
    try:
        destination = exact_text(sqlite3.connect(path, isolation_level=None))
        try:
            # As every pwf open for writing does; a reader then sees the head under the lock.
            destination.execute("PRAGMA journal_mode = WAL")
            watcher = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)

            def unmoved() -> None:
                rows = watcher.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchall()
                now = Head(*rows[0]) if rows else Head(0, None, 0)
                if now != head:
                    raise StoreError(
                        f"{path}: the log moved while it was migrated; run `pwf log migrate` again"
                    )

            try:
                install(
                    source,
                    destination,
                    unmoved,
                    busy_timeout_ms=busy_timeout_ms,
                    what="the migrated database",
                )
            finally:
                watcher.close()
        finally:
            destination.close()
    finally:
        source.close()


@dataclass(frozen=True)
class BackupProof:
    """What :func:`prove_backup` found: the backup's events, or the first thing that failed."""

    migrated: LogMigrated | None
    backup_events: int = 0
    failure: str | None = None


def migrated_event(log: EventLog) -> LogMigrated | None:
    """The log's last ``log.migrated`` event, if it has one."""
    found = None
    for stored in log.find(type=LogMigrated.TAG):
        found = stored
    if found is None:
        return None
    event = open_body(found.body).event
    return event if isinstance(event, LogMigrated) else None


def prove_backup(log: EventLog, backup: Path) -> BackupProof:
    """Prove that ``backup`` is the file the log's ``log.migrated`` names, event for event.

    Its SHA-256 is the one named; its own log walks from its origin to the
    head named, each event matching its hash and link; and every one of its
    events is the event at the same seq of ``log``, byte for byte.
    """
    event = migrated_event(log)
    if event is None:
        return BackupProof(None, failure="the log has no log.migrated event to prove against")
    if not backup.is_file():
        return BackupProof(event, failure=f"{backup} is not a file")
    if _sha256(backup) != event.backup_sha256:
        return BackupProof(event, failure="its SHA-256 is not the one log.migrated names")
    try:
        connection = sqlite3.connect(f"{backup.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as error:
        return BackupProof(event, failure=str(error))
    try:
        count, failure = _walk_backup(connection, _bodies(log, event.backup_seq), event)
    except sqlite3.Error as error:
        return BackupProof(event, failure=str(error))
    finally:
        connection.close()
    return BackupProof(event, count, failure)


def _walk_backup(
    connection: sqlite3.Connection, ours: Iterator[tuple[int, bytes]], event: LogMigrated
) -> tuple[int, str | None]:
    """How many of the backup's events matched, and the first failure (None: all, to its head)."""
    count = 0
    current = _origin_of(connection)
    for seq, digest, prev, body in connection.execute(
        "SELECT seq, content_hash, prev_hash, CAST(body AS BLOB) FROM events ORDER BY seq"
    ):
        if seq != current.seq + 1 or content_hash_of(bytes(body)) != digest:
            return count, f"its event at seq {seq} is not sound"
        if current.seq and prev != current.content_hash:
            return count, f"its event at seq {seq} does not link"
        if next(ours, None) != (seq, bytes(body)):
            return count, f"seq {seq} differs from the migrated log"
        current = Head(seq, digest, 0)
        count += 1
    if (current.seq, current.content_hash) != (event.backup_seq, event.backup_hash):
        return count, "its head is not the one log.migrated names"
    return count, None


def _origin_of(connection: sqlite3.Connection) -> Head:
    row = connection.execute("SELECT seq, prev_hash FROM events ORDER BY seq LIMIT 1").fetchone()
    return Head(0, None, 0) if row is None else Head(row[0] - 1, row[1], 0)


def _bodies(log: EventLog, last: int) -> Iterator[tuple[int, bytes]]:
    with contextlib.suppress(StopIteration):
        for stored in log.read(1, last):
            yield stored.seq, stored.body
