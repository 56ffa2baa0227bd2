"""The shared log's Merkle tree in PostgreSQL: its frontier, its upgrade and its check.

Imports psycopg, merkle, errors and the SQLite tree's pure parts
(:class:`pwf.store.tree.Tree`, :func:`pwf.store.tree.grow`).  The rows of a
batch's tree go in the statement that writes its events (ADR 0083), so a
writer needs the frontier of the head it continues: kept from its last
write, else read in one query of O(log n) rows by primary key and one of the
at most 15 events after the last whole group of 16.  A log made before the
tree gets it from ``pwf init --store``, under the log's lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import merkle
from pwf.errors import StoreError
from pwf.store.postgres.edge import as_bytes
from pwf.store.rows import BODY
from pwf.store.tree import EMPTY_TREE, Pruned, Tree, check_nodes, grow, leaf_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg
    from psycopg.rows import TupleRow

    from pwf.store import Head

__all__ = ["SIZES", "TREE_SCHEMA", "build", "check", "load", "tree_rows"]

TREE_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS _pwf_tree ("
    "pos BIGINT PRIMARY KEY, hash BYTEA NOT NULL CHECK (length(hash) = 32))"
)
_INSERT: Final = "INSERT INTO _pwf_tree (pos, hash) VALUES (%s, %s)"
SIZES: Final = "SELECT (SELECT min(seq) FROM _pwf_events), (SELECT max(pos) FROM _pwf_tree)"
"""The log's first seq and the stored tree's last position, each from a primary key."""
_CHUNK: Final = 4096

_LEAVES: Final = (
    "SELECT e.seq, e.body, p.leaf FROM events e LEFT JOIN _pwf_pruned p ON p.seq = e.seq"
)
"""Each event's bytes, or the leaf hash a prune kept of it (ADR 0103)."""


def _leaf(seq: object, body: object, kept: object) -> bytes | Pruned:
    """What a leaf is made of: the event's bytes, or the leaf a prune kept."""
    return leaf_of(
        int(str(seq)),
        None if body is None else as_bytes(body),
        None if kept is None else as_bytes(kept),
    )


def _sizes(
    connection: psycopg.Connection[TupleRow], head: Head
) -> tuple[int | None, int, int | None]:
    """The first seq, the log's size at ``head``, and the leaves the stored tree covers.

    The first seq is read from ``_pwf_events``' primary key: PostgreSQL plans
    ``min(seq)`` of the ``events`` view (ADR 0102) as a scan of the whole log,
    about 50 ms at 100 000 events, which a writer whose cached tree is stale
    paid under the log's lock (ADR 0106).
    """
    row = connection.execute(SIZES).fetchone()
    assert row is not None
    base = None if row[0] is None else int(row[0])
    top = row[1]
    size = 0 if base is None else head.seq - base + 1
    groups = merkle.size_from_positions(0 if top is None else int(top) + 1)
    return base, size, None if groups is None else groups << merkle.STORED_LEVEL


def load(connection: psycopg.Connection[TupleRow], head: Head, where: str) -> Tree:
    """The tree of the log ending at ``head`` (any head it has had), read from its frontier.

    Raises:
        StoreError: the stored tree does not reach ``head`` (a log made before
            the tree: ``pwf init --store`` builds it) or does not fit the log.
    """
    base, size, have = _sizes(connection, head)
    if have is None:
        raise StoreError(
            f"{where}: the Merkle tree does not fit the log; `pwf log verify` names it"
        )
    if have >> merkle.STORED_LEVEL < size >> merkle.STORED_LEVEL:
        raise StoreError(
            f"{where}: the log's Merkle tree stops at {have} of {size} events;"
            " run `pwf init --store` to build it"
        )
    # A longer tree: ``head`` is one a writer decided against before another moved it.
    return _frontier(connection, base, size)


def _frontier(connection: psycopg.Connection[TupleRow], base: int | None, size: int) -> Tree:
    """The stored subtrees of the tree of ``size``, then the events after its last whole group."""
    whole = size >> merkle.STORED_LEVEL << merkle.STORED_LEVEL
    nodes = merkle.frontier_nodes(whole)
    positions = [merkle.stored_position(level, index) for level, index in nodes]
    select = "SELECT pos, hash FROM _pwf_tree WHERE pos = ANY(%s)"
    found = {int(pos): as_bytes(value) for pos, value in connection.execute(select, (positions,))}
    if len(found) != len(positions):
        raise StoreError(f"the Merkle tree lacks a node of the tree of {size} leaves")
    tree = Tree(base, whole, tuple(found[position] for position in positions))
    if whole == size:
        return tree
    assert base is not None
    rows = connection.execute(
        _LEAVES + " WHERE e.seq BETWEEN %s AND %s ORDER BY e.seq",
        (base + whole, base + size - 1),
    ).fetchall()
    ignored: list[tuple[int, bytes]] = []
    for seq, body, kept in rows:
        tree = grow(tree, int(seq), _leaf(seq, body, kept), ignored)
    if tree.size != size:
        raise StoreError(f"the log lacks events of the tree of {size} leaves")
    return tree


def build(connection: psycopg.Connection[TupleRow], head: Head) -> int:
    """Fold the events the stored tree lacks into it (under the log's lock); how many."""
    connection.execute(TREE_SCHEMA)
    base, size, have = _sizes(connection, head)
    if have is None or have > size:
        connection.execute("DELETE FROM _pwf_tree")
        have = 0
    if have >> merkle.STORED_LEVEL == size >> merkle.STORED_LEVEL:
        return 0
    assert base is not None
    tree = _frontier(connection, base, have) if have else EMPTY_TREE
    rows: list[tuple[int, bytes]] = []
    with connection.cursor(name="pwf_tree_build") as cursor:
        cursor.itersize = _CHUNK
        cursor.execute(_LEAVES + " WHERE e.seq >= %s ORDER BY e.seq", (base + have,))
        for found, body, kept in cursor:
            tree = grow(tree, int(found), _leaf(found, body, kept), rows)
            if len(rows) >= _CHUNK:
                connection.cursor().executemany(_INSERT, rows)
                rows = []
    if rows:
        connection.cursor().executemany(_INSERT, rows)
    return size - have


def tree_rows(
    tree: Tree, rows: Sequence[tuple[object, ...]]
) -> tuple[Tree, list[tuple[int, bytes]]]:
    """The tree after the event rows ``rows`` (of :data:`~pwf.store.rows.COLUMNS`), and its rows."""
    written: list[tuple[int, bytes]] = []
    for row in rows:
        tree = grow(tree, int(str(row[0])), as_bytes(row[BODY]), written)
    return tree, written


def check(connection: psycopg.Connection[TupleRow], after: Head | None = None) -> None:
    """Prove the stored tree is the one the events make (in the caller's snapshot).

    With ``after``, a head up to which an earlier check proved the tree, only
    the nodes the later events complete, grown from the frontier at ``after``,
    as :func:`pwf.store.tree.check` does.

    Raises:
        ChainError: the first seq whose completed node differs.
    """
    if connection.execute("SELECT to_regclass('_pwf_tree')").fetchone() == (None,):
        return
    tree, since, first = EMPTY_TREE, 0, 0
    if after is not None and after.seq:
        base, size, _ = _sizes(connection, after)
        try:
            tree = _frontier(connection, base, size)
        except StoreError:
            pass  # no frontier stored at ``after``: the whole tree is checked
        else:
            since, first = after.seq, merkle.stored_for(size)
    with (
        connection.cursor(name="pwf_tree_events") as events,
        connection.cursor(name="pwf_tree_nodes") as nodes,
    ):
        events.itersize = nodes.itersize = _CHUNK
        events.execute(_LEAVES + " WHERE e.seq > %s ORDER BY e.seq", (since,))
        nodes.execute("SELECT pos, hash FROM _pwf_tree WHERE pos >= %s ORDER BY pos", (first,))
        check_nodes(
            ((int(seq), _leaf(seq, body, kept)) for seq, body, kept in events),
            ((int(position), as_bytes(node)) for position, node in nodes),
            tree,
        )
