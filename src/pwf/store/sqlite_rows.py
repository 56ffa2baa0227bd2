"""The SQLite log's rows as the ``events`` view gives them, made from their parts in Python.

Imports packing (plus sqlite3 through the connection it is given: an edge
room).  The view (:data:`pwf.store.schema.EVENTS_VIEW`) makes every row's
body with SQL's string functions and finds ``prevHash`` by a join to the
row before, and writes the content hash and ``prevHash`` in hex once
more for their own columns; a walk in seq order knows the row before
already.  Reading the parts and joining them with
:func:`pwf.store.packing.join` gives the body and both hash columns for a
third less processor time a row (ADR 0109), which a fold and both chain
walks pay once per event.  A reader of the body alone gains nothing: the
view's ``printf`` costs what Python's join does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pwf.store.packing import join, tail

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Collection, Generator, Iterator

__all__ = ["CHAIN_COLUMNS", "LAST", "PartRow", "chain_rows", "event_rows"]

_PARTS: Final = (
    "SELECT e.seq, e.type, e.content_hash, e.link, e.data, b.head, b.batch, w.body,"
    " w.prev_hash{more}"
    " FROM {schema}_pwf_events e JOIN {schema}_pwf_batches b ON b.seq = e.head"
    " LEFT JOIN {schema}_pwf_whole w ON w.seq = e.seq"
    " WHERE e.seq BETWEEN ? AND ? ORDER BY e.seq"
)
_INDEXED: Final = ", b.at, e.run_id, e.session_id, b.request_id, b.client_id, b.idempotency_key"
"""The indexed columns the view passes through, which :func:`event_rows` reads too."""
_HASH_AT: Final = "SELECT content_hash FROM {schema}_pwf_events WHERE seq = ?"
LAST: Final = 2**63 - 1
"""The largest seq SQLite can hold: a bound that leaves a range open."""

CHAIN_COLUMNS: Final = "seq, body, content_hash, batch, prev_hash"
"""The view's columns :func:`chain_rows` gives, in its order."""
PartRow = tuple[int, bytes | None, str, int, str | None]
"""A row of :data:`CHAIN_COLUMNS`."""


def chain_rows(
    connection: sqlite3.Connection,
    first: int,
    last: int,
    *,
    schema: str = "",
    without: Collection[str] = (),
) -> Iterator[PartRow]:
    """The rows of seqs ``first..last`` in seq order, as the ``events`` view gives them.

    Each is a row of :data:`CHAIN_COLUMNS`, byte for byte.
    ``schema`` is empty or an attached database's name with its dot.  A pruned
    event has no body (ADR 0103); nor, here, has an event whose type is in
    ``without``, for a reader that would not look at it.
    """
    query = _PARTS.format(schema=schema, more="")
    made = _made(connection, query, (first, last), schema, without)
    for row, body, content_hash, prev_hash in made:
        yield row[0], body, content_hash, row[6], prev_hash


def event_rows(
    connection: sqlite3.Connection, first: int, last: int
) -> Generator[tuple[object, ...], None, None]:
    """The rows of seqs ``first..last`` of :data:`pwf.store.rows.COLUMNS`, as the view gives them.

    Every column the deep verify compares with the bytes: the indexed ones
    the view passes through from the tables, then the hashes and the body.
    """
    query = _PARTS.format(schema="", more=_INDEXED)
    for row, body, content_hash, prev_hash in _made(connection, query, (first, last), "", ()):
        seq, tag, _, _, _, _, batch, _, _, at, run_id, session_id, request, client, key = row
        yield (
            seq, batch, tag, at, run_id, session_id, request, client, key,
            content_hash, prev_hash, body,
        )  # fmt: skip


def _made(
    connection: sqlite3.Connection,
    query: str,
    span: tuple[int, int],
    schema: str,
    without: Collection[str],
) -> Iterator[tuple[tuple[Any, ...], bytes | None, str, str | None]]:
    """Each row of ``query`` (:data:`_PARTS`) in ``span`` with the body and hashes it makes."""
    before: bytes | None = None
    following = 0  # no row is seq 0: the first row looks up the one before it
    for row in connection.execute(query, span):
        seq, tag, digest, link, data, head, _, whole, whole_prev = row[:9]
        if seq != following:  # the first row, or after a gap: look the row before up
            before = _hash_at(connection, schema, seq - 1)
        following = seq + 1
        content_hash = digest.hex()
        body: bytes | None = None
        if whole is not None:
            prev_hash = whole_prev
            if tag not in without:
                body = whole
        else:
            prev = link if link is not None else before
            prev_hash = None if prev is None else prev.hex()
            if data is not None and tag not in without:
                body = join(head, content_hash, data, tail(seq, prev_hash, tag))
        yield row, body, content_hash, prev_hash
        before = digest


def _hash_at(connection: sqlite3.Connection, schema: str, seq: int) -> bytes | None:
    row = connection.execute(_HASH_AT.format(schema=schema), (seq,)).fetchone()
    return None if row is None else bytes(row[0])
