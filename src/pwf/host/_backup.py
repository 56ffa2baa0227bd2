"""Online backup of a state database, checked before and after (DOMAIN §13.1).

Runs while the command holds the write lock, through a separate read-only
connection: in WAL mode it reads the last committed state while no other
writer can commit, so the copy is one consistent point of the log.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

from pwf.errors import CommandError, PwfError, os_error_text
from pwf.readmodel import dump, rebuild_into
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["backup_database"]


def _checked(connection: sqlite3.Connection, what: str) -> None:
    if connection.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        raise CommandError(f"{what} failed its integrity check")
    if connection.execute("PRAGMA foreign_key_check").fetchall():
        raise CommandError(f"{what} failed its foreign-key check")


def backup_database(live: Path, destination: Path) -> None:
    """Copy ``live`` to ``destination`` (0600, parents 0700) and prove the copy sound."""
    if destination.absolute() == live.absolute():
        raise CommandError("destination must differ from the live database")
    source = sqlite3.connect(f"{live.absolute().as_uri()}?mode=ro", uri=True)
    try:
        _checked(source, "the live database")
        destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = destination.with_name(destination.name + ".partial")
        partial.unlink(missing_ok=True)
        os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        target = sqlite3.connect(partial)
        try:
            source.backup(target)
        finally:
            target.close()
        partial.chmod(0o600)
        partial.replace(destination)
    except OSError as error:
        raise CommandError(f"backup to {destination} failed: {os_error_text(error)}") from None
    except sqlite3.Error as error:
        raise CommandError(f"backup to {destination} failed: {error}") from None
    finally:
        source.close()
    _verify_copy(destination)


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
