"""The PostgreSQL store itself: one connection to one shared log, and the calls it offers.

Imports psycopg, the store's types, errors and this package's other
modules: :mod:`~pwf.store.postgres.schema` (install, format check),
:mod:`~pwf.store.postgres.append` (write transactions, the flush barrier)
and :mod:`~pwf.store.postgres.reads` (catch-up reads, streams, lookups,
verify).  New calls of the store protocol go on :class:`PostgresStore` here,
with their SQL in the module of their job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg

from pwf._closing import Closing
from pwf.errors import StoreError
from pwf.store import AppendsAlone
from pwf.store.postgres import append, reads
from pwf.store.postgres.edge import shown_url, translate_error
from pwf.store.postgres.schema import FORMAT, install, read_format

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from contextlib import AbstractContextManager
    from pathlib import Path

    from psycopg.rows import TupleRow

    from pwf.events import Entry
    from pwf.store import Head, StoredEvent, VerifyReport
    from pwf.store.postgres.append import PostgresTransaction
    from pwf.store.tree import Tree

__all__ = ["PostgresStore"]


class PostgresStore(AppendsAlone, Closing):
    """A hash-chained event log in one PostgreSQL database, shared by any number of hosts."""

    def __init__(
        self,
        url: str,
        *,
        create: bool = False,
        connect_timeout: int = 10,
        formats: tuple[str, ...] = (FORMAT,),
        busy_timeout_ms: int = 5_000,
    ) -> None:
        """Connect to ``url``; with ``create`` install the schema (idempotently).

        ``formats`` are the formats the log may be in: only ``pwf log
        migrate`` opens one of ``pwf.store.v1`` (ADR 0104).
        ``busy_timeout_ms`` bounds each wait for a lock, the log's write
        lock among them, as it bounds a SQLite file's (ADR 0120): past it
        the write is refused busy, where it waited for as long as the
        holder held the lock.  It also bounds how long this connection's
        write may hold that lock idle, waiting on its own process (ADR
        0121): never less than :data:`~pwf.store.postgres.append.IDLE_FLOOR_MS`.

        Raises:
            StoreError: PostgreSQL cannot be reached, or the database holds no pwf log.
        """
        self.url = url
        self.path = shown_url(url)
        """What messages call this log (the URL without its password)."""
        self.tree_cache: tuple[Head, Tree] | None = None
        """The Merkle tree as this connection's last write left it, with its head (ADR 0083)."""
        self._timeout = connect_timeout
        self._lock_timeout = max(1, int(busy_timeout_ms))  # PostgreSQL's 0 waits for ever
        self.idle_limit_ms = max(append.IDLE_FLOOR_MS, int(busy_timeout_ms))
        """How long a write holding the log's lock may wait on this process (ADR 0121)."""
        self._formats = formats
        self._connection = self._connect(create=create)
        self.format, self.log_id = self._found

    def _connect(self, *, create: bool = False) -> psycopg.Connection[TupleRow]:
        """A new connection to the log, its format read (and its schema installed if ``create``)."""
        try:
            connection = psycopg.connect(self.url, autocommit=True, connect_timeout=self._timeout)
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None
        try:
            connection.execute(f"SET lock_timeout = {self._lock_timeout}")
            if create:
                install(connection, self.path)
            self._found = read_format(connection, self.path, self._formats)
        except psycopg.Error as error:
            connection.close()
            raise translate_error(error, self.path) from None
        except StoreError:
            connection.close()
            raise
        return connection

    @property
    def connection(self) -> psycopg.Connection[TupleRow]:
        """The connection to the log, opened again when the last one was lost (ADR 0112).

        A restart of PostgreSQL, a failover or a dropped network link closes
        it; the call that finds it so fails, and the next one connects anew, to
        the same log only.

        Raises:
            StoreError: PostgreSQL cannot be reached, or the database now holds another log.
        """
        current = self._connection
        if not current.closed:
            return current
        self.tree_cache = None  # what this connection's writes left is not known now
        fresh = self._connect()
        if self._found != (self.format, self.log_id):
            fresh.close()
            raise StoreError(
                f"{self.path}: the database now holds another log than the one this process"
                " opened; start it again"
            )
        self._connection = fresh
        return fresh

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()

    def transaction(
        self, *, after: int | None = None, early: bool = False
    ) -> AbstractContextManager[PostgresTransaction]:
        """Take the log's advisory lock; append inside; commit on exit, roll back on error.

        See :func:`pwf.store.postgres.append.locked` for ``after``, ``early``
        and when it returns (only once what it wrote or read is durable).
        """
        return append.locked(self, after=after, early=early)

    def lift_idle_limit(self) -> None:
        """Let the rest of the write transaction under way wait on this process as long as it must.

        For an operator's step under the lock that hashes or folds between
        its statements (a prune's check of its backup): PostgreSQL then does
        not end it for holding the lock idle (ADR 0121).  Only inside
        :meth:`transaction`; the next transaction has the limit again.
        """
        try:
            self.connection.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None

    def commit_if_head(self, expected: Head, rows: Sequence[tuple[object, ...]]) -> bool:
        """Write ``rows``, decided before the lock, if the head is still ``expected`` (ADR 0062).

        One round trip; False, with nothing written, when another writer
        moved the head.  See :func:`pwf.store.postgres.append.commit_if_head`.
        """
        return append.commit_if_head(self, expected, rows)

    def flush(self) -> None:
        """Return once everything this connection has read or written is durable (ADR 0053).

        A writer's commit becomes visible before its WAL is flushed; a reader
        that keeps what it read (a host's catch-up) calls this first.
        """
        append.flush(self.connection, self.path)

    def head(self) -> Head:
        """The log's tip."""
        return reads.head(self.connection, self.path)

    def after(self, seq: int, last: int | None = None) -> list[tuple[object, ...]]:
        """Whole rows after ``seq`` (up to ``last``, else at most ``PREFETCH``), in one read."""
        return reads.after(self.connection, self.path, seq, last)

    def rows(self, first: int = 1, last: int | None = None) -> Iterator[tuple[object, ...]]:
        """Stream whole rows of :data:`~pwf.store.rows.COLUMNS` with ``first <= seq <= last``."""
        return reads.rows(self.connection, self.path, first, last)

    def read(self, first: int = 1, last: int | None = None) -> Iterator[StoredEvent]:
        """Stream stored events with ``first <= seq <= last`` in seq order (constant memory)."""
        return reads.read(self.connection, self.path, first, last)

    def entries(self, first: int = 1, last: int | None = None) -> Iterator[Entry]:
        """Stream checked, typed events with ``first <= seq <= last``."""
        return reads.entries(self.connection, self.path, first, last)

    def pruned(self, first: int = 1, last: int | None = None) -> Iterator[tuple[int, int]]:
        """The seqs ``first..last`` whose bytes a prune took, each with its ``log.pruned``'s seq."""
        return reads.pruned(self.connection, self.path, first, last)

    def find(
        self, *, after: int = 0, until: int | None = None, **wanted: str | int | None
    ) -> Iterator[StoredEvent]:
        """Stream the events after seq ``after`` (up to ``until``) whose indexed columns match.

        Raises:
            InputError: an unknown column, or an idempotency key without its client id.
        """
        return reads.find(self.connection, self.path, after=after, until=until, **wanted)

    def origin(self) -> Head:
        """Where the chain starts: zeros, or the head a compaction replaced (DOMAIN §13.2).

        Raises:
            ChainError: the first stored event cannot start a log.
        """
        return reads.origin(self.connection)

    def snapshot_to(self, target: Path) -> Head:
        """Write one snapshot of the log, as stored, into the new SQLite file ``target`` (ADR 0106).

        Read in one ``REPEATABLE READ, READ ONLY`` transaction of a connection
        of its own, which no writer waits for; returns the snapshot's head.
        See :func:`pwf.store.postgres.snapshot.snapshot_to`.

        Raises:
            StoreError: the log cannot be read or the file cannot be written.
        """
        from pwf.store.postgres.snapshot import snapshot_to  # noqa: PLC0415 - backups only

        return snapshot_to(self.url, self.path, target)

    def restore_from(self, backup: Path) -> Head:
        """Copy the proved pwf database ``backup`` into this empty log, in one transaction.

        See :func:`pwf.store.postgres.restore.restore_into` (ADR 0107).
        """
        from pwf.store.postgres.restore import restore_into  # noqa: PLC0415 - restores only

        return restore_into(self, backup)

    def strip(self, going: Sequence[tuple[int, bytes]], taken: int) -> None:
        """Take the bytes of ``going`` (seq, leaf) out of the log, keeping each leaf (ADR 0107).

        Runs on this store's connection, in the transaction that holds the
        log's lock (the prune's); rows whose bytes are already gone stay.

        Raises:
            StoreError: PostgreSQL refused the statements.
        """
        seqs = [seq for seq, _leaf in going]
        leaves = [leaf for _seq, leaf in going]
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(  # one statement, not one round trip a row: it runs under the lock
                    "INSERT INTO _pwf_pruned (seq, leaf, taken)"
                    " SELECT seq, leaf, %s FROM unnest(%s::bigint[], %s::bytea[]) AS g(seq, leaf)"
                    " ON CONFLICT (seq) DO NOTHING",
                    (taken, seqs, leaves),
                )
                cursor.execute("UPDATE _pwf_events SET data = NULL WHERE seq = ANY(%s)", (seqs,))
                cursor.execute("DELETE FROM _pwf_whole WHERE seq = ANY(%s)", (seqs,))
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None

    def verify(self, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
        """Check the chain from stored bytes in one snapshot and name the first bad seq.

        With ``after``, the events after a proven head (:meth:`pwf.store.EventLog.verify`).
        """
        return reads.verify(self.connection, self.path, deep=deep, after=after)
