"""``pwf state restore``: put a proved backup in place of the database, atomically (ADR 0080).

Imports the store, the verifier, the compaction proof and the host's
maintenance lock and direct-mode guard.  The steps, in order:

1. prove the backup alone: it is a pwf database whose hash chain holds and
   whose projections equal a rebuild of its log;
2. when the live log was pruned with this very backup (its SHA-256 is the
   one ``log.pruned`` records, ADR 0103; or ``log.compacted`` for a log
   compacted before), prove the link as ``pwf log verify --backup`` does;
3. take the maintenance lock, refuse while a served host holds the
   database, and take the file for ourselves: SQLite will leave WAL mode and
   hold an exclusive lock only when no other connection (writer, reader or
   host) has it open;
4. write the backup beside the database with SQLite's backup API, fsync it,
   keep the replaced file under a name of its own (a hard link, so no byte
   of it is rewritten), rename the new file over the database and fsync the
   directory.

A failure before the rename leaves the database as it was; the rename is the
one step that changes what the path names.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from typing import TYPE_CHECKING, NamedTuple

from pwf.errors import CommandError, InputError
from pwf.events import LogCompacted, LogPruned
from pwf.host import acquire_lock, refuse_if_served
from pwf.private import make_directories, sync
from pwf.store import EMPTY
from pwf.store.compaction import file_sha256, prove
from pwf.store.opening import open_file
from pwf.verify import verify_failure

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pwf.store import SharedLog

__all__ = ["Restored", "restore", "restore_shared"]


class Restored(NamedTuple):
    """What a restore did: the backup's head, the proof made, and where the old file went."""

    events: int
    head_seq: int
    proved_by: str | None
    """The type of the live log's event that names the backup and was proved: ``log.pruned``
    or ``log.compacted``; None when no event of the live log names it."""
    kept: Path | None
    replaced_head_seq: int | None

    @property
    def compaction_proved(self) -> bool:
        """Whether an event of the live log named the backup, and the link was proved."""
        return self.proved_by is not None


def restore(backup: Path, database: Path, now: int) -> Restored:
    """Replace ``database`` with a proved copy of ``backup`` (see the module docstring).

    Raises:
        InputError: the backup is missing, is the database, or does not prove.
        CommandError: a served host, a writer, a reader or maintenance holds the database.
    """
    backup, database = backup.absolute(), database.absolute()
    if not backup.is_file():
        raise InputError(f"no backup at {backup}")
    if database.exists() and backup.samefile(database):
        raise InputError(f"{backup} is the database itself; name a backup of it")
    events, head_seq = _prove_alone(backup)
    make_directories(database.parent)
    lock = acquire_lock(database)
    try:
        proved, replaced = _check_live(backup, database, now) if database.exists() else (None, None)
        with _taken(database):
            kept = _replace(backup, database, now)
    finally:
        lock.release()
    return Restored(events, head_seq, proved, kept, replaced)


def restore_shared(backup: Path, log: SharedLog) -> tuple[int, int]:
    """Prove ``backup`` alone, then copy it into the empty shared ``log``; events and head seq.

    Raises:
        InputError: the backup does not prove, or the shared log holds an event.
    """
    backup = backup.absolute()
    if not backup.is_file():
        raise InputError(f"no backup at {backup}")
    events, head_seq = _prove_alone(backup)
    log.restore_from(backup)
    return events, head_seq


def _prove_alone(backup: Path) -> tuple[int, int]:
    with open_file(backup, read_only=True) as copy:
        failure = verify_failure(copy)
        head = copy.head()
        report_events = head.seq - copy.origin().seq
    if failure is not None:
        raise InputError(f"{backup} does not prove, so it is not restored: {failure}")
    return report_events, head.seq


def _check_live(backup: Path, database: Path, now: int) -> tuple[str | None, int | None]:
    """Refuse a served database; prove the link when the live log's prune names this backup.

    Returns the type of the event that names the backup, once proved (None
    when none names it), and the live head seq.
    """
    from pwf.store.pruned import prove_pruned  # noqa: PLC0415 - with the proof

    with open_file(database, read_only=True) as live:
        refuse_if_served(live, now)
        head = live.head().seq
        pruned = prove_pruned(live, live.connection, backup)
        if pruned is not None and pruned.named:  # else a backup other than the prune's
            if pruned.failure is None:
                return LogPruned.TAG, head
            raise InputError(
                f"{backup} is the backup {database}'s log.pruned names, but it does not prove:"
                f" {pruned.failure}"
            )
        origin = live.origin()
        if origin == EMPTY:
            return None, head
        opening = next(live.entries(origin.seq + 1, origin.seq + 1)).event
        assert isinstance(opening, LogCompacted)  # origin() found it
        if file_sha256(backup) != opening.backup_sha256:
            return None, head  # a backup other than the one the compaction names
        proof = prove(live, backup)
        if proof.ok:
            return LogCompacted.TAG, head
        raise InputError(
            f"{backup} is the backup {database}'s log.compacted names, but the link does not"
            f" prove: {proof.failure}"
        )


@contextlib.contextmanager
def _taken(database: Path) -> Iterator[None]:
    """Hold the database alone: out of WAL mode and under an exclusive lock, or refuse."""
    if not database.exists():
        yield
        return
    busy = CommandError(
        f"{database} is open in another process (a writer, pwf serve or pwf web):"
        " stop it before restoring"
    )
    connection = sqlite3.connect(database, isolation_level=None, timeout=0)
    try:
        try:
            mode = connection.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
            if str(mode).lower() != "delete":
                raise busy
            connection.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError:
            raise busy from None
        yield
    finally:
        connection.close()


def _replace(backup: Path, database: Path, now: int) -> Path | None:
    """Write the backup beside ``database``, keep the old file, rename; the kept file or None."""
    existed = database.exists()
    kept = database.with_name(f"{database.name}.before-restore-{now}")
    if existed and kept.exists():
        raise CommandError(f"{kept} already exists; move it away first")
    fresh = database.with_name(f".{database.name}.restoring-{now}")
    fresh.unlink(missing_ok=True)
    try:
        _copy(backup, fresh)
        if existed:
            _keep(database, kept)
        fresh.replace(database)
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    sync(database.parent)
    return kept if existed else None


def _copy(backup: Path, fresh: Path) -> None:
    """SQLite's backup API from the backup into a new file, 0600 and synced."""
    source = sqlite3.connect(f"{backup.as_uri()}?mode=ro", uri=True)
    try:
        target = sqlite3.connect(fresh)
        try:
            source.backup(target)
        finally:
            target.close()
    finally:
        source.close()
    fresh.chmod(0o600)
    sync(fresh)


def _keep(database: Path, kept: Path) -> None:
    """The replaced file under its own name: a hard link, or a synced copy where links fail."""
    try:
        os.link(database, kept)
    except OSError:
        shutil.copy2(database, kept)
        sync(kept)
