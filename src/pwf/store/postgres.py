"""The shared event log in PostgreSQL (psycopg 3); imports canonical, events, errors, the store.

The ``events`` table holds what SQLite's does (ADR 0037): each event's exact
canonical bytes, its content hash, prev hash, batch and indexed columns,
checked with the same rules.  Every write transaction first takes one
transaction-level advisory lock (:data:`LOCK_KEY`), so writers from every
host are serialised: the head read inside the lock is the true tip, seqs are
gapless and the chain is linear.  The head row moves by compare-and-set and
``seq`` is the primary key, so even a writer that skipped the lock could not
fork the chain.  ``_pwf_recorded`` holds the keys of every
``command.recorded`` event with the uniqueness of ``host_commands`` (request
id; client id + idempotency key), so no two hosts can both record one
request, whatever their local projections said.
psycopg is an optional dependency (the ``postgres`` extra): only this room
and :mod:`pwf.store.mirror` import it.
"""

from __future__ import annotations

import contextlib
import functools
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, Self

import msgspec
import psycopg

from pwf.errors import ChainError, StoreBusyError, StoreError
from pwf.events import Actor, Cause, CommandRecorded, Entry, Event, Sealed, open_body
from pwf.store import EMPTY, Head, StoredEvent, VerifyReport, origin_of
from pwf.store.chainwalk import walk_rows
from pwf.store.rows import BODY, COLUMNS, columns, verify_rows
from pwf.store.sealing import lookup, report, seal_batch

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "FORMAT",
    "LOCK_KEY",
    "SCHEMA",
    "PostgresStore",
    "PostgresTransaction",
    "is_postgres_url",
    "shown_url",
]

FORMAT: Final = "pwf.store.v1"
LOCK_KEY: Final = 0x707766_6C6F67
"""The advisory lock every append takes ("pwflog"); one log per database."""
_ROW: Final = f"({', '.join(['%s'] * 12)})"
_INSERT: Final = f"INSERT INTO events ({COLUMNS}) VALUES {_ROW}"
_ONE_STATEMENT: Final = 256
"""Up to this many rows go in one statement (12 parameters each; PostgreSQL takes 65 535)."""
_RECORD: Final = (
    "INSERT INTO _pwf_recorded (request_id, client_id, idempotency_key, seq)"
    " VALUES (%s, %s, %s, %s)"
)
_HEAD: Final = "SELECT seq, content_hash, batch FROM _pwf_head WHERE id = 1"
_MOVE: Final = (
    "UPDATE _pwf_head SET seq = %s, content_hash = %s, batch = %s WHERE id = 1 AND seq = %s"
)
_AFTER: Final = f"SELECT {COLUMNS} FROM events WHERE seq > %s ORDER BY seq LIMIT %s"
_BETWEEN: Final = f"SELECT {COLUMNS} FROM events WHERE seq > %s AND seq <= %s ORDER BY seq"
_FLUSH: Final = "SELECT pg_logical_emit_message(true, 'pwf.flush', '')"
"""A flush barrier (ADR 0053): a transaction with an xid that writes WAL, committed synchronously.

Its commit waits until the WAL is flushed up to its own commit record, which
comes after the commit record of every transaction this session has seen.
"""
PREFETCH: Final = 1_000
"""Events a transaction reads after its caller's seq together with the head (a catch-up)."""
_STREAM: Final = 2_000
"""Rows a streaming read fetches per round trip."""

SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS events (
  seq BIGINT PRIMARY KEY CHECK (seq >= 1),
  batch BIGINT NOT NULL CHECK (batch >= 1),
  type TEXT NOT NULL,
  at BIGINT NOT NULL,
  run_id TEXT,
  session_id TEXT,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT,
  content_hash TEXT NOT NULL UNIQUE,
  prev_hash TEXT,
  body BYTEA NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS events_batch ON events (batch)",
    "CREATE INDEX IF NOT EXISTS events_type ON events (type, seq)",
    "CREATE INDEX IF NOT EXISTS events_run ON events (run_id, seq) WHERE run_id IS NOT NULL",
    (
        "CREATE INDEX IF NOT EXISTS events_session ON events (session_id, seq)"
        " WHERE session_id IS NOT NULL"
    ),
    (
        "CREATE INDEX IF NOT EXISTS events_request ON events (request_id, seq)"
        " WHERE request_id IS NOT NULL"
    ),
    (
        "CREATE INDEX IF NOT EXISTS events_idempotency ON events (client_id, idempotency_key, seq)"
        " WHERE client_id IS NOT NULL"
    ),
    """CREATE TABLE IF NOT EXISTS _pwf_recorded (
  request_id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  seq BIGINT NOT NULL,
  UNIQUE (client_id, idempotency_key)
)""",
    "CREATE TABLE IF NOT EXISTS _pwf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS _pwf_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq BIGINT NOT NULL,
  content_hash TEXT,
  batch BIGINT NOT NULL
)""",
    (
        "INSERT INTO _pwf_head (id, seq, content_hash, batch) VALUES (1, 0, NULL, 0)"
        " ON CONFLICT (id) DO NOTHING"
    ),
    "INSERT INTO _pwf_meta (key, value) VALUES ('format', %s) ON CONFLICT (key) DO NOTHING",
    (
        "INSERT INTO _pwf_meta (key, value) VALUES ('log_id', gen_random_uuid()::text)"
        " ON CONFLICT (key) DO NOTHING"
    ),
)
"""Idempotent: ``pwf init --store`` may run any number of times, from any host."""


def is_postgres_url(text: str) -> bool:
    """True for a ``postgresql://`` or ``postgres://`` connection URL."""
    return text.startswith(("postgresql://", "postgres://"))


def shown_url(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def translate_error(error: psycopg.Error, where: str) -> StoreError:
    """Turn a psycopg error into pwf's tree at the edge, with one clear line."""
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, psycopg.errors.UniqueViolation) and "_pwf_recorded" in text:
        return StoreError(f"{where}: another host already recorded this request ({text})")
    if isinstance(error, psycopg.errors.UniqueViolation):
        return StoreError(f"{where}: the log already holds that event ({text})")
    if isinstance(error, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled)):
        return StoreBusyError(f"{where}: the log is locked by another writer ({text})")
    if isinstance(error, psycopg.OperationalError):
        return StoreError(f"{where}: cannot reach PostgreSQL ({text})")
    return StoreError(f"{where}: {text}")


class PostgresTransaction:
    """The advisory lock is held; appends seal against the head read inside it."""

    def __init__(
        self,
        store: PostgresStore,
        head: Head | None = None,
        prefetched: list[tuple[object, ...]] | None = None,
    ) -> None:
        """Start from ``head``, read under the lock (read here when None); appends keep it current.

        ``prefetched`` are the events the transaction read after a seq its
        caller named, in seq order, at most :data:`PREFETCH` of them.
        """
        self.store = store
        self.connection = store.connection
        self._head = store.head() if head is None else head
        self._staged_batch: int | None = None
        self.prefetched = prefetched
        self.wrote = False
        """True once the transaction wrote rows."""
        self.must_flush = False
        """True when the caller keeps events it read here (ADR 0053).

        Another writer's commit may be visible before its WAL is flushed; the
        transaction then ends with a flush barrier, so what it read is durable
        when it returns.
        """

    @property
    def head(self) -> Head:
        """The log's tip as seen inside the transaction."""
        return self._head

    def append(
        self, events: Sequence[Event], *, at: int, actor: Actor, cause: Cause | None = None
    ) -> list[Sealed]:
        """Seal and write one batch."""
        return self._seal_and_write(events, self._head.batch + 1, at, actor, cause)

    def stage(
        self, events: Sequence[Event], *, at: int, actor: Actor, cause: Cause | None = None
    ) -> list[Sealed]:
        """Add events to this transaction's one open batch."""
        if self._staged_batch is None:
            self._staged_batch = self._head.batch + 1
        return self._seal_and_write(events, self._staged_batch, at, actor, cause)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Undo everything written inside the block if it raises, keep the rest."""
        head, staged = self._head, self._staged_batch
        try:
            with self.connection.transaction():
                yield
        except BaseException:
            self._head, self._staged_batch = head, staged
            raise

    def _seal_and_write(
        self, events: Sequence[Event], batch: int, at: int, actor: Actor, cause: Cause | None
    ) -> list[Sealed]:
        if not events:
            return []
        sealed = seal_batch(events, self._head, batch, at=at, actor=actor, cause=cause)
        self.write_rows([(*columns(item.entry), item.body) for item in sealed])
        return sealed

    def write_rows(self, rows: Sequence[tuple[object, ...]]) -> None:
        """Insert rows of :data:`~pwf.store.rows.COLUMNS` that continue the head, and move it.

        The rows were sealed against this transaction's head (here, or by a
        host's local transaction that caught up to it first).

        Raises:
            ChainError: the first row does not continue the head.
        """
        if not rows:
            return
        first, last = rows[0], rows[-1]
        if first[0] != self._head.seq + 1 or first[10] != self._head.content_hash:
            raise ChainError(int(str(first[0])), "the batch does not continue the log's head")
        recorded = [_recorded_keys(row) for row in rows if row[2] == "command.recorded"]
        move = (last[0], last[9], last[1], self._head.seq)
        connection = self.connection
        with connection.cursor() as cursor:
            if len(rows) <= _ONE_STATEMENT:
                # One statement: the rows, their records and the head's compare-and-set.
                params = [value for row in rows for value in row]
                params += [value for keys in recorded for value in keys]
                cursor.execute(_write_statement(len(rows), len(recorded)), (*params, *move))
            else:  # one round trip still, within PostgreSQL's limit on parameters
                with connection.pipeline():
                    cursor.executemany(_INSERT, rows)
                    if recorded:
                        cursor.executemany(_RECORD, recorded)
                    cursor.execute(_MOVE, move)
            if cursor.rowcount != 1:
                raise ChainError(int(str(first[0])), "another writer moved the log's head")
        self.wrote = True
        self._head = Head(seq=int(str(last[0])), content_hash=str(last[9]), batch=int(str(last[1])))

    def insert_verified(self, entry: Entry, body: bytes) -> None:
        """Write an already checked event verbatim (import); the caller checked the chain."""
        self.write_rows([(*columns(entry), body)])


class PostgresStore:
    """A hash-chained event log in one PostgreSQL database, shared by any number of hosts."""

    def __init__(self, url: str, *, create: bool = False, connect_timeout: int = 10) -> None:
        """Connect to ``url``; with ``create`` install the schema (idempotently).

        Raises:
            StoreError: PostgreSQL cannot be reached, or the database holds no pwf log.
        """
        self.url = url
        self.path = shown_url(url)
        """What messages call this log (the URL without its password)."""
        try:
            self.connection = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout)
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None
        try:
            if create:
                self._install()
            self.log_id = self._check_format()
        except psycopg.Error as error:
            self.connection.close()
            raise translate_error(error, self.path) from None
        except StoreError:
            self.connection.close()
            raise

    def _install(self) -> None:
        with self.connection.transaction():
            self.connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            found = self.connection.execute(
                "SELECT to_regclass('events') IS NOT NULL, to_regclass('_pwf_meta') IS NOT NULL"
            ).fetchone()
            if found is not None and found[0] and not found[1]:
                raise StoreError(
                    f"{self.path}: holds another program's events table; not a pwf log"
                )
            for statement in SCHEMA:
                params = (FORMAT,) if "%s" in statement else None
                self.connection.execute(statement, params)

    def _check_format(self) -> str:
        rows: dict[str, str] = {}
        if self.connection.execute("SELECT to_regclass('_pwf_meta')").fetchone() != (None,):
            found = self.connection.execute("SELECT key, value FROM _pwf_meta").fetchall()
            rows = {str(key): str(value) for key, value in found}
        if rows.get("format") != FORMAT:
            raise StoreError(
                f"{self.path}: not a pwf log (expected format {FORMAT}; run `pwf init --store`)"
            )
        return rows.get("log_id", "")

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()

    def __enter__(self) -> Self:
        """Use as a context manager that closes on exit."""
        return self

    def __exit__(self, *_: object) -> None:
        """Close the connection."""
        self.close()

    @contextmanager
    def transaction(
        self, *, after: int | None = None, early: bool = False
    ) -> Iterator[PostgresTransaction]:
        """Take the log's advisory lock; append inside; commit on exit, roll back on error.

        ``BEGIN``, the lock and the head's read go to the server in one round
        trip (a pipeline), and so, with ``after``, does the read of up to
        :data:`PREFETCH` events after that seq (a host's catch-up), which
        :attr:`PostgresTransaction.prefetched` then holds.  The server runs
        them in order, so the reads come after the lock is granted.

        The transaction returns only once everything it wrote, and what it
        read when :attr:`PostgresTransaction.must_flush` is set, is durable
        (ADR 0053).  With ``early`` (other writers are waiting) its commit
        frees the lock before the WAL is flushed and a flush barrier follows
        in the same round trip, so the next writer works while this one's
        flush runs, and concurrent flushes are done as one.
        """
        connection = self.connection
        try:
            with connection.pipeline():
                connection.execute("BEGIN")
                if early:
                    connection.execute("SET LOCAL synchronous_commit = off")
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                head = connection.execute(_HEAD)
                rows = None if after is None else connection.execute(_AFTER, (after, PREFETCH))
            transaction = PostgresTransaction(
                self, _head_of(head.fetchone()), None if rows is None else rows.fetchall()
            )
        except psycopg.Error as error:
            self._rollback()
            raise translate_error(error, self.path) from None
        except BaseException:
            self._rollback()
            raise
        try:
            yield transaction
            # A synchronous commit that wrote flushes past everything read before it.
            synchronous = not early and transaction.wrote
            if (transaction.must_flush or transaction.wrote) and not synchronous:
                with connection.pipeline():
                    connection.execute("COMMIT")
                    connection.execute(_FLUSH)
            else:
                connection.execute("COMMIT")
        except psycopg.Error as error:
            self._rollback()
            raise translate_error(error, self.path) from None
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        """End a failed transaction; a connection that is gone has nothing left to end."""
        with contextlib.suppress(psycopg.Error):
            if self.connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self.connection.execute("ROLLBACK")

    def append(
        self, events: Sequence[Event], *, at: int, actor: Actor, cause: Cause | None = None
    ) -> list[Sealed]:
        """Append one batch atomically and return it sealed."""
        with self.transaction() as tx:
            return tx.append(events, at=at, actor=actor, cause=cause)

    def flush(self) -> None:
        """Return once everything this connection has read or written is durable (ADR 0053).

        A writer's commit becomes visible before its WAL is flushed; a reader
        that keeps what it read (a host's catch-up) calls this first.
        """
        try:
            self.connection.execute(_FLUSH)
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None

    def head(self) -> Head:
        """The log's tip."""
        try:
            return _head_of(self.connection.execute(_HEAD).fetchone())
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None

    def after(self, seq: int, last: int | None = None) -> list[tuple[object, ...]]:
        """Whole rows after ``seq`` (up to ``last``, else at most :data:`PREFETCH`), in one read."""
        try:
            if last is None:
                return self.connection.execute(_AFTER, (seq, PREFETCH)).fetchall()
            return self.connection.execute(_BETWEEN, (seq, last)).fetchall()
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None

    def rows(self, first: int = 1, last: int | None = None) -> Iterator[tuple[object, ...]]:
        """Stream whole rows of :data:`~pwf.store.rows.COLUMNS` with ``first <= seq <= last``."""
        stop = last if last is not None else 2**63 - 1
        yield from self._stream(
            f"SELECT {COLUMNS} FROM events WHERE seq BETWEEN %s AND %s ORDER BY seq",
            (first, stop),
        )

    def _stream(self, sql: str, params: Sequence[object]) -> Iterator[tuple[object, ...]]:
        """Rows of one query through a server-side cursor, a few thousand per round trip."""
        try:
            with self.connection.transaction(), self.connection.cursor(name="pwf_stream") as cur:
                cur.itersize = _STREAM
                cur.execute(sql, params)
                yield from cur
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None

    def read(self, first: int = 1, last: int | None = None) -> Iterator[StoredEvent]:
        """Stream stored events with ``first <= seq <= last`` in seq order (constant memory)."""
        stop = last if last is not None else 2**63 - 1
        for seq, body in self._stream(
            "SELECT seq, body FROM events WHERE seq BETWEEN %s AND %s ORDER BY seq", (first, stop)
        ):
            yield StoredEvent(seq=int(str(seq)), body=_bytes(body))

    def entries(self, first: int = 1, last: int | None = None) -> Iterator[Entry]:
        """Stream checked, typed events with ``first <= seq <= last``."""
        for stored in self.read(first, last):
            yield open_body(stored.body)

    def find(self, **wanted: str | int | None) -> Iterator[StoredEvent]:
        """Stream the events whose indexed columns equal every given value.

        Raises:
            InputError: an unknown column, or an idempotency key without its client id.
        """
        given = lookup(wanted)
        where = " AND ".join(f"{column} = %s" for column in given) or "TRUE"
        for seq, body in self._stream(
            f"SELECT seq, body FROM events WHERE {where} ORDER BY seq", tuple(given.values())
        ):
            yield StoredEvent(seq=int(str(seq)), body=_bytes(body))

    def origin(self) -> Head:
        """Where the chain starts: zeros, or the head a compaction replaced (DOMAIN §13.2).

        Raises:
            ChainError: the first stored event cannot start a log.
        """
        row = self.connection.execute(
            "SELECT seq, body FROM events ORDER BY seq LIMIT 1"
        ).fetchone()
        return EMPTY if row is None else origin_of(row[0], _bytes(row[1]))

    def verify(self, *, deep: bool = True) -> VerifyReport:
        """Check the chain from stored bytes in one snapshot and name the first bad seq.

        ``deep`` also parses every event and compares its indexed columns
        with its bytes, as :meth:`pwf.store.sqlite.SqliteStore.verify` does.
        """
        try:
            with self.connection.transaction():
                self.connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return self._verify(deep=deep)
        except psycopg.Error as error:
            raise translate_error(error, self.path) from None

    def _verify(self, *, deep: bool) -> VerifyReport:
        return report(self.head(), self.origin, lambda origin: self._walk(origin, deep=deep))

    def _walk(self, origin: Head, *, deep: bool) -> Head:
        rows: Iterable[tuple[object, ...]] = self.rows()
        if deep:
            return verify_rows(rows, origin)
        return walk_rows(((row[0], str(row[9]).encode(), row[11]) for row in rows), origin)


def _head_of(row: tuple[object, ...] | None) -> Head:
    """The head row as a :class:`Head` (an empty log when there is no row)."""
    if row is None:
        return EMPTY
    seq, content_hash, batch = row
    return Head(
        seq=int(str(seq)),
        content_hash=None if content_hash is None else str(content_hash),
        batch=int(str(batch)),
    )


@functools.cache
def _write_statement(rows: int, recorded: int) -> str:
    """Insert ``rows`` events and ``recorded`` records, then move the head, as one statement.

    PostgreSQL runs every data-modifying ``WITH`` part to completion, in the
    statement's one snapshot; the row count is the head update's.
    """
    events = ", ".join([_ROW] * rows)
    parts = [f"e AS (INSERT INTO events ({COLUMNS}) VALUES {events})"]
    if recorded:
        records = ", ".join(["(%s, %s, %s, %s)"] * recorded)
        parts.append(
            "r AS (INSERT INTO _pwf_recorded (request_id, client_id, idempotency_key, seq)"
            f" VALUES {records})"
        )
    return f"WITH {', '.join(parts)} {_MOVE}"


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
    """
    body = _bytes(row[BODY])
    try:
        keys = _KEYS.decode(body).data
    except msgspec.DecodeError:
        event = open_body(body).event
        assert isinstance(event, CommandRecorded)
        return (event.request_id, event.client_id, event.idempotency_key, row[0])
    return (keys.request_id, keys.client_id, keys.idempotency_key, row[0])


def _bytes(value: object) -> bytes:
    """A ``BYTEA`` value as bytes (psycopg returns bytes, or memoryview for some loaders)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, memoryview):
        return value.tobytes()
    raise StoreError("a stored body is not bytes")
