"""A host's local SQLite file kept caught up from the shared log in PostgreSQL (ADR 0038).

Imports the store, its rows, the SQLite and PostgreSQL stores and errors.
The local file is an ordinary pwf database: its projections, and a copy of
every event it has applied, each checked against the chain as it is copied.
:class:`MirroredStore` is a :class:`~pwf.store.sqlite.SqliteStore` whose
write transaction spans both databases, in this order: ``BEGIN IMMEDIATE``
locally, then the shared log's advisory lock; fold every event of the shared
log the file has not applied yet (from any host) into the local projections;
let the caller decide and stage; copy the new events to PostgreSQL and
commit there; then commit locally.  A crash between the two commits leaves
the file behind the log, never ahead, and the next catch-up (at the next
open or command) folds what it missed.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from pwf.errors import ChainError, StoreError
from pwf.store import EMPTY, Head, VerifyReport, origin_of
from pwf.store.rows import BODY, COLUMNS, check_event, check_link
from pwf.store.sqlite import SqliteStore, SqliteTransaction, Synchronous, translate_error

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from pwf.store import AppendHook
    from pwf.store.postgres import PostgresStore

__all__ = ["MirroredStore"]

_SMALL_GAP: Final = 1_000
"""Up to this many missing events are fetched in one query, more are streamed."""


class MirroredStore(SqliteStore):
    """A local projection file on a shared PostgreSQL log; every write goes through both."""

    shared_log: Final = True
    """Marks a store whose log of record is elsewhere (file maintenance does not apply)."""

    def __init__(  # noqa: PLR0913 - each keyword is an operator setting
        self,
        path: str | os.PathLike[str],
        log: PostgresStore,
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout_ms: int = 5_000,
        hooks: Sequence[AppendHook] = (),
        install: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        """Open (creating if missing) the local file at ``path`` for the shared ``log``.

        ``install`` creates the projections' tables in a new file.
        ``synchronous`` is NORMAL by default: an acknowledged command is
        durable once PostgreSQL commits, and a local commit lost to a power
        cut is folded again from the log at the next catch-up.

        Raises:
            StoreError: the file belongs to another log, or is ahead of this one.
        """
        super().__init__(
            path,
            create=True,
            synchronous=synchronous,
            busy_timeout_ms=busy_timeout_ms,
            hooks=hooks,
        )
        self.log = log
        self.before_local_commit: Callable[[], None] | None = None
        """Called between the two commits (tests kill the process there)."""
        try:
            with self._immediate() as connection:
                if install is not None:
                    install(connection)
                self._bind(connection)
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None

    def _bind(self, connection: sqlite3.Connection) -> None:
        """Tie the file to the log it mirrors, or refuse a file of another log."""
        row = connection.execute("SELECT value FROM _pwf_meta WHERE key = 'log_id'").fetchone()
        if row is not None and row[0] != self.log.log_id:
            raise StoreError(f"{self.path}: mirrors another log than {self.log.path}")
        if row is None:
            connection.execute(
                "INSERT INTO _pwf_meta (key, value) VALUES ('log_id', ?)", (self.log.log_id,)
            )

    def close(self) -> None:
        """Close the local file and the connection to the shared log."""
        super().close()
        self.log.close()

    def catch_up(self) -> int:
        """Fold every event of the shared log this file has not applied yet; return how many."""
        with super().transaction() as local:
            return self._apply(local, self.log.head())

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        """Lock both logs, catch up, let the caller stage; commit PostgreSQL, then SQLite."""
        try:
            self.connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None
        try:
            local = SqliteTransaction(self, self.connection)
            with self.log.transaction(after=local.head.seq) as remote:
                self._apply(local, remote.head, remote.prefetched)
                start = local.head.seq
                yield local
                local.settle()
                rows = self.connection.execute(
                    f"SELECT {COLUMNS} FROM events WHERE seq > ? ORDER BY seq", (start,)
                ).fetchall()
                remote.write_rows(rows)
            if self.before_local_commit is not None:
                self.before_local_commit()
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        try:
            self.connection.execute("COMMIT")
        except sqlite3.Error as error:
            raise translate_error(error, self.path) from None

    def _apply(
        self,
        local: SqliteTransaction,
        target: Head,
        prefetched: list[tuple[object, ...]] | None = None,
    ) -> int:
        """Copy and fold the shared log's events after the local head, up to ``target``.

        ``prefetched`` are rows read after the local head in the transaction
        that read ``target``; they are used when they reach it.  Each event
        is checked on its own and against the one before it, as verify checks
        them, before it is folded.

        Raises:
            StoreError: the file is ahead of the log or has diverged from it.
        """
        head = local.head
        if head.seq > target.seq:
            raise StoreError(
                f"{self.path}: holds seq {head.seq}, beyond the shared log's head {target.seq}"
            )
        if head.seq == target.seq:
            if head != target:
                raise StoreError(f"{self.path}: has diverged from the shared log at seq {head.seq}")
            return 0
        gap = target.seq - head.seq
        rows: Iterable[tuple[object, ...]]
        if prefetched is not None and len(prefetched) >= gap:
            rows = prefetched[:gap]
        elif gap <= _SMALL_GAP:
            rows = self.log.connection.execute(
                f"SELECT {COLUMNS} FROM events WHERE seq > %s AND seq <= %s ORDER BY seq",
                (head.seq, target.seq),
            ).fetchall()
        else:
            rows = self.log.rows(head.seq + 1, target.seq)
        return self._fold(local, head, rows)

    def _fold(
        self, local: SqliteTransaction, head: Head, rows: Iterable[tuple[object, ...]]
    ) -> int:
        before, opening, count = head, None, 0
        for row in rows:
            seq = int(str(row[0]))
            if before == EMPTY and seq != 1:
                before = origin_of(seq, _body(row))
                opening = seq
            try:
                entry = check_event(before.seq + 1, row)
                opens = entry.seq == opening or (before == EMPTY and entry.seq == 1)
                check_link(entry.seq, entry, before, opens=opens)
            except ChainError as error:
                raise StoreError(
                    f"{self.log.path}: the shared log is damaged at seq {error.seq}: {error.reason}"
                ) from None
            local.insert_verified(entry, _body(row))
            before = Head(seq=entry.seq, content_hash=entry.content_hash, batch=entry.batch)
            count += 1
        return count

    # The log of record is PostgreSQL: reading and verifying the log go there.

    def verify(self, *, deep: bool = True) -> VerifyReport:
        """Verify the shared log in PostgreSQL (the file holds a checked copy of it)."""
        return self.log.verify(deep=deep)


def _body(row: tuple[object, ...]) -> bytes:
    body = row[BODY]
    if not isinstance(body, bytes):
        raise StoreError("a stored body is not bytes")
    return body
