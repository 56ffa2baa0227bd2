"""Online backup of a state database, checked before and after (DOMAIN §13.1).

The destination is checked first (:mod:`pwf.host._destination`): never the
live database, a file beside it, a directory, or a backup a compaction
names.  The copy is made through a separate read-only connection in one
step of SQLite's backup API, which reads one committed state of the WAL
database from start to end, so it is a consistent point of the log.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

from pwf.errors import CommandError, PwfError, os_error_text
from pwf.host._destination import check_destination
from pwf.private import create_file, make_directories
from pwf.readmodel import dump, rebuild_into
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["backup_database", "check_destination"]


def _checked(connection: sqlite3.Connection, what: str) -> None:
    if connection.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        raise CommandError(f"{what} failed its integrity check")
    if connection.execute("PRAGMA foreign_key_check").fetchall():
        raise CommandError(f"{what} failed its foreign-key check")


def backup_database(
    live: Path, connection: sqlite3.Connection, destination: Path, *, replace: bool = True
) -> None:
    """Copy ``live`` to ``destination`` (0600, parents 0700) and prove the copy sound.

    ``connection`` is the live store's, to read the backups its compactions
    name.  An existing destination is replaced unless ``replace`` is false.

    Raises:
        CommandError: the destination is refused, or the copy failed or is unsound.
    """
    target = check_destination(live, connection, destination)
    if not replace and target.exists():
        raise CommandError(f"Backup destination already exists: {destination}")
    source = sqlite3.connect(f"{live.absolute().as_uri()}?mode=ro", uri=True)
    partial = target.with_name(target.name + ".partial")
    made = False
    try:
        _checked(source, "the live database")
        make_directories(target.parent)
        partial.unlink(missing_ok=True)
        os.close(create_file(partial))
        made = True
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)
        finally:
            copy.close()
        _place(partial, target, destination, replace=replace)
        made = False
    except OSError as error:
        raise CommandError(f"backup to {destination} failed: {os_error_text(error)}") from None
    except sqlite3.Error as error:
        raise CommandError(f"backup to {destination} failed: {error}") from None
    finally:
        source.close()
        if made:
            partial.unlink(missing_ok=True)
    _verify_copy(target)


def _place(partial: Path, target: Path, destination: Path, *, replace: bool) -> None:
    """Rename the finished copy into place; without ``replace`` never over an existing file."""
    if replace:
        partial.replace(target)
        return
    try:
        os.link(partial, target)
    except FileExistsError:
        raise CommandError(f"Backup destination already exists: {destination}") from None
    finally:
        partial.unlink(missing_ok=True)


def _verify_copy(destination: Path) -> None:
    """Reopen the copy read-only: integrity, the hash chain, and projections == its log."""
    try:
        with SqliteStore(destination, read_only=True) as copy:
            _checked(copy.connection, "the backup")
            report = copy.verify()
            if not report.ok:
                raise CommandError(f"the backup's log is broken at seq {report.first_bad_seq}")
            fresh = sqlite3.connect(":memory:")
            try:
                rebuild_into(fresh, copy.entries())
                if dump(fresh) != dump(copy.connection):
                    raise CommandError("the backup's projections differ from its log")
            finally:
                fresh.close()
    except PwfError as error:
        raise CommandError(str(error)) from None
