"""Events into the log's tables of format ``pwf.store.v2`` (ADR 0102); imports the store's packing.

:func:`pack` turns stored events (their indexed columns, as
:func:`pwf.store.rows.columns` gives them, and their bytes) into the rows of
``_pwf_batches``, ``_pwf_events`` and ``_pwf_whole``; :func:`write` packs and
inserts them on a SQLite connection.  Every writer of a SQLite log (the
append, a compaction's image, a fold's copy, an import) goes through
:func:`write`; the PostgreSQL log packs with :func:`pack` too.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final, NamedTuple

from pwf._sqlite import execute, execute_many
from pwf.store.packing import head_of, split
from pwf.store.schema import BATCH_INSERT, ROW_INSERT, WHOLE_INSERT

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Sequence

__all__ = [
    "PRUNED_INSERT",
    "STRIP",
    "Packed",
    "owe_refold",
    "pack",
    "refold_owed",
    "refolded",
    "strip",
    "write",
    "write_pruned",
]

Stored = tuple[tuple[object, ...], bytes]
"""An event to store: its indexed columns (:data:`pwf.store.rows.COLUMNS` less body) and bytes."""

_SQLITE: Final = {
    name: statement.format(schema="{schema}", marks=",".join("?" * count))
    for name, statement, count in (
        ("rows", ROW_INSERT, 8),
        ("batches", BATCH_INSERT, 7),
        ("whole", WHOLE_INSERT, 3),
    )
}


class Packed(NamedTuple):
    """The rows a run of events adds to each of the log's tables."""

    batches: list[tuple[object, ...]]
    rows: list[tuple[object, ...]]
    whole: list[tuple[object, ...]]
    last: tuple[object, ...] | None
    """The batch row of the last event (written here or continued)."""


Batch = tuple[object, ...]
"""A ``_pwf_batches`` row: seq, batch, at, request id, client id, idempotency key, head."""

LAST_BATCH: Final = (
    "SELECT seq, batch, at, request_id, client_id, idempotency_key, head"
    " FROM {schema}_pwf_batches WHERE seq = (SELECT max(seq) FROM {schema}_pwf_batches)"
)
"""The batch row the next event may continue."""


def pack(events: Iterable[Stored], *, previous: str | None, last: Batch | None) -> Packed:
    """The rows of ``events``, which follow the row whose content hash is ``previous``.

    ``previous`` is None where the table holds no row at the first event's
    seq minus one; ``last`` is the table's last ``_pwf_batches`` row, which
    an event with the same batch members continues.
    """
    batches: list[tuple[object, ...]] = []
    rows: list[tuple[object, ...]] = []
    whole: list[tuple[object, ...]] = []
    for columns, body in events:
        seq, batch, tag, at, run_id, session_id, request_id, client_id, key, digest, prev = columns
        assert isinstance(seq, int)
        assert isinstance(tag, str)
        assert isinstance(digest, str)
        assert prev is None or isinstance(prev, str)
        parts = split(body, seq=seq, tag=tag, content_hash=digest, prev_hash=prev)
        head = head_of(body) if parts is None else parts.head
        shared = (batch, at, request_id, client_id, key, head or b"")
        if last is None or last[1:] != shared:
            last = (seq, *shared)
            batches.append(last)
        if parts is None or (prev is None and previous is not None):
            whole.append((seq, prev, body))
            data = None
        else:
            data = parts.data
        link = None if prev == previous or prev is None else bytes.fromhex(prev)
        rows.append((seq, last[0], tag, run_id, session_id, bytes.fromhex(digest), link, data))
        previous = digest
    return Packed(batches=batches, rows=rows, whole=whole, last=last)


def write(  # noqa: PLR0913 - where the rows go and what the caller knows of the table
    connection: sqlite3.Connection,
    events: Sequence[Stored],
    *,
    previous: str | None,
    schema: str = "main",
    new_batch: bool = False,
    last: Batch | None = None,
) -> Batch | None:
    """Insert ``events`` (in seq order, after the row hashed ``previous``) into ``schema``'s log.

    ``new_batch`` says the first event opens a batch, so no stored batch
    row can be continued and none is read; ``last`` is the table's last
    batch row where the caller knows it (it wrote it), else it is read.
    Returns the batch row of the last event.  Ids with lone surrogates are
    bound exactly (ADR 0071).
    """
    statements = _statements(schema)
    if last is None and not new_batch:
        found = connection.execute(statements["last"]).fetchone()
        last = None if found is None else tuple(found)
    if not events:
        return last
    packed = pack(events, previous=previous, last=last)
    for table in ("batches", "rows", "whole"):
        rows = getattr(packed, table)
        if len(rows) == 1:  # an append's usual run: one event, no generator around the driver
            execute(connection, statements[table], rows[0])
        elif rows:
            execute_many(connection, statements[table], rows)
    return packed.last


@functools.cache
def _statements(schema: str) -> dict[str, str]:
    """The statements of ``schema``'s log, written once per schema (ADR 0105)."""
    prefix = f"{schema}."
    return {
        **{name: text.format(schema=prefix) for name, text in _SQLITE.items()},
        "last": LAST_BATCH.format(schema=prefix),
    }


PRUNED_INSERT: Final = "INSERT INTO {schema}_pwf_pruned (seq, leaf, taken) VALUES ({marks})"
"""The leaf a prune kept of an event whose bytes it took (ADR 0103)."""


def write_pruned(  # noqa: PLR0913 - the row's columns and what the prune kept of it
    connection: sqlite3.Connection,
    columns: tuple[object, ...],
    leaf: bytes,
    taken: int,
    *,
    previous: str | None,
    schema: str = "main",
) -> None:
    """Insert a pruned event (no bytes: its columns, its leaf, the prune that took it).

    A host's copy of a shared log gets such a row when a prune took the
    event's bytes before the host caught up (ADR 0107).  Its batch row holds
    the event's own batch columns with an empty head: a pruned event has no
    bytes for the head to start.
    """
    seq, batch, tag, at, run_id, session_id, request_id, client_id, key, digest, prev = columns
    assert isinstance(digest, str)
    assert prev is None or isinstance(prev, str)
    prefix = f"{schema}."
    link = None if prev == previous or prev is None else bytes.fromhex(prev)
    execute_many(
        connection,
        _SQLITE["batches"].format(schema=prefix),
        [(seq, batch, at, request_id, client_id, key, b"")],
    )
    execute_many(
        connection,
        _SQLITE["rows"].format(schema=prefix),
        [(seq, seq, tag, run_id, session_id, bytes.fromhex(digest), link, None)],
    )
    connection.execute(PRUNED_INSERT.format(schema=prefix, marks="?, ?, ?"), (seq, leaf, taken))


STRIP: Final = (
    "UPDATE {schema}_pwf_events SET data = NULL WHERE seq = {mark}",
    "DELETE FROM {schema}_pwf_whole WHERE seq = {mark}",
)
"""Take an event's bytes out of the log's tables, its row kept (ADR 0103); ``{mark}``: one seq."""


def strip(
    connection: sqlite3.Connection,
    going: Sequence[tuple[int, bytes]],
    taken: int,
    schema: str = "main",
) -> int:
    """Take the bytes of ``going`` (seq, leaf) out of a SQLite log, keeping each leaf and ``taken``.

    Rows whose bytes are already gone are left as they are.  Returns how many
    rows lost their bytes here.
    """
    prefix = f"{schema}."
    kept = {
        row[0]
        for row in connection.execute(f"SELECT seq FROM {prefix}_pwf_pruned")  # noqa: S608
    }
    rows = [(seq, leaf) for seq, leaf in going if seq not in kept]
    for statement in STRIP:
        connection.executemany(
            statement.format(schema=prefix, mark="?"), [(seq,) for seq, _leaf in rows]
        )
    connection.executemany(
        PRUNED_INSERT.format(schema=prefix, marks="?, ?, ?"),
        [(seq, leaf, taken) for seq, leaf in rows],
    )
    return len(rows)


_REFOLD: Final = "refold"
"""The ``_pwf_meta`` key that says the file's projections are owed a fold from its log."""


def owe_refold(connection: sqlite3.Connection, taken: int) -> None:
    """Mark, in the transaction that took a prune's bytes out of the file, that it must refold.

    Durable with the strip itself: a host killed before it folded again folds at its next
    catch-up (ADR 0107).
    """
    connection.execute(
        "INSERT OR REPLACE INTO _pwf_meta (key, value) VALUES (?, ?)", (_REFOLD, str(taken))
    )


def refold_owed(connection: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether the file's projections are owed a fold from its log (:func:`owe_refold`).

    ``schema``: the database of ``connection`` that is the file.
    """
    found = connection.execute(
        f"SELECT 1 FROM {schema}._pwf_meta WHERE key = ?",  # noqa: S608 - a schema name
        (_REFOLD,),
    ).fetchone()
    return found is not None


def refolded(connection: sqlite3.Connection) -> None:
    """The fold owed is done: clear the mark, in a transaction of its own."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute("DELETE FROM _pwf_meta WHERE key = ?", (_REFOLD,))
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
