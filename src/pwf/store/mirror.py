"""A host's local SQLite file kept caught up from the shared log in PostgreSQL (ADR 0038).

Imports the store, its rows, the SQLite and PostgreSQL stores and errors.
The local file is an ordinary pwf database: its projections, and a copy of
every event it has applied, each checked against the chain as it is copied.
:class:`MirroredStore` composes the local file, a
:class:`~pwf.store.sqlite.SqliteStore`, with a :class:`Mirror` of the shared
log; its write
transaction spans both databases, in this order: ``BEGIN IMMEDIATE``
locally, then the shared log's advisory lock; fold every event of the
shared log the file has not applied yet (from any host) into the local
projections; let the caller decide and stage; copy the new events to
PostgreSQL and commit there; then commit locally.  A crash between the two
commits leaves the file behind the log, never ahead, and the next catch-up (at the next
open or command) folds what it missed.  While other hosts write, a transaction
frees the lock before its WAL flush, and nothing read or written is kept
locally before it is flushed (ADR 0053); while they do not, a decision may be
made ahead of the lock and written in one round trip (ADR 0062).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict, TypeVar, cast

from pwf._closing import Closing
from pwf.errors import ChainError, NotPwfDatabaseError, StoreError
from pwf.events import LogPruned
from pwf.store import EMPTY, AppendsAlone, Head, VerifyReport, origin_of
from pwf.store.log_writes import owe_refold, refold_owed, refolded, strip
from pwf.store.rows import BODY, COLUMNS, check_event, check_link, pruned_at
from pwf.store.schema import FORMAT, FORMAT_V1
from pwf.store.sqlite import SqliteStore, SqliteTransaction, Synchronous, translate_error
from pwf.store.unit import Repeatable, repeatable, run_all

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
    from contextlib import AbstractContextManager

    from pwf.events import Entry
    from pwf.sqlreader import RowReader
    from pwf.store import AppendHook, StoredEvent
    from pwf.store.postgres import PostgresStore, PostgresTransaction
    from pwf.store.unit import Observe, Outcome, Work

__all__ = ["CATCH_UP_STEP", "MirrorOptions", "MirroredStore"]

_SMALL_GAP: Final = 1_000
"""Up to this many missing events are fetched in one query, more are streamed."""
CATCH_UP_STEP: Final = 20_000
"""About how many events a catch-up folds per commit of the local file (a batch is never split)."""
_SENT: Final = 5_000
"""Rows of a long transaction (an import's) sent to the shared log in one round trip."""
T = TypeVar("T")


class _Stale(Exception):  # noqa: N818 - a decision, not an error: it is made again
    """A decision made ahead of the lock found the shared log moved; nothing was written.

    Raised by this module alone, at the end of the transaction, and caught in
    :meth:`Mirror.run`, which makes the decision again under the lock.
    """


class MirrorOptions(TypedDict, total=False):
    """The operator settings of :class:`MirroredStore`'s keywords, which give their defaults."""

    synchronous: Synchronous
    busy_timeout_ms: int
    hooks: Sequence[AppendHook]
    install: Callable[[sqlite3.Connection], None] | None


class MirroredStore(AppendsAlone, Closing):
    """A shared log of record in PostgreSQL and a local projection file caught up from it.

    Composed, not a SQLite store with a flag: the local
    :class:`~pwf.store.sqlite.SqliteStore` holds the projections and a
    checked copy of the log, and every read comes from it; writes, catch-ups
    and verify go through the :class:`Mirror` of the shared log.
    """

    def __init__(  # noqa: PLR0913 - the file, the log and operator settings
        self,
        path: str | os.PathLike[str],
        log: PostgresStore,
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout_ms: int = 5_000,
        hooks: Sequence[AppendHook] = (),
        install: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        """Open (creating if missing) the local file at ``path`` as a mirror of the shared ``log``.

        ``install`` creates the projections' tables in a new file.
        ``synchronous`` is NORMAL by default: an acknowledged command is
        durable once PostgreSQL commits, and a local commit lost to a power
        cut is folded again from the log at the next catch-up.

        The store owns ``log`` from here: :meth:`close` closes it, and so
        does a failure to open the file.

        Raises:
            StoreError: the file belongs to another log, or is ahead of this one.
        """
        self.shared = Mirror(log)
        self.refold: Callable[[MirroredStore], object] | None = None  # see _refolded
        self.before_local_commit: Callable[[], None] | None = None
        """Called between the shared log's commit and the file's (tests kill there)."""
        try:
            local = SqliteStore(
                path,
                create=True,
                synchronous=synchronous,
                busy_timeout_ms=busy_timeout_ms,
                hooks=hooks,
            )
        except NotPwfDatabaseError:
            log.close()
            _refuse_old_file(path, log.path)
            raise
        except BaseException:
            log.close()
            raise
        self.local = local
        try:
            local.install(
                *([] if install is None else [install]),
                lambda connection: self.shared.bind(connection, local.path),
            )
        except BaseException:
            self.close()
            raise

    @property
    def connection(self) -> sqlite3.Connection:
        """The local file's connection."""
        return self.local.connection

    @property
    def log_file(self) -> None:
        """None: the log of record is not a file (``state.prune`` refuses; ADR 0106 backs it up)."""

    @property
    def shared_log(self) -> PostgresStore:
        """The shared log of record, whose snapshot ``state.backup`` writes (ADR 0106)."""
        return self.shared.log

    @property
    def projections_file(self) -> SqliteStore:
        """The local file that holds the projections."""
        return self.local

    @property
    def log_name(self) -> str:
        """The shared log's URL without its password."""
        return self.shared.name

    def install(self, *installers: Callable[[sqlite3.Connection], object]) -> None:
        """Create schema in the local file, in its own transaction."""
        self.local.install(*installers)

    def catch_up(self) -> int:
        """Fold what the shared log holds beyond the local file; return how many events."""
        try:
            return self.shared.catch_up(self.local)
        finally:
            self._refolded()

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        """Both logs' write transaction: the lock is the shared log's, its commit goes first."""
        try:
            with self.shared.transaction(self.local, self._before_local_commit) as tx:
                yield tx
        finally:
            self._refolded()

    def run(self, work: Work[T]) -> T:
        """One decision: a repeatable one ahead of the shared log's lock when it may (ADR 0062)."""
        if isinstance(work, Repeatable):
            try:
                return self.shared.run(self.local, work, self._before_local_commit)
            finally:
                self._refolded()
        with self.transaction() as tx:
            return work(tx)

    def _refolded(self) -> None:
        """Run :attr:`refold` if a catch-up took in a prune (ADR 0107).

        The prune took the bytes of events the file had folded; the
        ``log.pruned``'s fold deleted the removed run trees, and what only a
        fold of the pruned log gives (the blobs) is folded again from its copy
        of the log, once the transaction committed.
        """
        if self.refold is not None and refold_owed(self.local.connection):
            self.refold(self)
            refolded(self.local.connection)

    def run_group(
        self, works: Iterator[Work[object]], observe: Observe | None = None
    ) -> list[Outcome]:
        """Decide ``works`` in one transaction of both logs, each in a savepoint of its own.

        Never bare and never again: a work's writes cannot be undone alone
        once they went to the shared log with the commit, so every work has
        its savepoint; ``observe`` has nothing to be told.
        """
        del observe
        try:
            return run_all(self.shared_transaction, works)
        finally:
            self._refolded()

    def shared_transaction(self) -> AbstractContextManager[SqliteTransaction]:
        """Both logs' transaction, without the refold after it (a group's, refolded once)."""
        return self.shared.transaction(self.local, self._before_local_commit)

    def _before_local_commit(self) -> None:
        if self.before_local_commit is not None:
            self.before_local_commit()

    def head(self) -> Head:
        """The local copy's tip (the shared log's, as of the last catch-up or write)."""
        return self.local.head()

    def origin(self) -> Head:
        """Where the local copy's chain starts."""
        return self.local.origin()

    def read(self, first: int = 1, last: int | None = None) -> Iterator[StoredEvent]:
        """Stream the local copy's stored events with ``first <= seq <= last``."""
        return self.local.read(first, last)

    def entries(self, first: int = 1, last: int | None = None) -> Iterator[Entry]:
        """Stream the local copy's checked, typed events with ``first <= seq <= last``."""
        return self.local.entries(first, last)

    def find(
        self, *, after: int = 0, until: int | None = None, **wanted: str | int | None
    ) -> Iterator[StoredEvent]:
        """Look events up in the local copy by their indexed columns and times."""
        return self.local.find(after=after, until=until, **wanted)

    def pruned(self, first: int = 1, last: int | None = None) -> Iterator[tuple[int, int]]:
        """The local copy's seqs ``first..last`` whose bytes a prune took (as its catch-up saw)."""
        return self.local.pruned(first, last)

    def verify(self, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
        """Verify the log of record, in PostgreSQL."""
        return self.shared.verify(deep=deep, after=after)

    def reader(self) -> RowReader:
        """Read the local file's committed projections."""
        return self.local.reader()

    def snapshot(self) -> AbstractContextManager[RowReader]:
        """Read one committed moment of the local file's projections."""
        return self.local.snapshot()

    def close(self) -> None:
        """Close the local file, then the connection to the shared log."""
        self.local.close()
        self.shared.close()


class Mirror:
    """The shared log a local file mirrors: its write path, catch-up and verify (ADR 0038).

    A :class:`MirroredStore` runs its write transactions, catch-ups and
    verification through it; it holds the connection to PostgreSQL and
    nothing of the local file but what each call is given.
    """

    def __init__(self, log: PostgresStore) -> None:
        """Mirror the shared ``log``."""
        self.log = log
        self._others_write = False
        """The last write transaction found other hosts' events (ADR 0053)."""

    @property
    def name(self) -> str:
        """The shared log's URL without its password."""
        return self.log.path

    def bind(self, connection: sqlite3.Connection, path: Path) -> None:
        """Tie the file at ``path`` to the log it mirrors, or refuse a file of another log.

        Raises:
            StoreError: the file mirrors another log.
        """
        row = connection.execute("SELECT value FROM _pwf_meta WHERE key = 'log_id'").fetchone()
        if row is not None and row[0] != self.log.log_id:
            raise StoreError(f"{path}: mirrors another log than {self.log.path}")
        if row is None:
            connection.execute(
                "INSERT INTO _pwf_meta (key, value) VALUES ('log_id', ?)", (self.log.log_id,)
            )

    def close(self) -> None:
        """Close the connection to the shared log."""
        self.log.close()

    def catch_up(self, local: SqliteStore) -> int:
        """Fold every event of the shared log ``local`` has not applied yet; return how many.

        What was read may be committed but not yet flushed by its writer; the
        file commits it only after a flush barrier (ADR 0053).  A long way
        behind (a new host on a long log), the file commits every
        :data:`CATCH_UP_STEP` events or so, at the end of a batch: an
        interrupted catch-up keeps what it folded, and the file is not locked
        for the whole way.  It returns once the file holds the head the shared
        log had when it began, however fast other hosts append meanwhile.
        """
        count, goal = 0, None
        while True:
            with local.file_transaction() as tx:
                target = self.log.head()  # read under the file's lock: no other catch-up passed it
                goal = target.seq if goal is None else goal
                step = self._apply(tx, target, limit=CATCH_UP_STEP)
                if step:
                    self.log.flush()
                reached = tx.head.seq >= goal  # the head it began at: writers cannot hold it here
            count += step
            if reached or not step:  # not step: the log holds less than its head said
                return count

    def run(self, local: SqliteStore, work: Repeatable[T], before_commit: Callable[[], None]) -> T:
        """Run ``work`` ahead of the shared log's lock while no other host writes (ADR 0062).

        A decision made ahead that found the log moved left nothing behind,
        and is made again under the lock, once; only work marked
        :class:`~pwf.store.unit.Repeatable` is run this way.

        Raises:
            TypeError: ``work`` is not marked repeatable.
        """
        work = repeatable(work)
        if not self._others_write:
            try:
                with self._transaction(local, before_commit, ahead=True) as tx:
                    return work(tx)
            except _Stale:
                pass
        with self._transaction(local, before_commit, ahead=False) as tx:
            return work(tx)

    def transaction(
        self, local: SqliteStore, before_commit: Callable[[], None]
    ) -> AbstractContextManager[SqliteTransaction]:
        """Lock both logs, catch up, let the caller stage; commit PostgreSQL, then SQLite.

        ``before_commit`` runs between the two commits.
        """
        return self._transaction(local, before_commit, ahead=False)

    @contextmanager
    def _transaction(
        self, local: SqliteStore, before_commit: Callable[[], None], *, ahead: bool
    ) -> Iterator[SqliteTransaction]:
        """Both logs' transaction; ``ahead``: decide from the local copy before the lock."""
        connection = local.connection
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise translate_error(error, local.path) from None
        try:
            tx = SqliteTransaction(local, connection)
            if ahead and not self._others_write:
                opened = tx.head
                yield tx
                self._ahead(tx, opened)
            else:
                with self._locked(tx) as remote:
                    start = tx.head.seq
                    yield tx
                    tx.settle()
                    _send(tx, start, remote)
            before_commit()
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            raise translate_error(error, local.path) from None

    @contextmanager
    def _locked(self, tx: SqliteTransaction) -> Iterator[PostgresTransaction]:
        """The shared log's lock with the local file caught up under it (ADR 0038 D2, 0053).

        The events other hosts appended come with the lock's round trip and
        are folded under it; ADR 0053's fold ahead of the lock, one round
        trip more, is gone (ADR 0062).
        """
        others = self._others_write  # then free the lock before the flush
        with self.log.transaction(after=tx.head.seq, early=others) as remote:
            folded = self._apply(tx, remote.head, remote.prefetched)
            self._others_write = folded > 0
            remote.must_flush = folded > 0
            yield remote

    def _ahead(self, tx: SqliteTransaction, expected: Head) -> None:
        """Write what was decided from the local copy, if the log's head is still its head.

        The caller decided and staged with the local file at its head, before
        any lock of the shared log; the rows go in one round trip (BEGIN, the
        lock, the head's check, the write, COMMIT).  A head that moved means
        another host wrote: nothing is written, the local transaction is
        rolled back, and the decision is made again under the lock (ADR 0062).

        Raises:
            _Stale: the shared log moved since the local head.
        """
        tx.settle()
        if not self.log.commit_if_head(expected, _rows_after(tx, expected.seq)):
            self._others_write = True
            raise _Stale

    def _apply(
        self,
        local: SqliteTransaction,
        target: Head,
        prefetched: list[tuple[object, ...]] | None = None,
        *,
        limit: int | None = None,
    ) -> int:
        """Copy and fold the shared log's events after the local head, up to ``target``.

        ``prefetched`` are rows read after the local head in the transaction
        that read ``target``; they are used when they reach it.  Each event
        is checked on its own and against the one before it, as verify checks
        them, before it is folded.  With ``limit``, the fold stops at the
        first batch that starts once ``limit`` events were folded.

        Raises:
            StoreError: the file is ahead of the log or has diverged from it.
        """
        head = local.head
        if head.seq > target.seq:
            raise StoreError(
                f"{local.store.path}: holds seq {head.seq}, beyond the shared log's head"
                f" {target.seq}"
            )
        if head.seq == target.seq:
            if head != target:
                raise StoreError(
                    f"{local.store.path}: has diverged from the shared log at seq {head.seq}"
                )
            return 0
        gap = target.seq - head.seq
        rows: Iterable[tuple[object, ...]]
        if prefetched is not None and len(prefetched) >= gap:
            rows = prefetched[:gap]
        elif gap <= _SMALL_GAP:
            rows = self.log.after(head.seq, target.seq)
        else:
            stream = self.log.rows(head.seq + 1, target.seq)
            with closing(cast("Generator[tuple[object, ...], None, None]", stream)):
                return self._fold(local, head, stream, limit)
        return self._fold(local, head, rows, limit)

    def _fold(
        self,
        local: SqliteTransaction,
        head: Head,
        rows: Iterable[tuple[object, ...]],
        limit: int | None = None,
    ) -> int:
        before, opening, count, leaves = head, None, 0, _KeptLeaves(self.log)
        for row in rows:
            if limit is not None and count >= limit and int(str(row[1])) != before.batch:
                break  # a batch boundary once ``limit`` events were folded
            seq = int(str(row[0]))
            if row[BODY] is None:  # a prune took its bytes before this file caught up
                before = _pruned_row(leaves, local, before, row)
                count += 1
                continue
            if before == EMPTY and seq != 1:
                before = origin_of(seq, _body(row))
                opening = seq
            try:
                entry = check_event(before.seq + 1, row, shared=True)
                opens = entry.seq == opening or (before == EMPTY and entry.seq == 1)
                check_link(entry.seq, entry, before, opens=opens)
            except ChainError as error:
                raise StoreError(
                    f"{self.log.path}: the shared log is damaged at seq {error.seq}: {error.reason}"
                ) from None
            local.insert_verified(entry, _body(row))
            if isinstance(entry.event, LogPruned):
                _strip(self.log, local, entry.seq)
            before = Head(seq=entry.seq, content_hash=entry.content_hash, batch=entry.batch)
            count += 1
        return count

    def verify(self, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
        """Verify the shared log in PostgreSQL (the file holds a checked copy of it)."""
        return self.log.verify(deep=deep, after=after)


def _send(tx: SqliteTransaction, seq: int, remote: PostgresTransaction) -> None:
    """Write the rows ``tx`` added after ``seq`` to the shared log, :data:`_SENT` at a time.

    A transaction as long as an import of a whole log holds no more than
    one round trip's rows in memory; the last ones go with the ``COMMIT``.
    """
    chunks = _chunks_after(tx, seq)
    held = next(chunks, [])
    for chunk in chunks:
        remote.write_rows(held)
        held = chunk
    remote.write_rows(held, last_write=True)


def _rows_after(tx: SqliteTransaction, seq: int) -> list[tuple[object, ...]]:
    """The rows the transaction added to the local file after ``seq``."""
    return [row for chunk in _chunks_after(tx, seq) for row in chunk]


def _chunks_after(tx: SqliteTransaction, seq: int) -> Iterator[list[tuple[object, ...]]]:
    """The rows the transaction added to the local file after ``seq``, in chunks."""
    cursor = tx.connection.execute(
        f"SELECT {COLUMNS} FROM events WHERE seq > ? ORDER BY seq", (seq,)
    )
    while chunk := cursor.fetchmany(_SENT):
        yield chunk


class _KeptLeaves:
    """The leaf and prune of each pruned seq of the shared log, read :data:`_SMALL_GAP` at a time.

    A catch-up meets pruned seqs in seq order: one query reads the next ones
    from the seq asked for, and a seq it did not find is asked again, since
    another host may have pruned it since.
    """

    def __init__(self, log: PostgresStore) -> None:
        self.log = log
        self.found: dict[int, tuple[bytes, int]] = {}

    def __call__(self, seq: int) -> tuple[bytes, int] | None:
        """The leaf a prune kept of seq ``seq`` and the seq of that ``log.pruned``, or None."""
        if seq not in self.found:
            rows = self.log.connection.execute(
                "SELECT seq, leaf, taken FROM _pwf_pruned WHERE seq >= %s ORDER BY seq LIMIT %s",
                (seq, _SMALL_GAP),
            )
            self.found = {int(pruned): (bytes(leaf), int(taken)) for pruned, leaf, taken in rows}
        return self.found.get(seq)


def _pruned_row(
    leaves: _KeptLeaves, local: SqliteTransaction, before: Head, row: tuple[object, ...]
) -> Head:
    """Copy a row whose bytes a prune took: its link checked, its leaf from the shared log."""
    seq = before.seq + 1
    try:
        head = pruned_at(seq, row, before, opens=before == EMPTY and seq == 1)
    except ChainError as error:
        raise StoreError(
            f"{leaves.log.path}: the shared log is damaged at seq {error.seq}: {error.reason}"
        ) from None
    found = leaves(seq)
    if found is None:
        raise StoreError(
            f"{leaves.log.path}: the shared log is damaged at seq {seq}:"
            " the event has neither its bytes nor the leaf hash a prune keeps"
        )
    local.insert_pruned(head, tuple(row[:BODY]), *found)
    return head


def _strip(log: PostgresStore, local: SqliteTransaction, taken: int) -> bool:
    """Take out of the file the bytes the shared log's prune at ``taken`` took (ADR 0107).

    Returns whether there were any.  Only a file that loses bytes it had
    folded owes a fold again: one that copied those events after the prune
    (a new host) never folded them.
    """
    going = [
        (int(seq), bytes(leaf))
        for seq, leaf in log.connection.execute(
            "SELECT seq, leaf FROM _pwf_pruned WHERE taken = %s ORDER BY seq", (taken,)
        )
    ]
    if going and strip(local.connection, going, taken):
        owe_refold(local.connection, taken)
        return True
    return False


def _refuse_old_file(path: str | os.PathLike[str], log: str) -> None:
    """Refuse a local file of format ``pwf.store.v1`` with the line that re-creates it (ADR 0104).

    Its copy of the log and its projections are the shared log's before it
    was migrated: this host re-creates the file from the migrated log.

    Raises:
        NotPwfDatabaseError: the file is in format ``pwf.store.v1``.
    """
    from pwf.store.migration import file_format  # noqa: PLC0415 - only on this refusal

    if file_format(Path(path)) == FORMAT_V1:
        raise NotPwfDatabaseError(
            f"{path}: this host's local file is in format {FORMAT_V1}, the shared log {log}"
            f" in {FORMAT}: re-create it from the shared log with"
            f" `pwf log migrate --store URL --db {path}` (the old file is kept beside it)"
        )


def _body(row: tuple[object, ...]) -> bytes:
    body = row[BODY]
    if not isinstance(body, bytes):
        raise StoreError("a stored body is not bytes")
    return body
