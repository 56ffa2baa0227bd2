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
import os
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pwf._sqlite import exact_text, quote
from pwf.errors import ChainError, InputError, StoreError
from pwf.events import LogMigrated, content_hash_of, open_body
from pwf.events.stored import open_stored
from pwf.private import create_file, sync
from pwf.store import Head, check_position, origin_of
from pwf.store.compaction import file_sha256
from pwf.store.image import copy_file, install, shape_of
from pwf.store.log_writes import write
from pwf.store.rows import check_link
from pwf.store.schema import FORMAT, FORMAT_V1
from pwf.store.sqlite_schema import LOG_SCHEMA, translate_error, wrong_format

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from pathlib import Path

    from pwf.store import EventLog
    from pwf.store.log_writes import Stored

__all__ = [
    "BackupProof",
    "Migration",
    "OldLocalFile",
    "checked_rows",
    "file_format",
    "migrate",
    "migrated",
    "migrated_event",
    "old_local_file",
    "prove_backup",
    "set_aside",
    "v1_origin",
]

_SQLITE_HEADER: Final = b"SQLite format 3\x00"
"""How every SQLite database file starts; a shared log's backup is its export instead."""
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
        InputError: ``path`` is not a v1 pwf database, or ``backup`` exists or has no folder.
        ChainError: an event of the old log does not match its hash or link.
        StoreError: SQLite failed, or the log moved while it was migrated.
    """
    found = file_format(path)
    if found == FORMAT:
        raise InputError(f"{path} is already in format {FORMAT}; nothing to migrate")
    if found != FORMAT_V1:
        raise wrong_format(path, found)
    kept = _claim_backup(backup, path)
    scratch = path.with_name(path.name + ".migrating")
    done = False
    try:
        if not kept:
            copy_file(path, backup)
            _settle_backup(backup)
        digest = file_sha256(backup)
        for leftover in (scratch, *_sidecars(scratch)):
            leftover.unlink(missing_ok=True)
        os.close(create_file(scratch))  # private from the start, as every file of the log
        head = _build(scratch, backup)
        event = migrated(backup, digest, head)
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


@dataclass(frozen=True)
class OldLocalFile:
    """A host's local file in format ``pwf.store.v1`` on a shared log, to re-create (ADR 0104)."""

    path: Path
    aside: Path
    """Where the old file is kept."""
    origin: str | None
    """The name its checkpoints give the log (``pwf init --origin``): the new file keeps it."""


def old_local_file(path: Path, aside: Path, *, log_id: str, log: str) -> OldLocalFile:
    """The local file at ``path`` of the shared log ``log`` (its id ``log_id``), read only.

    Raises:
        InputError: it is not in format ``pwf.store.v1``, mirrors another
            log, or ``aside`` exists.
    """
    found = file_format(path)
    if found == FORMAT:
        raise InputError(f"{path} is already in format {FORMAT}; nothing to re-create")
    if found != FORMAT_V1:
        raise wrong_format(path, found)
    connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        meta = dict(connection.execute("SELECT key, value FROM _pwf_meta").fetchall())
    except sqlite3.Error as error:
        raise translate_error(error, path) from None
    finally:
        connection.close()
    if meta.get("log_id", log_id) != log_id:
        raise InputError(f"{path}: mirrors another log than {log}; nothing changed")
    if aside.exists():
        raise InputError(f"{aside} exists; move it away to keep {path} there")
    origin = meta.get("origin")
    return OldLocalFile(path, aside, None if origin is None else str(origin))


def set_aside(local: OldLocalFile) -> None:
    """Move the old local file, made one whole file first, to :attr:`OldLocalFile.aside`."""
    try:
        _settle_backup(local.path)
    except sqlite3.Error as error:
        raise translate_error(error, local.path) from None
    local.path.rename(local.aside)


def migrated(backup: Path, digest: str, head: Head) -> LogMigrated:
    """The ``log.migrated`` event of a v1 log ending at ``head``, kept at ``backup``."""
    return LogMigrated(
        from_format=FORMAT_V1,
        to_format=FORMAT,
        backup_path=str(backup.absolute()),
        backup_sha256=digest,
        backup_seq=head.seq,
        backup_hash=head.content_hash,
    )


def _claim_backup(backup: Path, path: Path) -> bool:
    """Take the name ``backup``; True when it holds already what an interrupted migrate left.

    A migrate killed after its copy of ``path`` was settled leaves that copy,
    and its own ``.migrating`` file, behind.  A copy that is one file of
    format v1 whose log ends at the head ``path``'s log still ends at holds
    the same log, so it is kept as the backup and not copied again; an empty
    file is a name a killed migrate took before it copied.  Anything else at
    ``backup`` is left as it is (ADR 0113).

    Raises:
        InputError: ``backup`` holds anything else, or its folder does not exist.
    """
    try:
        os.close(create_file(backup))
    except FileExistsError:
        if _left_behind(backup, path):
            return True
        with contextlib.suppress(OSError):
            if backup.stat().st_size == 0 and not any(s.exists() for s in _sidecars(backup)):
                return False
        raise InputError(
            f"{backup} exists; name another --backup for the {FORMAT_V1} file"
        ) from None
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(f"cannot write --backup {backup}: its folder does not exist") from None
    return False


def _left_behind(backup: Path, path: Path) -> bool:
    """Whether ``backup`` is a settled v1 copy of ``path``'s log as it stands (its head)."""
    if any(sidecar.exists() for sidecar in _sidecars(backup)):
        return False
    try:
        if file_format(backup) != FORMAT_V1:
            return False
        settled, head = _v1_head(backup)
        return settled == "delete" and head == _v1_head(path)[1]
    except (StoreError, sqlite3.Error):
        return False


def _v1_head(path: Path) -> tuple[str, tuple[object, ...] | None]:
    """The journal mode of the v1 file at ``path`` and its head row, read without a write."""
    connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        mode = connection.execute("PRAGMA journal_mode").fetchone()
        head = connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
    finally:
        connection.close()
    return str(mode[0]), None if head is None else tuple(head)


def _sidecars(path: Path) -> tuple[Path, ...]:
    return tuple(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))


def _settle_backup(path: Path) -> None:
    """Leave the backup one file in rollback-journal mode, synced: its bytes are the whole log."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = DELETE")
    finally:
        connection.close()
    for sidecar in _sidecars(path):
        sidecar.unlink(missing_ok=True)
    sync(path)


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
    origin = v1_origin(
        connection.execute(
            "SELECT seq, prev_hash, batch FROM old.events ORDER BY seq LIMIT 1"
        ).fetchone()
    )
    head = origin
    while True:
        rows = connection.execute(_V1_ROWS, (head.seq, CHUNK)).fetchall()
        if not rows:
            return head
        previous = None if head == origin else head.content_hash
        events, head = checked_rows(rows, head, origin)
        write(connection, events, previous=previous)


def v1_origin(first: Sequence[Any] | None) -> Head:
    """Where an old log starts, from its first row's seq, prev hash and batch (None: no row).

    Zeros, or just before the first event of a compacted log.
    """
    if first is None or first[0] == 1:
        return Head(0, None, 0)
    return Head(first[0] - 1, first[1], first[2] - 1)


def checked_rows(
    rows: Iterable[Sequence[Any]], head: Head, origin: Head
) -> tuple[list[Stored], Head]:
    """Rows of :data:`~pwf.store.rows.COLUMNS` that follow ``head``, as events to re-store.

    Each one's seq follows, its bytes match its content hash and its prev
    hash names the event before (but where the log starts at ``origin``).
    Returns the events (indexed columns, bytes) and the head after them.

    Raises:
        ChainError: the first row that does not.
    """
    events: list[Stored] = []
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
    return events, head


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
    if file_sha256(backup) != event.backup_sha256:
        return BackupProof(event, failure="its SHA-256 is not the one log.migrated names")
    try:
        count, failure = _walk_file(backup, _bodies(log, event.backup_seq), event)
    except sqlite3.Error as error:
        return BackupProof(event, failure=str(error))
    except OSError as error:
        return BackupProof(event, failure=f"{backup}: {error.strerror}")
    return BackupProof(event, count, failure)


def _walk_file(
    backup: Path, ours: Iterator[tuple[int, bytes]], event: LogMigrated
) -> tuple[int, str | None]:
    """Walk the backup: a SQLite file's log, or a shared log's export (ADR 0104)."""
    with backup.open("rb") as start:
        is_database = start.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    if not is_database:
        return _walk_lines(backup, ours, event)
    connection = sqlite3.connect(f"{backup.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return _walk_backup(connection, ours, event)
    finally:
        connection.close()


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


def _walk_lines(
    backup: Path, ours: Iterator[tuple[int, bytes]], event: LogMigrated
) -> tuple[int, str | None]:
    """:func:`_walk_backup` of an export: each line one event's bytes and a newline."""
    count = 0
    current = Head(0, None, 0)
    with backup.open("rb") as lines:
        for line in lines:
            seq = current.seq + 1
            if not line.endswith(b"\n"):
                return count, f"its line for seq {seq} has no newline"
            body = line[:-1]
            try:
                entry = open_stored(body)
                if count == 0:
                    current = origin_of(entry.seq, body)
                    seq = current.seq + 1
                check_position(seq, entry.seq)
                check_link(seq, entry, current, opens=count == 0)
            except (InputError, ChainError) as error:
                return count, f"its event at seq {seq} is not sound ({error})"
            if next(ours, None) != (seq, body):
                return count, f"seq {seq} differs from the migrated log"
            current = Head(seq, entry.content_hash, entry.batch)
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
