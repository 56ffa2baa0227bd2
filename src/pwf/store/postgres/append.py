"""Appends to the shared log: the advisory lock, the head's compare-and-set, the flush barrier.

Imports psycopg, msgspec, events, errors, the store's sealing and rows, and
this package's edge and reads.  Every write transaction first takes one
transaction-level advisory lock (:data:`~pwf.store.postgres.schema.LOCK_KEY`),
so writers from every host are serialised: the head read inside the lock
is the true tip, seqs are gapless and the chain is linear.  The head row
moves by compare-and-set and ``seq`` is the primary key, so even a writer
that skipped the lock could not fork the chain.  ``_pwf_recorded`` gets the
keys of every ``command.recorded`` row in the same statement (ADR 0050 D3).
"""

from __future__ import annotations

import contextlib
import functools
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

import msgspec
import psycopg

from pwf.errors import ChainError
from pwf.events import CommandRecorded, Entry, Sealed, open_body
from pwf.store import Head
from pwf.store.log_writes import pack
from pwf.store.postgres.edge import as_bytes, translate_error
from pwf.store.postgres.reads import HEAD, PREFETCH, head_of
from pwf.store.postgres.schema import LOCK_KEY
from pwf.store.postgres.tree import load as load_tree
from pwf.store.postgres.tree import tree_rows
from pwf.store.rows import BODY, COLUMNS, columns, shared_row, shared_text
from pwf.store.schema import BATCH_INSERT, ROW_INSERT, WHOLE_INSERT
from pwf.store.sealing import Batches

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from psycopg.rows import TupleRow

    from pwf.store.postgres.store import PostgresStore
    from pwf.store.tree import Tree

__all__ = ["FLUSH", "IDLE_FLOOR_MS", "PostgresTransaction", "commit_if_head", "flush", "locked"]

IDLE_FLOOR_MS: Final = 1_000
"""The least a write under the lock may wait on its process before PostgreSQL ends it (ADR 0121).

A moment of the writer's own work between two statements (a fold of the
events it read, a garbage collection) is not taken for a writer that stopped.
"""

_MARKS: Final = {"rows": 8, "batches": 7, "whole": 3}
"""Parameters per row of each of the log's tables (:mod:`pwf.store.schema`)."""
_INSERTS: Final = {
    name: statement.format(schema="", marks=", ".join(["%s"] * _MARKS[name]))
    for name, statement in (
        ("rows", ROW_INSERT),
        ("batches", BATCH_INSERT),
        ("whole", WHOLE_INSERT),
    )
}
_ONE_STATEMENT: Final = 256
"""Up to this many events go in one statement (at most 18 parameters each; PostgreSQL: 65 535)."""
_RECORD: Final = (
    "INSERT INTO _pwf_recorded (request_id, client_id, idempotency_key, seq)"
    " VALUES (%s, %s, %s, %s)"
)
_NODE: Final = "INSERT INTO _pwf_tree (pos, hash) VALUES (%s, %s)"
_MOVE: Final = (
    "UPDATE _pwf_head SET seq = %s, content_hash = %s, batch = %s WHERE id = 1 AND seq = %s"
)
_MOVED: Final = "another writer moved the log's head"
_AT_HEAD: Final = (
    "SELECT 1 / count(*) FROM _pwf_head"
    " WHERE id = 1 AND seq = %s AND content_hash IS NOT DISTINCT FROM %s AND batch = %s"
)
"""Fails (division by zero) unless the head is the one given: the check of a decision ahead."""
FLUSH = "SELECT pg_logical_emit_message(true, 'pwf.flush', '')"
"""A flush barrier (ADR 0053): a transaction with an xid that writes WAL, committed synchronously.

Its commit waits until the WAL is flushed up to its own commit record, which
comes after the commit record of every transaction this session has seen.
Looked up at each use, so a test can replace it with a barrier that fails.
"""


class PostgresTransaction(Batches):
    """The advisory lock is held; appends seal against the head read inside it."""

    def __init__(
        self,
        store: PostgresStore,
        head: Head | None = None,
        prefetched: list[tuple[object, ...]] | None = None,
    ) -> None:
        """Start from ``head``, read under the lock (read here when None); appends keep it current.

        ``prefetched`` are the events the transaction read after a seq its
        caller named, in seq order, at most :data:`~pwf.store.postgres.reads.PREFETCH` of them.
        """
        self.store = store
        self.connection = store.connection
        self._head = store.head() if head is None else head
        self._staged_batch: int | None = None
        self.prefetched = prefetched
        self._pending: tuple[str, tuple[object, ...], int] | None = None
        """The last write, sent with the ``COMMIT`` (:meth:`write_last`): SQL, params, first seq."""
        self.wrote = False
        """True once the transaction wrote rows."""
        self.must_flush = False
        """True when the caller keeps events it read here (ADR 0053).

        Another writer's commit may be visible before its WAL is flushed; the
        transaction then ends with a flush barrier, so what it read is durable
        when it returns.
        """

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Undo everything written inside the block if it raises, keep the rest."""
        self._send_pending()
        head, staged = self._head, self._staged_batch
        try:
            with self.connection.transaction():
                yield
        except BaseException:
            self._head, self._staged_batch = head, staged
            raise

    def _write(self, sealed: list[Sealed]) -> None:
        """Write the sealed batch's rows (:meth:`write_rows`)."""
        self.write_rows([(*columns(item.entry), item.body) for item in sealed])

    def write_rows(self, rows: Sequence[tuple[object, ...]], *, last_write: bool = False) -> None:
        """Insert rows of :data:`~pwf.store.rows.COLUMNS` that continue the head, and move it.

        The rows were sealed against this transaction's head (here, or by a
        host's local transaction that caught up to it first).  With
        ``last_write`` the statement is held back and sent with the
        ``COMMIT``, in its round trip (ADR 0060); anything the transaction
        does after it sends it first.

        Raises:
            ChainError: the first row does not continue the head.
        """
        self._send_pending()
        if not rows:
            return
        rows = [shared_row(row) for row in rows]  # no lone surrogate in PostgreSQL text
        first, last = rows[0], rows[-1]
        seq = int(str(first[0]))
        if seq != self._head.seq + 1 or first[10] != self._head.content_hash:
            raise ChainError(seq, "the batch does not continue the log's head")
        recorded = [_recorded_keys(row) for row in rows if row[2] == "command.recorded"]
        move = (last[0], last[9], last[1], self._head.seq)
        tree, nodes = tree_rows(self._tree(), rows)
        packed = pack(
            [(row[:BODY], as_bytes(row[BODY])) for row in rows],
            previous=self._head.content_hash,
            last=None,
        )
        if len(rows) <= _ONE_STATEMENT:
            # One statement: the rows, their records, their tree and the head's compare-and-set.
            tables = (packed.batches, packed.rows, packed.whole)
            params = [value for table in tables for row in table for value in row]
            params += [value for keys in recorded for value in keys]
            params += [value for node in nodes for value in node]
            statement = _write_statement(
                (len(packed.batches), len(packed.rows), len(packed.whole)),
                len(recorded),
                len(nodes),
            )
            self._pending = (statement, (*params, *move), seq)
            if not last_write:
                self._send_pending()
        else:  # one round trip still, within PostgreSQL's limit on parameters
            connection = self.connection
            with connection.cursor() as cursor:
                with connection.pipeline():
                    for name, table in (
                        ("batches", packed.batches),
                        ("rows", packed.rows),
                        ("whole", packed.whole),
                    ):
                        if table:
                            cursor.executemany(_INSERTS[name], table)
                    if recorded:
                        cursor.executemany(_RECORD, recorded)
                    cursor.executemany(_NODE, nodes)
                    cursor.execute(_MOVE, move)
                if cursor.rowcount != 1:
                    raise ChainError(seq, _MOVED)
        self.wrote = True
        self._head = Head(seq=int(str(last[0])), content_hash=str(last[9]), batch=int(str(last[1])))
        self.store.tree_cache = (self._head, tree)

    def _tree(self) -> Tree:
        """The Merkle tree of the head the rows continue: kept from the last write, else read."""
        cached = self.store.tree_cache
        if cached is not None and cached[0] == self._head:
            return cached[1]
        rows = self.prefetched
        if (  # other hosts' events this one just read continue the tree it knows: no read
            cached is not None
            and rows
            and int(str(rows[0][0])) == cached[0].seq + 1
            and rows[0][10] == cached[0].content_hash
            and (int(str(rows[-1][0])), rows[-1][9]) == (self._head.seq, self._head.content_hash)
            and all(row[BODY] is not None for row in rows)  # a pruned row's leaf is stored
        ):
            return tree_rows(cached[1], rows)[0]
        self._send_pending()
        return load_tree(self.connection, self._head, self.store.path)

    def _send_pending(self) -> None:
        """Send the write :meth:`write_rows` held back for the commit, if any, now."""
        if self._pending is None:
            return
        sql, params, seq = self._pending
        self._pending = None
        try:
            self.connection.execute(sql, params, prepare=True)  # as :func:`_pipelined` does
        except psycopg.errors.DivisionByZero:
            raise ChainError(seq, _MOVED) from None

    def take_pending(self) -> tuple[str, tuple[object, ...], int] | None:
        """The write held back for the commit (and forget it): SQL, params, its first seq."""
        pending, self._pending = self._pending, None
        return pending

    def insert_verified(self, entry: Entry, body: bytes) -> None:
        """Write an already checked event verbatim (import); the caller checked the chain."""
        self.write_rows([(*columns(entry), body)])


@contextmanager
def locked(
    store: PostgresStore, *, after: int | None = None, early: bool = False
) -> Iterator[PostgresTransaction]:
    """Take the log's advisory lock; append inside; commit on exit, roll back on error.

    ``BEGIN``, the lock and the head's read go to the server in one round
    trip (:func:`_begin`), and so, with ``after``, does the read of up to
    :data:`~pwf.store.postgres.reads.PREFETCH` events after that seq (a
    host's catch-up), which :attr:`PostgresTransaction.prefetched` then
    holds.  The server runs them in order, so the reads come after the lock
    is granted.  The rows written go with the ``COMMIT`` (:func:`_commit`).

    The transaction returns only once everything it wrote, and what it
    read when :attr:`PostgresTransaction.must_flush` is set, is durable
    (ADR 0053).  With ``early`` (other writers are waiting) its commit
    frees the lock before the WAL is flushed and a flush barrier follows
    in the same round trip, so the next writer works while this one's
    flush runs, and concurrent flushes are done as one.
    """
    with _undone_on_error(store):
        head, prefetched = _begin(
            store.connection, after=after, early=early, idle_ms=store.idle_limit_ms
        )
        transaction = PostgresTransaction(store, head, prefetched)
        yield transaction
        _commit(transaction, early=early)


def _begin(
    connection: psycopg.Connection[TupleRow], *, after: int | None, early: bool, idle_ms: int
) -> tuple[Head, list[tuple[object, ...]] | None]:
    """``BEGIN``, the lock, the head and the catch-up read as one query string (ADR 0060).

    The transaction may wait on this process at most ``idle_ms`` between two
    statements: a writer that stops holding the lock (a process stopped or
    frozen, a network link gone) is ended by PostgreSQL, its transaction
    rolled back and the lock freed for the others (ADR 0121).

    One round trip and one call into psycopg: the simple query protocol runs
    the statements in order, each with a snapshot of its own (READ
    COMMITTED), so both reads see every commit made before the lock was
    granted.  The only values in the text are integers of pwf's own.
    Statements after a failed one are skipped, and the transaction is then
    rolled back by the caller.
    """
    statements = ["BEGIN"]
    if early:
        statements.append("SET LOCAL synchronous_commit = off")
    statements += [_idle_limit(idle_ms), f"SELECT pg_advisory_xact_lock({int(LOCK_KEY)})", HEAD]
    if after is not None:
        statements.append(
            f"SELECT {COLUMNS} FROM events WHERE seq > {int(after)} ORDER BY seq LIMIT {PREFETCH}"
        )
    cursor = connection.execute("; ".join(statements))
    for _ in range(statements.index(HEAD)):  # to the head's result
        cursor.nextset()
    head = head_of(cursor.fetchone())
    if after is None:
        return head, None
    cursor.nextset()
    return head, cursor.fetchall()


def _commit(transaction: PostgresTransaction, *, early: bool) -> None:
    """``COMMIT``, with the write held back for it and the barrier it needs, in one round trip.

    Raises:
        ChainError: the held-back write found the head moved (its check divides by zero).
    """
    connection = transaction.connection
    pending = transaction.take_pending()
    # A synchronous commit that wrote flushes past everything read before it.
    synchronous = not early and transaction.wrote
    barrier = (transaction.must_flush or transaction.wrote) and not synchronous
    if pending is None and not barrier:
        connection.execute("COMMIT")
        return
    statements: list[tuple[str, tuple[object, ...] | None]] = (
        [] if pending is None else [pending[:2]]
    )
    statements += [("COMMIT", None), *([(FLUSH, None)] if barrier else [])]
    try:
        _pipelined(connection, statements)
    except psycopg.errors.DivisionByZero:
        assert pending is not None
        raise ChainError(pending[2], _MOVED) from None


def commit_if_head(
    store: PostgresStore, expected: Head, rows: Sequence[tuple[object, ...]]
) -> bool:
    """Write ``rows`` if the log's head is still ``expected``, in one round trip (ADR 0062).

    The rows were decided and sealed against ``expected`` before the lock
    was taken, by a host that found no other host writing (so the commit is
    synchronous, ADR 0053).  The lock, the head's check and the write go in
    one pipeline, which PostgreSQL runs as one implicit transaction ended by
    the pipeline's ``Sync``: committed there when every statement succeeded,
    rolled back when one failed.  When the head moved the check fails,
    PostgreSQL skips the write behind it, and False is returned with
    nothing written.  Without rows the head is only checked
    (one statement, no lock): what was decided from the local copy is what
    the log holds now.  Returns only once the rows are durable.

    Raises:
        ChainError: the rows do not continue ``expected``.
        StoreError: PostgreSQL refused the write (the transaction is rolled back).
    """
    connection = store.connection
    check = (expected.seq, expected.content_hash, expected.batch)
    with _undone_on_error(store):
        try:
            if not rows:
                connection.execute(_AT_HEAD, check, prepare=True)  # as :func:`_pipelined` does
                return True
            transaction = PostgresTransaction(store, expected)
            if len(rows) <= _ONE_STATEMENT:  # held back: checks the rows continue ``expected``
                transaction.write_rows(rows, last_write=True)
            pending = transaction.take_pending()
            lock = (f"SELECT pg_advisory_xact_lock({int(LOCK_KEY)})", None)
            if pending is not None:  # one implicit transaction, committed at the pipeline's end
                _pipelined(connection, [lock, (_AT_HEAD, check), pending[:2]])
                return True
            # Too many rows for one statement (an import's size): in a transaction of its own.
            limit = (_idle_limit(store.idle_limit_ms), None)
            _pipelined(connection, [("BEGIN", None), limit, lock, (_AT_HEAD, check)])
            transaction.write_rows(rows)
            _commit(transaction, early=False)
        except psycopg.errors.DivisionByZero:
            _rollback(connection)
            return False
    return True


def _idle_limit(idle_ms: int) -> str:
    """How long the transaction may wait on its own process between statements (ADR 0121)."""
    return f"SET LOCAL idle_in_transaction_session_timeout = {max(1, int(idle_ms))}"


def _pipelined(
    connection: psycopg.Connection[TupleRow],
    statements: Sequence[tuple[str, tuple[object, ...] | None]],
) -> None:
    """Send ``statements`` in one pipeline (one round trip); raise the first one's error.

    PostgreSQL skips the statements behind a failed one.  The error is
    raised once the pipeline is closed, so psycopg does not log the
    statements it skipped as a second error.

    A statement with parameters is prepared at its first use, one without
    never: psycopg counts a statement's uses and, at the fifth, names it
    prepared as it sends the ``Parse``, which PostgreSQL skips behind a
    failed statement, and the name would then be used but unknown.  A
    statement prepared at its first use is checked against its result.
    """
    failed: psycopg.Error | None = None
    try:
        with connection.pipeline():
            for sql, params in statements:
                try:
                    connection.execute(sql, params, prepare=params is not None)
                except psycopg.Error as error:
                    failed = error
                    break
    except psycopg.Error as error:
        failed = failed or error
    if failed is not None:
        raise failed.with_traceback(None)


def flush(connection: psycopg.Connection[TupleRow], where: str) -> None:
    """Return once everything ``connection`` has read or written is durable (ADR 0053)."""
    try:
        connection.execute(FLUSH)
    except psycopg.Error as error:
        raise translate_error(error, where) from None


@contextmanager
def _undone_on_error(store: PostgresStore) -> Iterator[None]:
    """Roll back the connection's transaction if the block raises; PostgreSQL's errors as pwf's."""
    try:
        yield
    except psycopg.Error as error:
        _rollback(store.connection)
        raise translate_error(error, store.path) from None
    except BaseException:
        _rollback(store.connection)
        raise


def _rollback(connection: psycopg.Connection[TupleRow]) -> None:
    """End a failed transaction; a connection that is gone has nothing left to end."""
    with contextlib.suppress(psycopg.Error):
        if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            connection.execute("ROLLBACK")


@functools.cache
def _write_statement(tables: tuple[int, int, int], recorded: int, nodes: int = 0) -> str:
    """Insert the log's rows, ``recorded`` records and ``nodes``, then move the head: one statement.

    ``tables`` counts the rows of ``_pwf_batches``, ``_pwf_events`` and ``_pwf_whole``.

    PostgreSQL runs every data-modifying ``WITH`` part to completion, in the
    statement's one snapshot.  The statement divides one by the number of
    head rows the update moved, so a head moved by a writer that skipped
    the lock fails the statement itself (division by zero), and a
    ``COMMIT`` sent behind it in the same round trip is skipped.
    """
    parts = []
    for name, count, inserted in zip("bew", tables, ("batches", "rows", "whole"), strict=True):
        if count:
            marks = f"({', '.join(['%s'] * _MARKS[inserted])})"
            insert = _INSERTS[inserted].split(" VALUES ")[0]
            parts.append(f"{name} AS ({insert} VALUES {', '.join([marks] * count)})")
    if recorded:
        records = ", ".join(["(%s, %s, %s, %s)"] * recorded)
        parts.append(
            "r AS (INSERT INTO _pwf_recorded (request_id, client_id, idempotency_key, seq)"
            f" VALUES {records})"
        )
    if nodes:
        parts.append(
            f"t AS (INSERT INTO _pwf_tree (pos, hash) VALUES {', '.join(['(%s, %s)'] * nodes)})"
        )
    parts.append(f"m AS ({_MOVE} RETURNING 1)")
    return f"WITH {', '.join(parts)} SELECT 1 / count(*) FROM m"


class _Keys(msgspec.Struct, frozen=True, rename="camel"):
    request_id: str
    client_id: str
    idempotency_key: str


class _Recorded(msgspec.Struct, frozen=True):
    data: _Keys


_KEYS: Final = msgspec.json.Decoder(_Recorded)


def _recorded_keys(row: tuple[object, ...]) -> tuple[object, ...]:
    """The keys ``host_commands`` holds unique, from a ``command.recorded`` row's own bytes.

    Only the three keys are decoded: the row was sealed or checked whole
    before it got here.  Text the decoder does not take goes the full way.
    Each key is written as :func:`~pwf.store.rows.shared_text` writes it, so
    ids that differ in a lone surrogate are two keys (ADR 0071).
    """
    body = as_bytes(row[BODY])
    try:
        keys = _KEYS.decode(body).data
    except msgspec.DecodeError:
        event = open_body(body).event
        assert isinstance(event, CommandRecorded)
        return (*map(shared_text, _keys(event)), row[0])
    return (*map(shared_text, _keys(keys)), row[0])


def _keys(keys: _Keys | CommandRecorded) -> tuple[str, str, str]:
    return (keys.request_id, keys.client_id, keys.idempotency_key)
