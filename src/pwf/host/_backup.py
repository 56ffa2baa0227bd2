"""Online backup of a state database, checked before and after (DOMAIN §13.1, ADR 0022).

The destination is checked first (:mod:`pwf.host._destination`): never the
live database, a file beside it, a directory, or a backup a compaction
names.  The copy is the log file's own (:meth:`pwf.store.LogFile.backup_to`):
one step of SQLite's backup API through a read-only connection of its own,
which reads one committed state of the WAL database from start to end, so it
is a consistent point of the log; no write transaction is held for it, and
writers commit meanwhile.  The copy is then reopened and checked as a file.
``state.backup`` takes the write lock only to adopt or validate the request
and to record its outcome (:mod:`pwf.host._maintenance`); the copy between
them, made by the work :func:`prepare_backup` returns, touches only files
and connections of its own.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from pwf._sqlite import exact_text, same_dump
from pwf.commands import Context, Result
from pwf.errors import CommandError, PwfError, StoreError, os_error_text
from pwf.events import LogCompacted, open_body
from pwf.fold import scratchfiles
from pwf.fold.bulk import rebuild_into
from pwf.fold.decode import decoded
from pwf.host._destination import check_destination
from pwf.private import create_file, make_directories, sync
from pwf.readmodel import ReadModel
from pwf.store import Head, check_link, check_position
from pwf.store.image import integrity
from pwf.store.opening import open_file

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from pwf.protocol.client import ClientRequest, ClientResponse
    from pwf.store import (
        EventLog,
        EventStore,
        FileTransaction,
        LogFile,
        SharedLog,
        StoreTransaction,
    )

__all__ = [
    "Recording",
    "backup_database",
    "backup_shared",
    "catch_up",
    "check_destination",
    "prepare_backup",
    "prepare_shared_backup",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Recording:
    """How the host records a command: its context, its adoption check and its record."""

    open: Callable[[StoreTransaction], Context]
    adopt: Callable[[Context, ClientRequest], ClientResponse | None]
    record: Callable[[Context, ClientRequest, Result], ClientResponse]
    validate: Callable[[Context, ClientRequest], Result]
    closed: Callable[[Context, ClientRequest], ClientResponse | None] = lambda _ctx, _request: None
    """The ``unavailable`` answer of a stopping host, asked after the replay lookup (HOST 1.20)."""

    def decide(
        self,
        store: LogFile,
        request: ClientRequest,
        work: Callable[[FileTransaction, Context], T],
    ) -> T | ClientResponse:
        """Run ``work`` in a savepoint of a write transaction, unless an answer is due first.

        The answer of a replay or of a stopping host comes back instead; a
        ``CommandError`` from ``work`` is recorded as a rejection, whose
        answer comes back.
        """
        with store.transaction() as tx:
            ctx = self.open(tx)
            stored = self.adopt(ctx, request) or self.closed(ctx, request)
            if stored is not None:
                return stored
            try:
                with tx.savepoint():
                    return work(tx, ctx)
            except CommandError as error:
                return self.record(ctx, request, Result(outcome="rejected", error=str(error)))

    def validated(
        self, store: LogFile | EventStore, request: ClientRequest
    ) -> Result | ClientResponse:
        """The validated result of ``request`` in a write transaction, unless an answer is due.

        As :meth:`decide` with the validation as the work, on any store (a
        file, or a shared log's host): the backup that follows runs outside
        the transaction.
        """
        file = cast("LogFile", store)  # decide only opens its transaction
        return self.decide(file, request, lambda _tx, ctx: self.validate(ctx, request))

    def finish(
        self, store: LogFile | EventStore, request: ClientRequest, result: Result
    ) -> ClientResponse:
        """Record ``result`` in a write transaction of its own, after the work outside one.

        A request with the same key that was recorded meanwhile is adopted
        instead of recorded twice.
        """
        with store.transaction() as tx:
            ctx = self.open(tx)
            return self.adopt(ctx, request) or self.record(ctx, request, result)


def prepare_shared_backup(
    store: EventStore, log: SharedLog, destination: Path, *, replace: bool = True
) -> Callable[[], None]:
    """As :func:`prepare_backup` for a shared log: the work snapshots it on a connection of its own.

    Raises:
        CommandError: the destination is refused.
    """
    target = check_destination(store.projections_file.path, store, destination)
    if not replace and target.exists():
        raise CommandError(f"Backup destination already exists: {destination}")

    def snapshot() -> None:
        _snapshot(log, target, destination, replace=replace)

    return snapshot


def backup_shared(
    store: EventStore, log: SharedLog, destination: Path, *, replace: bool = True
) -> Head:
    """Write a snapshot of the shared ``log`` with its projections to ``destination``; its head.

    The destination rules are the SQLite backup's, the live file being the
    host's local projection file.  The log's rows are copied as stored in
    one read-only snapshot (:meth:`pwf.store.SharedLog.snapshot_to`); the
    projections are then folded from the copied log by a rebuild, the copy
    is proved (integrity, its chain and tree, projections equal to its log,
    its head the snapshot's), synced, and renamed into place (ADR 0106).

    Raises:
        CommandError: the destination is refused, or the copy failed or is unsound.
    """
    target = check_destination(store.projections_file.path, store, destination)
    if not replace and target.exists():
        raise CommandError(f"Backup destination already exists: {destination}")
    return _snapshot(log, target, destination, replace=replace)


def _snapshot(log: SharedLog, target: Path, destination: Path, *, replace: bool) -> Head:
    """A snapshot of ``log``, its projections folded and proved, placed at ``target``; its head."""
    with _failing_as_backup(destination), _placed(target, destination, replace=replace) as partial:
        head = log.snapshot_to(partial)
        _fold_projections(partial)
        _verify_copy(partial, head)
        sync(partial)
    return head


def _fold_projections(partial: Path) -> None:
    """Give the copied log its projections and views, folded from it as a rebuild folds them.

    The file is left in rollback-journal mode: one file, nothing beside it.
    """
    from pwf.fold.rebuild import rebuild  # noqa: PLC0415 - a shared log's backup only
    from pwf.sqlviews import install_views  # noqa: PLC0415 - as rebuild

    with open_file(partial) as copy:
        copy.install(ReadModel().install, install_views)
        rebuild(copy)
        copy.connection.execute("PRAGMA journal_mode = DELETE")


def _unlink_database(path: Path) -> None:
    """Remove ``path`` and what SQLite may have left beside it."""
    for suffix in scratchfiles.SUFFIXES:
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def catch_up(store: EventLog, backup: Path, upto: Head) -> None:
    """Append to ``backup`` the events of ``store`` after its head up to ``upto``, folded.

    Inside the live write transaction (``upto`` its head) the backup then
    holds exactly the live log; outside it, a prune narrows what is left for
    then.  Every appended event is checked on its own and linked by the one
    chain rule.

    Raises:
        CommandError: the backup is not a prefix of the live log, or cannot be written.
    """
    model = ReadModel()
    try:
        with open_file(backup, hooks=[model]) as copy, copy.transaction() as into:
            head = into.head
            if head.seq > upto.seq:
                raise CommandError(f"{backup}: the backup is ahead of the live log")
            if head.seq:
                found = next(store.read(head.seq, head.seq), None)
                entry = None if found is None else open_body(found.body)
                if entry is None or (entry.content_hash, entry.batch) != (
                    head.content_hash,
                    head.batch,
                ):
                    raise CommandError(f"{backup}: the backup is not a prefix of the live log")
            before = head
            for stored in store.read(head.seq + 1, upto.seq):
                entry = open_body(stored.body)
                check_position(before.seq + 1, entry.seq)
                check_link(
                    entry.seq,
                    entry.prev_hash,
                    entry.batch,
                    before,
                    opens=False,
                    compacted=isinstance(entry.event, LogCompacted),
                )
                into.insert_verified(entry, stored.body)
                before = Head(seq=entry.seq, content_hash=entry.content_hash, batch=entry.batch)
            if before.seq != upto.seq:
                raise CommandError(f"{backup}: the live log ends before seq {upto.seq}")
    except (PwfError, sqlite3.Error) as error:
        if isinstance(error, CommandError):
            raise
        raise CommandError(
            f"bringing the backup {backup} up to the live log failed: {error}"
        ) from None


def _checked(live: Path, what: str) -> None:
    """SQLite's integrity and foreign-key checks of the file ``live``, on a read-only connection."""
    connection = sqlite3.connect(f"{live.absolute().as_uri()}?mode=ro", uri=True)
    try:
        found = integrity(connection)
    except sqlite3.Error as error:
        raise StoreError(str(error)) from None
    finally:
        connection.close()
    if found is not None:
        raise CommandError(f"{what} failed its integrity check")


def backup_database(store: LogFile, destination: Path, *, replace: bool = True) -> None:
    """Copy the log file ``store`` to ``destination`` (0600, parents 0700) and prove the copy sound.

    An existing destination is replaced unless ``replace`` is false.

    Raises:
        CommandError: the destination is refused, or the copy failed or is unsound.
    """
    prepare_backup(store, destination, replace=replace)()


def prepare_backup(
    store: LogFile, destination: Path, *, replace: bool = True
) -> Callable[[], None]:
    """Check ``destination`` against ``store``; the copy and its proof, to run after.

    The check reads the log, on the store's own connection.  The work it
    returns opens connections of its own to the file and never the
    store's, so a served host runs it off its writer thread (ADR 0114).

    Raises:
        CommandError: the destination is refused (the work raises it for a failed copy).
    """
    target = check_destination(store.path, store, destination)
    if not replace and target.exists():
        raise CommandError(f"Backup destination already exists: {destination}")
    live = store.path

    def copy() -> None:
        with _failing_as_backup(destination):
            _checked(live, "the live database")
            with _placed(target, destination, replace=replace) as partial:
                store.backup_to(partial)  # through a read-only connection of its own
                _verify_copy(partial)  # proved before it is placed: a refused copy replaces nothing

    return copy


@contextmanager
def _failing_as_backup(destination: Path) -> Iterator[None]:
    """What the block raises as ``OSError`` or ``StoreError`` is a failed backup to ``destination``.

    Raises:
        CommandError: ``backup to DESTINATION failed:`` and the error's own text.
    """
    try:
        yield
    except OSError as error:
        raise CommandError(f"backup to {destination} failed: {os_error_text(error)}") from None
    except StoreError as error:
        raise CommandError(f"backup to {destination} failed: {error}") from None


@contextmanager
def _placed(target: Path, destination: Path, *, replace: bool) -> Iterator[Path]:
    """A new empty file beside ``target`` for the block to fill, then renamed onto ``target``.

    The parents are made first (0700), and a ``.partial`` file left by an
    earlier attempt is removed with what SQLite left beside it.  When the
    block ends well the file is placed (:func:`_place`) and the folder
    synced, so the backup's name is on disk; when the block or the placing
    fails the file is removed.
    """
    partial = target.with_name(target.name + ".partial")
    make_directories(target.parent)
    _unlink_database(partial)
    os.close(create_file(partial))
    try:
        yield partial
        _place(partial, target, destination, replace=replace)
    except BaseException:
        _unlink_database(partial)
        raise
    sync(target.parent)


def _place(partial: Path, target: Path, destination: Path, *, replace: bool) -> None:
    """Rename the finished copy into place; without ``replace`` never over an existing file.

    What reading the copy left beside it (the ``-shm`` of its check) goes;
    a write-ahead log with frames in it would hold part of the copy, so the
    copy is refused instead.
    """
    wal = partial.with_name(f"{partial.name}-wal")
    if wal.exists() and wal.stat().st_size:
        raise StoreError(f"the copy {partial} left a write-ahead log that is not empty")
    try:
        if replace:
            partial.replace(target)
        else:
            os.link(partial, target)
    except FileExistsError:
        raise CommandError(f"Backup destination already exists: {destination}") from None
    finally:
        _unlink_database(partial)


def _verify_copy(destination: Path, head: Head | None = None) -> None:
    """Reopen the copy read-only: integrity, the hash chain, and projections == its log.

    With ``head`` the copy's log must end there (a snapshot's head).
    """
    try:
        with open_file(destination, read_only=True) as copy:  # the copy is a file of its own
            _checked(destination, "the backup")
            report = copy.verify()
            if not report.ok:
                raise CommandError(f"the backup's log is broken at seq {report.first_bad_seq}")
            if head is not None and copy.head() != head:
                raise CommandError(f"the backup's log does not end at seq {head.seq}")
            fresh = exact_text(sqlite3.connect(""))  # a private file SQLite deletes on close
            kept = exact_text(
                sqlite3.connect(f"{destination.absolute().as_uri()}?mode=ro", uri=True)
            )
            try:
                # The verify above parsed every event whole: the fold only decodes them.
                rebuild_into(fresh, (decoded(item.seq, item.body) for item in copy.read()))
                if not same_dump(fresh, kept):
                    raise CommandError("the backup's projections differ from its log")
            finally:
                kept.close()
                fresh.close()
    except PwfError as error:
        raise CommandError(str(error)) from None
