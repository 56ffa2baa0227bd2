"""The log's Merkle tree in SQLite: kept with each append, built for older files, checked.

Imports merkle, errors and the store's types (plus sqlite3: an edge room).
``_pwf_tree`` holds the hash of every perfect subtree of 16 leaves and up
(:data:`pwf.merkle.STORED_LEVEL`) at its position: a new leaf writes the
hashes of the stored subtrees it completes, in the transaction that
appends its event, and reads nothing when the transaction knows the
frontier of the head it continues (ADR 0083); a lower subtree's hash is
made from its events' bytes.  Leaf ``i`` is the ``i``-th stored event: seq ``base + i``, where
``base`` is the log's first stored seq (1, or a compacted log's
``log.compacted``).

A file made before the tree (pwf.store.v1 without ``_pwf_tree``) gets it on
its first write, or from :func:`ensure`: the table is created and the
missing leaves are folded from the stored events, in one write transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from pwf import merkle
from pwf.errors import ChainError, InputError, StoreError
from pwf.store.sqlite_schema import TREE_DDL as TREE_SCHEMA

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterable, Iterator

    from pwf.store import Head

__all__ = [
    "EMPTY_TREE",
    "Proofs",
    "Pruned",
    "Tree",
    "append_all",
    "build",
    "check",
    "check_nodes",
    "check_origin",
    "covers",
    "current",
    "extend",
    "frontier_of",
    "grow",
    "has_table",
    "leaf_of",
    "load",
    "log_base",
    "lookup",
    "proofs",
    "read_origin",
    "set_origin",
    "size_of",
    "tree_size",
]

_INSERT: Final = "INSERT INTO {schema}._pwf_tree (pos, hash) VALUES (?, ?)"
_CHUNK: Final = 4096
_LEAVES: Final = (
    "SELECT e.seq, e.body, p.leaf FROM {schema}.events e"
    " LEFT JOIN {schema}._pwf_pruned p ON p.seq = e.seq"
)
"""Each event's bytes, or the leaf hash a prune kept of it (ADR 0103)."""


class Pruned(NamedTuple):
    """A leaf whose event's bytes a prune moved to its backup: the hash it kept (ADR 0103)."""

    leaf: bytes


def leaf_of(seq: int, body: object, kept: object) -> bytes | Pruned:
    """The leaf input of the event at ``seq``: its bytes, or the leaf hash a prune kept.

    Raises:
        ChainError: it has neither (its bytes were removed outside a prune).
    """
    if isinstance(body, bytes | memoryview):
        return bytes(body)
    if isinstance(kept, bytes | memoryview):
        return Pruned(bytes(kept))
    raise ChainError(seq, "the event has neither its bytes nor the leaf hash a prune keeps")


class Tree(NamedTuple):
    """The tree as a transaction extends it: first seq, leaves, perfect subtrees largest first."""

    base: int | None
    size: int
    frontier: tuple[bytes, ...]

    @property
    def root(self) -> bytes:
        """The root hash of the tree of :attr:`size` leaves."""
        return merkle.root_from_frontier(self.frontier)


EMPTY_TREE: Final = Tree(None, 0, ())


def has_table(connection: sqlite3.Connection, schema: str = "main") -> bool:
    """True when the file has ``_pwf_tree``."""
    found = connection.execute(
        f"SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = '_pwf_tree'"  # noqa: S608 - a constant schema name
    ).fetchone()
    return found is not None


def tree_size(connection: sqlite3.Connection, schema: str = "main") -> int | None:
    """How many leaves the stored tree covers: whole groups of ``2**STORED_LEVEL`` leaves.

    0 without the table; None when no size stores that many hashes.
    """
    if not has_table(connection, schema):
        return 0
    top = connection.execute(f"SELECT max(pos) FROM {schema}._pwf_tree").fetchone()[0]  # noqa: S608
    groups = merkle.size_from_positions(0 if top is None else top + 1)
    return None if groups is None else groups << merkle.STORED_LEVEL


def covers(stored: int | None, size: int) -> bool:
    """True when a stored tree covering ``stored`` leaves is the whole tree of ``size`` leaves."""
    return stored is not None and stored >> merkle.STORED_LEVEL == size >> merkle.STORED_LEVEL


def log_base(connection: sqlite3.Connection, schema: str = "main") -> int | None:
    """The first stored seq (leaf 0), or None for an empty log."""
    found = connection.execute(f"SELECT min(seq) FROM {schema}.events").fetchone()  # noqa: S608
    return None if found is None or found[0] is None else int(found[0])


def size_of(
    connection: sqlite3.Connection, head: Head, schema: str = "main"
) -> tuple[int | None, int]:
    """The log's first seq and how many leaves its tree has when it ends at ``head``."""
    base = log_base(connection, schema)
    return base, 0 if base is None else head.seq - base + 1


def lookup(
    connection: sqlite3.Connection, base: int | None, schema: str = "main"
) -> Callable[[int, int], bytes]:
    """Read the hash of the perfect subtree ``(level, index)`` of the log starting at ``base``.

    Levels from :data:`~pwf.merkle.STORED_LEVEL` up are stored; a lower one
    is made from its (at most 15) events' bytes.

    Raises:
        StoreError: the hash is not stored, or its events are not (the tree is shorter than asked).
    """
    select = f"SELECT hash FROM {schema}._pwf_tree WHERE pos = ?"  # noqa: S608
    bodies = _LEAVES.format(schema=schema) + " WHERE e.seq BETWEEN ? AND ? ORDER BY e.seq"

    def read(level: int, index: int) -> bytes:
        if level < merkle.STORED_LEVEL and base is not None:
            first = base + (index << level)
            found = connection.execute(bodies, (first, first + (1 << level) - 1)).fetchall()
            if len(found) == 1 << level:
                return merkle.root_from_frontier(
                    append_all([_hash(leaf_of(*row)) for row in found])
                )
        elif level >= merkle.STORED_LEVEL:
            stored = connection.execute(select, (merkle.stored_position(level, index),))
            row = stored.fetchone()
            if row is not None:
                return bytes(row[0])
        raise StoreError(f"the Merkle tree has no node at level {level}, index {index}")

    return read


def append_all(leaves: list[bytes]) -> list[bytes]:
    """The frontier of a tree of these leaf hashes."""
    frontier: list[bytes] = []
    for index, leaf in enumerate(leaves):
        frontier, _ = merkle.append_leaf(index, frontier, leaf)
    return frontier


def frontier_of(
    connection: sqlite3.Connection, base: int | None, size: int, schema: str = "main"
) -> Tree:
    """The tree of ``size`` leaves from its perfect subtrees (O(log n) rows, at most 15 events)."""
    read = lookup(connection, base, schema)
    return Tree(base, size, tuple(read(*node) for node in merkle.frontier_nodes(size)))


def load(connection: sqlite3.Connection, head: Head, schema: str = "main") -> Tree:
    """The tree of the log ending at ``head``, built first where the file lacks it (a write).

    Runs inside a write transaction: a file without the table gets it, and
    groups of leaves the stored tree lacks are folded from the events.

    Raises:
        StoreError: the stored tree is longer than the log or has no valid size.
    """
    connection.execute(TREE_SCHEMA.format(schema=schema))
    base, size = size_of(connection, head, schema)
    have = tree_size(connection, schema)
    if have is None or have > size:
        raise StoreError(
            f"the Merkle tree does not fit the {size}-event log; `pwf log verify` names the fault"
        )
    if covers(have, size):
        return frontier_of(connection, base, size, schema)
    assert base is not None
    tree = frontier_of(connection, base, have, schema)
    bodies = connection.execute(
        _LEAVES.format(schema=schema) + " WHERE e.seq >= ? ORDER BY e.seq", (base + have,)
    )
    return extend(connection, tree, base + have, (leaf_of(*row) for row in bodies), schema)


def extend(
    connection: sqlite3.Connection,
    tree: Tree,
    first_seq: int,
    bodies: Iterable[bytes | Pruned],
    schema: str = "main",
) -> Tree:
    """Append the events from ``first_seq`` on (their stored bytes) as leaves; the new tree.

    Raises:
        StoreError: ``first_seq`` is not the tree's next leaf.
    """
    insert = _INSERT.format(schema=schema)
    rows: list[tuple[int, bytes]] = []
    for body in bodies:
        tree = grow(tree, first_seq, body, rows)
        first_seq += 1
        if len(rows) >= _CHUNK:
            connection.executemany(insert, rows)
            rows = []
    if rows:
        connection.executemany(insert, rows)
    return tree


def _hash(body: bytes | Pruned) -> bytes:
    return body.leaf if type(body) is Pruned else merkle.leaf_hash(body)  # type: ignore[arg-type]


def grow(tree: Tree, seq: int, body: bytes | Pruned, rows: list[tuple[int, bytes]]) -> Tree:
    """Add the event at ``seq`` as the next leaf: the new tree; its rows go to ``rows``.

    Raises:
        StoreError: ``seq`` is not the tree's next leaf.
    """
    base = seq if tree.base is None else tree.base
    size = tree.size
    if seq != base + size:
        raise StoreError(f"seq {seq} is not leaf {size} of the Merkle tree starting at seq {base}")
    leaf = body.leaf if type(body) is Pruned else merkle.leaf_hash(body)  # type: ignore[arg-type]
    if not size & 1:  # an even leaf completes no node: it only joins the frontier (every append)
        return Tree(base, size + 1, (*tree.frontier, leaf))
    frontier, written = merkle.append_leaf(size, tree.frontier, leaf)
    if len(written) > merkle.STORED_LEVEL:
        rows.extend(
            (merkle.stored_position(level, size >> level), written[level])
            for level in range(merkle.STORED_LEVEL, len(written))
        )
    return Tree(base, size + 1, tuple(frontier))


def build(connection: sqlite3.Connection, head: Head, schema: str = "main") -> Tree:
    """Write the whole tree of a file's events anew (a compacted image, a replayed copy)."""
    connection.execute(TREE_SCHEMA.format(schema=schema))
    connection.execute(f"DELETE FROM {schema}._pwf_tree")  # noqa: S608
    return load(connection, head, schema)


def check(connection: sqlite3.Connection, schema: str = "main", after: Head | None = None) -> None:
    """Prove the stored tree is the one the stored events make, naming the first bad seq.

    Every stored hash is compared with the one recomputed from the events'
    bytes, in position order (the order appends write them).  A tree shorter
    than the log is a file not yet upgraded: its stored part is checked.
    With ``after``, a head up to which an earlier check proved the tree, only
    the hashes the later events complete are compared, grown from the
    frontier the stored tree gives at ``after`` (O(log n) reads); a tree
    that holds no frontier there is checked whole.

    Raises:
        ChainError: a stored hash differs from the log's, or the tree has more leaves than the log.
    """
    if not has_table(connection, schema):
        return
    tree, since, first = EMPTY_TREE, 0, 0
    if after is not None and after.seq:
        base, size = size_of(connection, after, schema)
        try:
            tree = frontier_of(connection, base, size, schema)
        except StoreError:
            pass  # no frontier stored at ``after``: the whole tree is checked
        else:
            since, first = after.seq, merkle.stored_for(size)
    leaves = _LEAVES.format(schema=schema) + " WHERE e.seq > ? ORDER BY e.seq"
    events = connection.execute(leaves, (since,))
    nodes = connection.execute(
        f"SELECT pos, hash FROM {schema}._pwf_tree WHERE pos >= ? ORDER BY pos",  # noqa: S608
        (first,),
    )
    check_nodes(
        ((seq, leaf_of(seq, body, kept)) for seq, body, kept in events),
        ((position, bytes(node)) for position, node in nodes),
        tree,
    )


def check_nodes(
    events: Iterable[tuple[int, bytes | Pruned]],
    nodes: Iterator[tuple[int, bytes]],
    tree: Tree = EMPTY_TREE,
) -> None:
    """Compare stored ``nodes`` (position, hash) with those ``events`` (seq, body) complete.

    Both come in the order appends write them; every backend's check reads
    its tables into this one comparison.  Nodes that end early are a tree
    not yet upgraded: what is stored is checked.  ``tree`` is where the
    events continue: the empty tree, or the frontier of a checked prefix,
    whose nodes ``nodes`` then leaves out.

    Raises:
        ChainError: the first seq whose completed node differs, or the seq
            after the last event when nodes are left over.
    """
    seq = 0 if tree.base is None else tree.base + tree.size - 1
    for seq, body in events:
        written: list[tuple[int, bytes]] = []
        tree = grow(tree, seq, body, written)
        for position, expected in written:
            stored = next(nodes, None)
            if stored is None:
                return
            if stored != (position, expected):
                raise ChainError(
                    seq,
                    f"the Merkle tree's node at position {position}, completed by this event,"
                    " is not the log's",
                )
    if next(nodes, None) is not None:
        raise ChainError(seq + 1, "the Merkle tree holds nodes past the log's last event")


class Proofs(NamedTuple):
    """Roots and proofs of the stored tree, read in the caller's snapshot (O(log n) reads each)."""

    connection: sqlite3.Connection
    base: int | None
    """The first stored seq (leaf 0)."""
    size: int
    """The tree's size at the log's head."""

    def _size(self, size: int | None) -> int:
        wanted = self.size if size is None else size
        if not 0 <= wanted <= self.size:
            raise InputError(f"the log's tree has {self.size} leaves, not {wanted}")
        return wanted

    def root(self, size: int | None = None) -> bytes:
        """The root hash of the tree of ``size`` leaves (the head's by default)."""
        wanted = self._size(size)
        if not wanted:
            return merkle.EMPTY_ROOT
        return merkle.subtree_root(lookup(self.connection, self.base), 0, wanted)

    def leaf_index(self, seq: int) -> int:
        """The leaf of the event at ``seq``.

        Raises:
            InputError: no stored event has that seq.
        """
        if self.base is None or not self.base <= seq < self.base + self.size:
            raise InputError(f"no event at seq {seq} in this log")
        return seq - self.base

    def leaf(self, index: int) -> bytes:
        """The leaf hash of leaf ``index``."""
        return lookup(self.connection, self.base)(0, index)

    def inclusion(self, index: int, size: int | None = None) -> list[bytes]:
        """The RFC 9162 inclusion path of leaf ``index`` in the tree of ``size`` leaves."""
        return merkle.inclusion_path(lookup(self.connection, self.base), index, self._size(size))

    def consistency(self, old: int, new: int | None = None) -> list[bytes]:
        """The RFC 9162 consistency path from size ``old`` to size ``new``."""
        return merkle.consistency_path(lookup(self.connection, self.base), old, self._size(new))


def proofs(connection: sqlite3.Connection, head: Head) -> Proofs:
    """Proofs over the tree of the log ending at ``head`` (read in the caller's snapshot).

    Raises:
        StoreError: the stored tree does not reach ``head`` (:func:`ensure` builds it).
    """
    base, size = size_of(connection, head)
    if not covers(tree_size(connection), size):
        raise StoreError("the log's Merkle tree is not built to its head")
    return Proofs(connection, base, size)


def current(connection: sqlite3.Connection, head: Head) -> bool:
    """True when the stored tree reaches ``head`` (read only)."""
    return covers(tree_size(connection), size_of(connection, head)[1])


def read_origin(connection: sqlite3.Connection) -> str | None:
    """The origin line that names this log in its checkpoints, if set."""
    found = connection.execute("SELECT value FROM _pwf_meta WHERE key = 'origin'").fetchone()
    return None if found is None else str(found[0])


def check_origin(origin: str) -> str:
    """An origin line: printable, without spaces at its ends, at most 255 characters.

    Raises:
        InputError: it is empty, too long or holds a control character.
    """
    if (
        not origin
        or len(origin) > _ORIGIN_LENGTH
        or origin != origin.strip()
        or any(ord(character) < 0x20 or ord(character) == 0x7F for character in origin)
    ):
        raise InputError(
            f"the origin {origin!r} must be 1 to {_ORIGIN_LENGTH} printable characters,"
            " without spaces at its ends"
        )
    return origin


def set_origin(connection: sqlite3.Connection, origin: str) -> str:
    """Keep ``origin`` unless the log has one; the log's origin (in a write transaction)."""
    connection.execute(
        "INSERT OR IGNORE INTO _pwf_meta (key, value) VALUES ('origin', ?)", (check_origin(origin),)
    )
    found = read_origin(connection)
    assert found is not None
    return found


_ORIGIN_LENGTH: Final = 255
