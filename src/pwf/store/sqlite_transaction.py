"""The SQLite log's write transaction: staging, savepoints, sealing against the head.

Imports the SQLite helpers, events, the store's types and the SQLite schema.  The
write lock is held for the transaction's life (ADR 0005); every batch is
sealed against the head read inside it, projected by the append hooks as it
is written (ADR 0008), and the head row is written once before the commit
(ADR 0033).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from pwf.events import Sealed
from pwf.sqlreader import RowReader
from pwf.store import Head
from pwf.store.log_writes import write, write_pruned
from pwf.store.rows import columns
from pwf.store.sealing import Batches
from pwf.store.sqlite_schema import HEAD_UPSERT
from pwf.store.tree import Pruned, Tree, extend, grow, load

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator

    from pwf.events import Entry
    from pwf.store.sqlite import SqliteStore

__all__ = ["SqliteTransaction"]


class SqliteTransaction(Batches):
    """The write lock is held; appends seal against the head read inside it."""

    def __init__(self, store: SqliteStore, connection: sqlite3.Connection) -> None:
        """Read the head once; later appends keep it current."""
        self.store = store
        self.connection = connection
        row = connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
        self._head = (
            Head(seq=row[0], content_hash=row[1], batch=row[2]) if row else Head(0, None, 0)
        )
        self._opened = self._head
        self._tree: tuple[Head, Tree] | None = store.tree_cache
        """The Merkle tree of the log ending at the head it is paired with (ADR 0083)."""
        self._staged_batch: int | None = None
        self._batch_row: tuple[Head, tuple[object, ...]] | None = None
        """The batch row of the head's event, written here: the next write of its batch
        continues it without reading it (only while the head is still that event)."""
        self._savepoints = 0
        """Savepoints open with a statement of their own."""
        self._mark = -1
        """The connection's ``total_changes`` when the innermost of them was opened."""
        self.bare = False
        """Savepoints run no statement (ADR 0061): a block that fails after writing
        marks the transaction :attr:`spoiled`, one that wrote nothing is undone by
        restoring the head.  Only the store's unit of work sets it (ADR 0087)."""
        self.spoiled = False
        """A block failed after writing while :attr:`bare`: only rolling the whole
        transaction back undoes what it wrote, and the unit of work does."""
        self._forget()

    @property
    def tree(self) -> Tree:
        """The Merkle tree of the log up to the head, as this transaction sees it (ADR 0083)."""
        if self._tree is None or self._tree[0] != self._head:
            self._tree = (self._head, load(self.connection, self._head))
        return self._tree[1]

    def reader(self) -> RowReader:
        """The read-model port: the projections as this transaction sees them, own writes too."""
        return RowReader(self.connection)

    def new_batch(self) -> None:
        """Let the next :meth:`stage` open a new batch, as a new transaction would.

        A served host decides several commands in one write transaction
        (group commit); each still gets its own batch, so the log is the one
        that one transaction per command would have written.
        """
        self._staged_batch = None

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Undo everything written inside the block if it raises, keep the rest.

        A savepoint opened before anything was written inside the enclosing
        one (a served request's handler, right after its idempotency look-up)
        needs no statement of its own: rolling back to the enclosing one,
        which stays open, undoes exactly what the block wrote (ADR 0061).
        So does none at all while :attr:`bare` is set.
        """
        connection = self.connection
        head, staged = self._head, self._staged_batch
        if self.bare:
            changes = connection.total_changes
            try:
                yield
            except BaseException:
                if connection.total_changes != changes:
                    self.spoiled = True
                else:
                    self._head, self._staged_batch = head, staged
                raise
            return
        depth = self._savepoints
        if depth and connection.total_changes == self._mark:
            try:
                yield
            except BaseException:
                connection.execute(_statements(depth - 1)[1])
                self._head, self._staged_batch = head, staged
                self._forget()
                raise
            return
        statements = _statements(depth)
        mark = self._mark
        connection.execute(statements[0])
        self._savepoints, self._mark = depth + 1, connection.total_changes
        try:
            yield
        except BaseException:
            connection.execute(statements[1])
            connection.execute(statements[2])
            self._head, self._staged_batch = head, staged
            self._forget()
            raise
        finally:
            self._savepoints, self._mark = depth, mark
        connection.execute(statements[2])

    def _forget(self) -> None:
        """Tell the hooks that what they wrote may be gone (a hook may skip repeats meanwhile)."""
        for hook in self.store.hooks:
            forget = getattr(hook, "forget", None)
            if forget is not None:
                forget()

    def _write(self, sealed: list[Sealed]) -> None:
        """Insert rows, move the head, run the append hooks: all in this transaction."""
        tree = self.tree  # read before the rows go in: it is the tree of the head they continue
        head = self._head
        first = sealed[0].entry.seq
        known = self._batch_row
        batch_row = write(
            self.connection,
            [(columns(item.entry), item.body) for item in sealed],
            previous=head.content_hash if head.seq == first - 1 else None,
            new_batch=sealed[0].entry.batch != head.batch,
            last=known[1] if known is not None and known[0] == head else None,
        )
        tree = extend(self.connection, tree, sealed[0].entry.seq, [item.body for item in sealed])
        last = sealed[-1].entry
        self._head = Head(seq=last.seq, content_hash=last.content_hash, batch=last.batch)
        self._tree = (self._head, tree)
        self._batch_row = None if batch_row is None else (self._head, batch_row)
        for hook in self.store.hooks:
            hook(self.connection, sealed)

    def settle(self) -> None:
        """Before the commit: write the head row and let the hooks settle, once (ADR 0033).

        Nothing is written when the transaction left the head where it found it.
        """
        head = self._head
        if head == self._opened:
            return
        if self._tree is not None and self._tree[0] == head:
            self.store.tree_cache = self._tree
        self.connection.execute(HEAD_UPSERT, (head.seq, head.content_hash, head.batch))
        for hook in self.store.hooks:
            settle = getattr(hook, "settle", None)
            if settle is not None:
                settle(self.connection, head.seq)

    def insert_verified(self, entry: Entry, body: bytes) -> None:
        """Write an already checked event verbatim (import); the caller checked the chain."""
        self._write([Sealed(entry=entry, body=body)])

    def insert_pruned(
        self, head: Head, columns: tuple[object, ...], leaf: bytes, taken: int
    ) -> None:
        """Write a pruned event's row (its columns, its kept leaf) at ``head``, its link checked.

        A shared log's prune took its bytes before this file caught up (ADR 0103, 0107).
        """
        before = self._head
        tree = self.tree
        write_pruned(
            self.connection,
            columns,
            leaf,
            taken,
            previous=before.content_hash if before.seq == head.seq - 1 else None,
        )
        rows: list[tuple[int, bytes]] = []
        tree = grow(tree, head.seq, Pruned(leaf), rows)
        if rows:
            self.connection.executemany(
                "INSERT INTO main._pwf_tree (pos, hash) VALUES (?, ?)", rows
            )
        self._head = head
        self._tree = (head, tree)
        self._batch_row = None


def _savepoint(depth: int) -> tuple[str, str, str]:
    """SAVEPOINT, ROLLBACK TO and RELEASE of the savepoint at nesting ``depth``."""
    name = f"pwf_{depth}"
    return (f"SAVEPOINT {name}", f"ROLLBACK TO {name}", f"RELEASE {name}")


_SAVEPOINTS: Final = tuple(_savepoint(depth) for depth in range(8))
"""A savepoint is named by its nesting depth, so each statement's text recurs and SQLite
prepares it once per connection (a name per savepoint made every one a new statement)."""


def _statements(depth: int) -> tuple[str, str, str]:
    return _SAVEPOINTS[depth] if depth < len(_SAVEPOINTS) else _savepoint(depth)
