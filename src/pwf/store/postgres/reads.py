"""Reads of the shared log: its head, the catch-up reads after a seq, streams and lookups.

Imports psycopg, the store's types, its rows and sealing helpers, and this
package's edge.  Each function takes the store's autocommit connection and
the name its errors give the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import psycopg

from pwf.events import Entry, open_body
from pwf.store import EMPTY, Head, StoredEvent, VerifyReport, origin_of
from pwf.store.chainwalk import walk_rows
from pwf.store.postgres.edge import as_bytes, translate_error
from pwf.store.rows import COLUMNS, verify_rows
from pwf.store.sealing import extends, lookup_where, report

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from psycopg.rows import TupleRow

    Connection = psycopg.Connection[TupleRow]

__all__ = [
    "AFTER",
    "HEAD",
    "PREFETCH",
    "after",
    "entries",
    "find",
    "head",
    "head_of",
    "origin",
    "read",
    "rows",
    "verify",
]

HEAD: Final = "SELECT seq, content_hash, batch FROM _pwf_head WHERE id = 1"
AFTER: Final = f"SELECT {COLUMNS} FROM events WHERE seq > %s ORDER BY seq LIMIT %s"
_BETWEEN: Final = f"SELECT {COLUMNS} FROM events WHERE seq > %s AND seq <= %s ORDER BY seq"
PREFETCH: Final = 1_000
"""Events a transaction reads after its caller's seq together with the head (a catch-up)."""
_STREAM: Final = 2_000
"""Rows a streaming read fetches per round trip."""
_LAST: Final = 2**63 - 1


def head_of(row: tuple[object, ...] | None) -> Head:
    """The head row as a :class:`Head` (an empty log when there is no row)."""
    if row is None:
        return EMPTY
    seq, content_hash, batch = row
    return Head(
        seq=int(str(seq)),
        content_hash=None if content_hash is None else str(content_hash),
        batch=int(str(batch)),
    )


def head(connection: Connection, where: str) -> Head:
    """The log's tip."""
    try:
        return head_of(connection.execute(HEAD).fetchone())
    except psycopg.Error as error:
        raise translate_error(error, where) from None


def after(
    connection: Connection, where: str, seq: int, last: int | None = None
) -> list[tuple[object, ...]]:
    """Whole rows after ``seq`` (up to ``last``, else at most :data:`PREFETCH`), in one read."""
    try:
        if last is None:
            return connection.execute(AFTER, (seq, PREFETCH)).fetchall()
        return connection.execute(_BETWEEN, (seq, last)).fetchall()
    except psycopg.Error as error:
        raise translate_error(error, where) from None


def _stream(
    connection: Connection, where: str, sql: str, params: Sequence[object]
) -> Iterator[tuple[object, ...]]:
    """Rows of one query through a server-side cursor, a few thousand per round trip."""
    try:
        with connection.transaction(), connection.cursor(name="pwf_stream") as cur:
            cur.itersize = _STREAM
            cur.execute(sql, params)
            yield from cur
    except psycopg.Error as error:
        raise translate_error(error, where) from None


def rows(
    connection: Connection, where: str, first: int = 1, last: int | None = None
) -> Iterator[tuple[object, ...]]:
    """Stream whole rows of :data:`~pwf.store.rows.COLUMNS` with ``first <= seq <= last``."""
    stop = last if last is not None else _LAST
    yield from _stream(
        connection,
        where,
        f"SELECT {COLUMNS} FROM events WHERE seq BETWEEN %s AND %s ORDER BY seq",
        (first, stop),
    )


def read(
    connection: Connection, where: str, first: int = 1, last: int | None = None
) -> Iterator[StoredEvent]:
    """Stream stored events with ``first <= seq <= last`` in seq order (constant memory).

    A pruned event (its bytes in the prune's backup, ADR 0103) is not among them.
    """
    stop = last if last is not None else _LAST
    sql = "SELECT seq, body FROM events WHERE seq BETWEEN %s AND %s ORDER BY seq"
    for seq, body in _stream(connection, where, sql, (first, stop)):
        if body is not None:
            yield StoredEvent(seq=int(str(seq)), body=as_bytes(body))


def pruned(
    connection: Connection, where: str, first: int = 1, last: int | None = None
) -> Iterator[tuple[int, int]]:
    """The seqs ``first..last`` whose bytes a prune took, each with its ``log.pruned``'s seq."""
    stop = last if last is not None else _LAST
    sql = "SELECT seq, taken FROM _pwf_pruned WHERE seq BETWEEN %s AND %s ORDER BY seq"
    for seq, taken in _stream(connection, where, sql, (first, stop)):
        yield int(str(seq)), int(str(taken))


def entries(
    connection: Connection, where: str, first: int = 1, last: int | None = None
) -> Iterator[Entry]:
    """Stream checked, typed events with ``first <= seq <= last``."""
    for stored in read(connection, where, first, last):
        yield open_body(stored.body)


def find(
    connection: Connection,
    where: str,
    *,
    after: int = 0,
    until: int | None = None,
    **wanted: str | int | None,
) -> Iterator[StoredEvent]:
    """Stream the events after seq ``after`` (up to ``until``) whose indexed columns match.

    ``wanted`` may bound the time too (:func:`pwf.store.sealing.lookup_where`).

    Raises:
        InputError: an unknown column, or an idempotency key without its client id.
    """
    condition, params = lookup_where(wanted, after=after, until=until, mark="%s")
    sql = f"SELECT seq, body FROM events WHERE {condition} ORDER BY seq"
    for seq, body in _stream(connection, where, sql, params):
        if body is not None:  # not pruned (ADR 0103)
            yield StoredEvent(seq=int(str(seq)), body=as_bytes(body))


def origin(connection: Connection) -> Head:
    """Where the chain starts: zeros, or the head a compaction replaced (DOMAIN §13.2).

    Raises:
        ChainError: the first stored event cannot start a log.
    """
    row = connection.execute("SELECT seq, body FROM events ORDER BY seq LIMIT 1").fetchone()
    if row is None or row[0] == 1:  # seq 1 opens the log, its bytes pruned or not (ADR 0103)
        return EMPTY
    return origin_of(row[0], as_bytes(row[1]))


def verify(
    connection: Connection, where: str, *, deep: bool = True, after: Head | None = None
) -> VerifyReport:
    """Check the chain from stored bytes in one snapshot and name the first bad seq.

    ``deep`` also parses every event and compares its indexed columns
    with its bytes, as :meth:`pwf.store.sqlite.SqliteStore.verify` does;
    ``after`` walks only what follows a proven head, as it does there.
    """

    def one(query: str, params: tuple[object, ...]) -> tuple[object, ...] | None:
        return connection.execute(query, params).fetchone()

    def walk(origin: Head) -> Head:
        start = origin if after is None else after
        stored: Iterable[tuple[object, ...]] = rows(connection, where, start.seq + 1)
        if deep:
            last = verify_rows(stored, start, shared=True)
        else:
            last = walk_rows(
                ((row[0], str(row[9]).encode(), row[11], row[1], row[10]) for row in stored),
                start,
            )
        from pwf.store.postgres.tree import check  # noqa: PLC0415 - verify only

        check(connection, after=after)  # the tree over the chain (ADR 0083)
        return last

    try:
        with connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            if after is not None and not extends(after, one, "%s"):
                after = None
            return report(head(connection, where), lambda: origin(connection), walk)
    except psycopg.Error as error:
        raise translate_error(error, where) from None
