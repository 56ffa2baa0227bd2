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
    "SELECT e.seq, CAST(e.type AS BLOB), e.content_hash, e.link, e.data, b.head, b.batch,"
    " w.body, CAST(w.prev_hash AS BLOB){more}"
    " FROM {schema}_pwf_events e JOIN {schema}_pwf_batches b ON b.seq = e.head"
    " LEFT JOIN {schema}_pwf_whole w ON w.seq = e.seq"
    " WHERE e.seq BETWEEN ? AND ? ORDER BY e.seq"
)
_INDEXED: Final = (
    ", b.at, CAST(e.run_id AS BLOB), CAST(e.session_id AS BLOB), CAST(b.request_id AS BLOB),"
    " CAST(b.client_id AS BLOB), CAST(b.idempotency_key AS BLOB)"
)
"""The indexed columns the view passes through, which :func:`event_rows` reads too.

Text is read as its stored bytes and decoded here (:func:`_text`), so a
cell that is no text (a damaged disk, a hand edit) reaches the deep
check, which names its column, instead of stopping the read.
"""
_HASH_AT: Final = "SELECT content_hash FROM {schema}_pwf_events WHERE seq = ?"
_NONE: Final[frozenset[bytes]] = frozenset()
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
    skipped = frozenset(tag.encode() for tag in without)
    made = _made(connection, query, (first, last), schema, skipped)
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
    for row, body, content_hash, prev_hash in _made(connection, query, (first, last), "", _NONE):
        seq, tag, _, _, _, _, batch, _, _, at, *texts = row
        yield (
            seq, batch, _text(tag), at, *map(_text, texts),
            content_hash, prev_hash, body,
        )  # fmt: skip


def _made(
    connection: sqlite3.Connection,
    query: str,
    span: tuple[int, int],
    schema: str,
    without: frozenset[bytes],
) -> Iterator[tuple[tuple[Any, ...], bytes | None, str, str | None]]:
    """Each row of ``query`` (:data:`_PARTS`) in ``span`` with the body and hashes it makes.

    ``without``: the types (as stored bytes) whose bodies are not made.
    """
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
            prev_hash = _text(whole_prev)
            if tag not in without:
                body = whole
        else:
            prev = link if link is not None else before
            prev_hash = None if prev is None else prev.hex()
            if data is not None and tag not in without:
                body = join(head, content_hash, data, tail(seq, prev_hash, tag))
        yield row, body, content_hash, prev_hash
        before = digest


def _text(cell: Any) -> Any:  # noqa: ANN401 - a cell of any type
    """A TEXT cell read as its bytes, as pwf's connections read text (ADR 0071).

    Bytes that decode to no text stay bytes: a check comparing the column
    with an event's bytes then names it, where SQLite's own decoding would
    have raised in the middle of the walk.
    """
    if type(cell) is not bytes:
        return cell  # None
    try:
        return cell.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return cell


def _hash_at(connection: sqlite3.Connection, schema: str, seq: int) -> bytes | None:
    row = connection.execute(_HASH_AT.format(schema=schema), (seq,)).fetchone()
    return None if row is None else bytes(row[0])
