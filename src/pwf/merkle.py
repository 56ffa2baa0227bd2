"""RFC 9162 Merkle tree arithmetic over the log; imports errors (plus hashlib).

Pure: no clock, files or database.  Leaf ``i`` is the ``i``-th event of the
log in seq order and its input is the event's stored bytes (ADR 0083).

The stored form is the tree's *perfect subtrees* (every complete subtree of
``2**level`` leaves, aligned at a multiple of its width), numbered in the
order an append completes them (post-order, a Merkle mountain range's
positions): leaf ``i`` is at :func:`leaf_position` and is followed by the
nodes it completes.  Appending leaf ``i`` writes ``1 + trailing ones of i``
rows and reads none, given the *frontier* (the perfect subtrees of the tree
before it, largest first); any root, inclusion path or consistency path for
any size is then composed from O(log n) stored hashes, looked up by
position (:func:`inclusion_path`, :func:`consistency_path`, which take a
``lookup`` of ``(level, index)``).

The verifiers (:func:`verify_inclusion`, :func:`verify_consistency`) are
RFC 9162 §2.1.3.2 and §2.1.4.2 as written.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from pwf.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "STORED_LEVEL",
    "append_leaf",
    "consistency_path",
    "frontier_nodes",
    "inclusion_path",
    "leaf_hash",
    "leaf_position",
    "node_hash",
    "node_position",
    "positions_for",
    "root_from_frontier",
    "size_from_positions",
    "stored_for",
    "stored_position",
    "subtree_root",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE: Final = 32
STORED_LEVEL: Final = 4
"""The lowest level a log stores: subtrees of 16 leaves and up (ADR 0083).

A hash below it is made from at most 15 events' bytes when a proof or the
frontier needs it, so an append writes a row only when it completes a group
of 16 leaves: about one row per eight events, and a write transaction
rarely touches the tree's pages at all.
"""
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
"""The root of the tree of no leaves (RFC 9162 §2.1.1: the hash of the empty string)."""


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 ‖ data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 ‖ left ‖ right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def leaf_position(index: int) -> int:
    """Where leaf ``index`` is stored: every leaf and completed node before it come first."""
    return 2 * index - index.bit_count()


def node_position(level: int, index: int) -> int:
    """Where the perfect subtree of ``2**level`` leaves starting at leaf ``index << level`` is."""
    return leaf_position(((index + 1) << level) - 1) + level


def stored_position(level: int, index: int) -> int:
    """Where a log stores the perfect subtree ``(level, index)``, ``level >= STORED_LEVEL``.

    The stored subtrees are numbered as :func:`node_position` numbers those
    of a tree whose leaves are the groups of ``2**STORED_LEVEL`` leaves.
    """
    return node_position(level - STORED_LEVEL, index)


def stored_for(size: int) -> int:
    """How many hashes a log of ``size`` leaves stores."""
    return positions_for(size >> STORED_LEVEL)


def positions_for(size: int) -> int:
    """How many stored hashes the tree of ``size`` leaves has."""
    return 2 * size - size.bit_count()


def size_from_positions(count: int) -> int | None:
    """The tree size that stores exactly ``count`` hashes, or None when no size does."""
    # 2n - popcount(n) = count, and popcount(n) <= 64: n is count / 2 plus at most 32.
    for guess in range(count // 2, count // 2 + 34):
        if positions_for(guess) == count:
            return guess
    return None


def _largest_power_below(n: int) -> int:
    """The largest power of two strictly below ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def frontier_nodes(size: int) -> list[tuple[int, int]]:
    """The perfect subtrees ``(level, index)`` that make up the tree of ``size``, largest first."""
    nodes: list[tuple[int, int]] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            nodes.append((level, start >> level))
            start += 1 << level
    return nodes


def root_from_frontier(frontier: Sequence[bytes]) -> bytes:
    """The root of a tree from its perfect subtrees, largest first (RFC 9162's split)."""
    if not frontier:
        return EMPTY_ROOT
    root = frontier[-1]
    for left in reversed(frontier[:-1]):
        root = node_hash(left, root)
    return root


def append_leaf(
    size: int, frontier: Sequence[bytes], leaf: bytes
) -> tuple[list[bytes], list[bytes]]:
    """Add leaf hash ``leaf`` as leaf ``size``: the new frontier and the hashes to store.

    The hashes to store are the leaf's and those of the nodes it completes,
    in position order (they go at ``leaf_position(size)`` onwards).
    """
    stack = list(frontier)
    written = [leaf]
    node = leaf
    index = size
    while index & 1:
        node = node_hash(stack.pop(), node)
        written.append(node)
        index >>= 1
    stack.append(node)
    return stack, written


def subtree_root(lookup: Callable[[int, int], bytes], start: int, end: int) -> bytes:
    """The root over leaves ``[start, end)`` whose left edge is aligned (as RFC 9162 splits)."""
    width = end - start
    if width & (width - 1) == 0 and start % width == 0:
        level = width.bit_length() - 1
        return lookup(level, start >> level)
    split = _largest_power_below(width)
    return node_hash(
        subtree_root(lookup, start, start + split), subtree_root(lookup, start + split, end)
    )


def _check_size(index: int, size: int) -> None:
    if size < 1:
        raise InputError(f"tree size {size} has no leaves")
    if not 0 <= index < size:
        raise InputError(f"leaf {index} is not in the tree of {size} leaves")


def inclusion_path(lookup: Callable[[int, int], bytes], index: int, size: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 ``PATH(index, D[0:size])``, from the stored perfect subtrees.

    Raises:
        InputError: ``index`` is not a leaf of the tree of ``size``.
    """
    _check_size(index, size)
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        split = _largest_power_below(end - start)
        if index < start + split:
            path.append(subtree_root(lookup, start + split, end))
            end = start + split
        else:
            path.append(subtree_root(lookup, start, start + split))
            start += split
    path.reverse()
    return path


def consistency_path(lookup: Callable[[int, int], bytes], old: int, new: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 ``PROOF(old, D[0:new])``; empty when ``old == new``.

    Raises:
        InputError: not ``1 <= old <= new``.
    """
    if not 1 <= old <= new:
        raise InputError(f"no consistency proof from size {old} to size {new}")
    path: list[bytes] = []
    start, end, whole = 0, new, True
    while True:
        width = end - start
        if old - start == width:
            if not whole:
                path.append(subtree_root(lookup, start, end))
            break
        split = _largest_power_below(width)
        if old - start <= split:
            path.append(subtree_root(lookup, start + split, end))
            end = start + split
        else:
            path.append(subtree_root(lookup, start, start + split))
            start, whole = start + split, False
    path.reverse()
    return path


def _up(fn: int, sn: int) -> tuple[bool, int, int]:
    """One level of the verifiers' walk (RFC 9162 §2.1.3.2, §2.1.4.2).

    Whether the path's next hash is a left sibling ("if LSB(fn) is set, or if
    fn is equal to sn"), and ``fn`` and ``sn`` one level up: past left children
    first in that case ("right-shift both fn and sn equally until either
    LSB(fn) is set or fn is 0"), then right-shifted once.
    """
    left = bool(fn & 1) or fn == sn
    if left:
        while not fn & 1 and fn != 0:
            fn >>= 1
            sn >>= 1
    return left, fn >> 1, sn >> 1


def verify_inclusion(
    leaf: bytes, index: int, size: int, path: Iterable[bytes], root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2: does ``path`` prove leaf hash ``leaf`` at ``index`` under ``root``."""
    if not 0 <= index < size:
        return False
    fn, sn, result = index, size - 1, leaf
    for sibling in path:
        if len(sibling) != HASH_SIZE or sn == 0:
            return False
        left, fn, sn = _up(fn, sn)
        result = node_hash(sibling, result) if left else node_hash(result, sibling)
    return sn == 0 and result == root


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, path: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2: does ``path`` prove the tree of ``old`` is a prefix of that of ``new``."""
    if not 1 <= old <= new or any(len(item) != HASH_SIZE for item in path):
        return False
    if old == new:
        return not path and old_root == new_root
    if not path:
        return False
    items = list(path)
    if old & (old - 1) == 0:
        items.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    first = second = items[0]
    for item in items[1:]:
        if sn == 0:
            return False
        left, fn, sn = _up(fn, sn)
        if left:
            first = node_hash(item, first)
            second = node_hash(item, second)
        else:
            second = node_hash(second, item)
    return first == old_root and second == new_root and sn == 0
