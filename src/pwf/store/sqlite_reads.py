"""The SQLite log's reads: its head, ranges, look-ups and the verify walk.

Imports events, the store's types, rows and sealing (plus sqlite3 through
the connection it is given: this is an edge room).  :class:`SqliteReads` is
the half of :class:`~pwf.store.sqlite.SqliteStore` that reads the log; it
needs the store's ``connection`` and ``path`` only.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from pwf._sqlite import execute, transaction
from pwf.errors import ChainError, StoreError
from pwf.events import Entry, open_body
from pwf.store import EMPTY, Head, StoredEvent, VerifyReport, origin_of
from pwf.store.rows import verify_rows
from pwf.store.sealing import extends, lookup_where, report

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["SqliteReads"]


class SqliteReads:
    """Reads of a log kept in one SQLite file, through the store's connection."""

    connection: sqlite3.Connection
    path: Path

    def head(self) -> Head:
        """The log's tip."""
        row = self.connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
        return Head(seq=row[0], content_hash=row[1], batch=row[2]) if row else Head(0, None, 0)

    def read(self, first: int = 1, last: int | None = None) -> Iterator[StoredEvent]:
        """Stream stored events with ``first <= seq <= last`` in seq order (constant memory).

        A pruned event (its bytes in the prune's backup, ADR 0103) is not among them.
        """
        stop = last if last is not None else 2**63 - 1
        cursor = self.connection.execute(
            "SELECT seq, body FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq", (first, stop)
        )
        for seq, body in cursor:
            if body is not None:
                yield StoredEvent(seq=seq, body=body)

    def entries(self, first: int = 1, last: int | None = None) -> Iterator[Entry]:
        """Stream checked, typed events with ``first <= seq <= last``."""
        for stored in self.read(first, last):
            yield open_body(stored.body)

    def pruned(self, first: int = 1, last: int | None = None) -> Iterator[tuple[int, int]]:
        """The seqs ``first..last`` whose bytes a prune took, each with its ``log.pruned``'s seq."""
        stop = last if last is not None else 2**63 - 1
        cursor = self.connection.execute(
            "SELECT seq, taken FROM _pwf_pruned WHERE seq BETWEEN ? AND ? ORDER BY seq",
            (first, stop),
        )
        for seq, taken in cursor:
            yield int(seq), int(taken)

    def find(
        self, *, after: int = 0, until: int | None = None, **wanted: str | int | None
    ) -> Iterator[StoredEvent]:
        """Stream the events after seq ``after`` whose indexed columns equal every given value.

        Each lookup index ends with ``seq``, so ``after`` starts the walk
        there instead of at the first event that matches, and ``until``
        (a last seq) ends it there rather than at the end of the log when
        nothing more matches (ADR 0085).  ``at_least`` and ``at_most`` in
        ``wanted`` bound the events' time, read from their batch's row.

        Raises:
            InputError: an unknown column, or an idempotency key without its client id.
        """
        where, params = lookup_where(wanted, after=after, until=until)
        cursor = execute(  # an id with a lone surrogate is looked up exactly (ADR 0071)
            self.connection,
            f"SELECT seq, body FROM events WHERE {where} ORDER BY seq",  # noqa: S608 - constants
            params,
        )
        for seq, body in cursor:
            if body is not None:  # not pruned (ADR 0103)
                yield StoredEvent(seq=seq, body=body)

    def origin(self) -> Head:
        """Where the chain starts: zeros, or the head a compaction replaced (DOMAIN §13.2).

        Raises:
            ChainError: the first stored event cannot start a log.
        """
        row = self.connection.execute(
            "SELECT seq, body FROM events ORDER BY seq LIMIT 1"
        ).fetchone()
        if row is None or (row[1] is None and row[0] == 1):  # a pruned first event (ADR 0103)
            return EMPTY
        if row[1] is None:
            raise ChainError(row[0], "the log's first event has no bytes and is not seq 1")
        return origin_of(row[0], row[1])

    def verify(self, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
        """Check the chain from stored bytes and name the first bad seq.

        ``deep`` (the default) also parses every event (canonical form, typed
        data) and compares the indexed columns with the bytes.  Without it
        only the chain is walked: each body's SHA-256 against its own
        ``contentHash``, and ``seq``, ``batch`` and ``prevHash`` read from the
        bytes, which proves that no acknowledged byte changed.  With
        ``after`` (see :meth:`pwf.store.EventLog.verify`) the events after it
        are walked when the log still holds it and nothing since rewrote
        what stands before it.
        """
        with self._snapshot():
            if after is not None and not extends(after, self._one):
                after = None
            return self._verify(deep=deep, after=after)

    def _one(self, query: str, params: tuple[object, ...]) -> tuple[object, ...] | None:
        """The first row of ``query``, or None."""
        found: tuple[object, ...] | None = self.connection.execute(query, params).fetchone()
        return found

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction, so the head and the events come from the same moment."""
        with transaction(self.connection):
            yield

    def _walk(self, origin: Head, head: Head, *, deep: bool, proven: bool) -> Head:
        """The walk, shared across processes for a long log (``pwf.store.chainwalk``).

        The walkers read their own snapshots, bounded by the last seq of this
        one; whatever they report other than this snapshot's head is walked
        again here, in this snapshot, so a fault is named exactly and a
        concurrent compaction is not mistaken for one.  ``proven``: ``origin``
        is a head an earlier verify proved, and only the events after it are read.
        """
        from pwf.store.chainwalk import stored_rows, walk_chain, walk_rows  # noqa: PLC0415

        top = self.connection.execute("SELECT max(seq) FROM events").fetchone()[0]
        if top is not None:
            try:
                # This process's range is walked in this snapshot, on this connection.
                found = walk_chain(
                    self.path,
                    origin,
                    upto=top,
                    deep=deep,
                    connection=self.connection,
                    proven=proven,
                )
                if found == head:
                    return head
            except (ChainError, StoreError):
                pass
        rows = stored_rows(self.connection, origin.seq + 1 if proven else None, None, deep=deep)
        return verify_rows(rows, origin) if deep else walk_rows(rows, origin)

    def _verify(self, *, deep: bool, after: Head | None) -> VerifyReport:
        head = self.head()

        def walk(origin: Head) -> Head:
            if after is None:
                last = self._walk(origin, head, deep=deep, proven=False)
            else:
                last = self._walk(after, head, deep=deep, proven=True)
            if last == head:  # the chain holds: now the tree over it (ADR 0083)
                from pwf.store.tree import check  # noqa: PLC0415 - verify only

                check(self.connection, after=after)
            return last

        return report(head, self.origin, walk)
