"""The file work of ``state.prune`` (DOMAIN §13.2): lock, sizes, compaction, vacuum.

Edge code for :meth:`pwf.host.Host.request`: the selection is the pure
:mod:`pwf.commands.prune`; here are the lock file, the local time zone of
zone-less cutoffs, the database's sizes, emptying and counting the
projections around a compaction, and the vacuum after it (ADR 0018, 0019).
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pwf.commands.prune import Cutoff, iso_utc
from pwf.errors import CommandError
from pwf.readmodel import projection_tables

if TYPE_CHECKING:
    from pwf.commands.prune import Selection

__all__ = [
    "Tally",
    "acquire_lock",
    "database_bytes",
    "empty_projections",
    "report",
    "resolve_cutoff",
    "settle",
    "tally",
]

_EPOCH = dt.datetime(1970, 1, 1)  # noqa: DTZ001 - a wall-clock origin, deliberately naive


def resolve_cutoff(cutoff: Cutoff) -> int:
    """Milliseconds since the epoch; a zone-less date-time is read in the local time zone."""
    if cutoff.zoned:
        return cutoff.ms
    try:
        wall = _EPOCH + dt.timedelta(milliseconds=cutoff.ms)
        offset = wall.astimezone().utcoffset()
    except (OverflowError, OSError, ValueError):
        raise CommandError("state prune --before requires a valid timestamp") from None
    return cutoff.ms - (0 if offset is None else offset // dt.timedelta(milliseconds=1))


def lock_path(database: Path) -> Path:
    """``{database}.maintenance.lock``."""
    return database.with_name(database.name + ".maintenance.lock")


def acquire_lock(database: Path) -> Path:
    """Create the maintenance lock file exclusively (0600); refuse when it exists."""
    path = lock_path(database)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        raise CommandError(f"State maintenance is already active: {path}") from None
    except OSError as error:
        raise CommandError(f"cannot create {path}: {error.strerror}") from None
    try:
        os.write(descriptor, f"{os.getpid()}\n".encode())
    finally:
        os.close(descriptor)
    return path


def database_bytes(database: Path) -> int:
    """The database file's size plus its WAL's."""
    total = 0
    for path in (database, Path(f"{database}-wal")):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total


@dataclass(frozen=True)
class Tally:
    """Projection rows (blobs apart), and the blobs with their bytes."""

    rows: int
    blobs: int
    blob_bytes: int


def tally(connection: sqlite3.Connection) -> Tally:
    """Count the projections as they stand in the open transaction."""
    rows = 0
    for table in projection_tables(connection):
        if table != "blobs":
            rows += connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]  # noqa: S608 - names from sqlite_master
    blobs, size = connection.execute(
        "SELECT count(*), coalesce(sum(byte_length), 0) FROM blobs"
    ).fetchone()
    return Tally(rows=rows, blobs=blobs, blob_bytes=size)


def empty_projections(connection: sqlite3.Connection) -> None:
    """Delete every projection row and rewind the checkpoints, before a compaction refolds them."""
    for table in projection_tables(connection):
        connection.execute(f'DELETE FROM "{table}"')  # noqa: S608 - names from sqlite_master
    connection.execute("UPDATE _pwf_checkpoint SET last_seq = 0")


def settle(connection: sqlite3.Connection, database: Path) -> None:
    """After the compaction committed: checkpoint, vacuum, checkpoint, integrity check."""
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        verdict = connection.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.Error as error:
        raise CommandError(f"{database}: vacuum after prune failed: {error}") from None
    if verdict != "ok":
        raise CommandError(f"{database}: failed its integrity check after prune")


def report(  # noqa: PLR0913 - the original's report members
    selection: Selection,
    *,
    before: Tally,
    after: Tally,
    bytes_before: int,
    bytes_after: int,
    applied: bool,
) -> dict[str, object]:
    """The original's prune report (§13.2), counts for trees and runs."""
    return {
        "applied": applied,
        "blockedTrees": len(selection.blocked),
        "candidateTrees": len(selection.roots),
        "cutoff": iso_utc(selection.cutoff),
        "databaseBytesAfter": bytes_after,
        "databaseBytesBefore": bytes_before,
        "deletedBlobBytes": before.blob_bytes - after.blob_bytes,
        "deletedBlobs": before.blobs - after.blobs,
        "deletedRows": before.rows - after.rows,
        "selectedRuns": len(selection.runs),
    }
