"""Where a backup may be written: never over the live database or anything pwf keeps beside it.

A destination is compared by the file it reaches, not by its text: the
realpath of its parent (symlinks followed, ``..`` resolved) joined with its
name, and, when the name itself is a symlink, the file it points to.  It is
refused when it is the live database (reached through a symlinked ``--db``
too), one of the files SQLite keeps beside it (``-wal``, ``-shm``,
``-journal``), a file pwf manages in the database's own directory (the
maintenance lock, the scratch files of replay, rebuild and verify), or a
backup that a ``log.compacted`` event names, following each backup's own
``log.compacted`` back through the earlier compactions.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pwf._sqlite import exact_text
from pwf.errors import CommandError, PwfError
from pwf.events import LogCompacted, LogMigrated, LogPruned, open_body

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pwf.store import EventLog

__all__ = ["check_destination", "resolved"]

_BESIDE: Final = ("-wal", "-shm", "-journal", ".maintenance.lock")
"""What pwf and SQLite keep beside a database, after its name."""
_SCRATCH: Final = re.compile(r"\.(?:rebuild|verify|tmp)-[a-z0-9_]{8}")
"""The scratch files of a fold start with the database's name and one of these."""
_DEEPEST: Final = 64
"""How many earlier compactions are followed back through their backups."""


def resolved(path: Path) -> Path:
    """The file ``path`` reaches: its parent's realpath and its name, or its symlink's target."""
    path = Path(os.path.abspath(path))  # noqa: PTH100 - normalises ``..`` without touching the disk
    if path.is_symlink():
        return Path(os.path.realpath(path))
    return Path(os.path.realpath(path.parent)) / path.name


def _databases(live: Path) -> set[Path]:
    """The live database as named (its parent resolved) and as reached through a symlink."""
    named = Path(os.path.abspath(live))  # noqa: PTH100 - the name as given, ``..`` resolved
    return {Path(os.path.realpath(named.parent)) / named.name, Path(os.path.realpath(named))}


def _managed(destination: Path, live: Path) -> str | None:
    """Why ``destination`` (resolved) is the live database or a file kept beside it."""
    for database in _databases(live):
        if destination.parent != database.parent:
            continue
        name, base = destination.name, database.name
        if name == base:
            return "destination must differ from the live database"
        if name in {base + suffix for suffix in _BESIDE}:
            return f"destination is a file the live database keeps beside it: {destination}"
        if name.startswith(base) and _SCRATCH.match(name, len(base)):
            return f"destination is a scratch file of the live database: {destination}"
    return None


def _backups(log: EventLog) -> Iterator[Path]:
    """Each backup a ``log.pruned`` or ``log.migrated`` names, then the compactions' chain.

    A prune and a migration keep every seq (ADR 0102, 0103): the log holds
    each of their events.  A compaction before them (ADR 0018) named one
    backup, whose own ``log.compacted`` named the one before.
    """
    seen: set[Path] = set()
    for tag in (LogPruned.TAG, LogMigrated.TAG):
        for stored in log.find(type=tag):
            event = open_body(stored.body).event
            if isinstance(event, LogPruned | LogMigrated):
                backup = resolved(Path(event.backup_path))
                if backup not in seen:
                    seen.add(backup)
                    yield backup
    pending = [stored.body for stored in log.find(type="log.compacted")]
    while pending and len(seen) < _DEEPEST:
        try:
            event = open_body(pending.pop()).event
        except PwfError:
            continue
        if not isinstance(event, LogCompacted):
            continue
        backup = resolved(Path(event.backup_path))
        if backup in seen:
            continue
        seen.add(backup)
        yield backup
        pending.extend(_first_compaction(backup))


def _first_compaction(backup: Path) -> list[bytes]:
    """The ``log.compacted`` bodies of an earlier backup, read without changing it."""
    if not backup.is_file():
        return []
    try:
        connection = exact_text(sqlite3.connect(f"{backup.as_uri()}?mode=ro&immutable=1", uri=True))
    except sqlite3.Error:
        return []
    try:
        rows = connection.execute("SELECT body FROM events WHERE type = 'log.compacted'")
        return [bytes(row[0]) for row in rows]
    except sqlite3.Error:
        return []
    finally:
        connection.close()


def check_destination(live: Path, log: EventLog, destination: Path) -> Path:
    """The resolved destination, or a one-line refusal when writing it would harm the log.

    Raises:
        CommandError: the destination is a directory, the live database or a
            file kept beside it, or a backup a compaction of this log names.
    """
    target = resolved(destination)
    reason = _managed(target, live)
    if reason is None and Path(f"{target}.partial") in _databases(live):
        reason = "destination must differ from the live database"
    if reason is not None:
        raise CommandError(reason)
    if target.is_dir():
        raise CommandError(f"backup destination is a directory: {destination}")
    if target in set(_backups(log)):
        raise CommandError(
            "destination is the backup a prune, compaction or migration of this log names:"
            f" {destination}"
        )
    return target
