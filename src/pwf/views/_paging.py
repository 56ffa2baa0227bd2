"""Byte- and item-bounded windows over a history (HOST §2.8, §2.10).

Pure: lists in, windows out.  A window holds at most :data:`PAGE_ITEMS`
items and :data:`PAGE_BYTES` bytes of canonical JSON (one byte more per
item after the first, as the items are joined by commas).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

from pwf import canonical

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "PAGE_BYTES",
    "PAGE_ITEMS",
    "Window",
    "centred_page",
    "forward_page",
    "page_start",
]

PAGE_ITEMS: Final = 256
PAGE_BYTES: Final = 65_536

T = TypeVar("T")

Window = dict[str, object]
"""``{start, total, items}``."""


def _size(item: object) -> int:
    return len(canonical.encode(item))


def forward_page(values: Sequence[T], project: Callable[[T], object]) -> list[object]:
    """Items from the front while they fit; always at least one when there is one."""
    items: list[object] = []
    used = 0
    for value in values:
        if len(items) >= PAGE_ITEMS:
            break
        item = project(value)
        size = _size(item) + (1 if items else 0)
        if items and used + size > PAGE_BYTES:
            break
        items.append(item)
        used += size
    return items


def page_start(total: int, cursor: int | None = None) -> int:
    """Where the candidate window of a history starts (the original's ``workflowPageStart``).

    At most 256 items: all of them from 0; without a cursor, the last 256;
    otherwise 128 before the cursor, kept inside the history.
    """
    if total <= PAGE_ITEMS:
        return 0
    if cursor is None:
        return total - PAGE_ITEMS
    centre = _clamp(cursor, total)
    return min(max(0, centre - PAGE_ITEMS // 2), total - PAGE_ITEMS)


def _clamp(cursor: int, total: int) -> int:
    return 0 if total == 0 else min(cursor, total - 1)


def centred_page(
    values: Sequence[T], total: int, cursor: int | None, project: Callable[[T], object]
) -> Window:
    """The window around ``cursor`` of a history whose whole length is ``total``.

    ``values`` is the candidate range of :func:`page_start`; the window grows
    outward from the cursor (the last item without one), left then right in
    turn, until 256 items or 65 536 bytes.
    """
    start = page_start(total, cursor)
    candidates = values[start : start + PAGE_ITEMS]
    if not candidates:
        return {"items": [], "start": start, "total": total}
    wanted = _clamp(total - 1 if cursor is None else cursor, total)
    local = min(max(0, wanted - start), len(candidates) - 1)
    chosen = {local: project(candidates[local])}
    used = _size(chosen[local])
    left, right = local - 1, local + 1
    blocked = {True: False, False: False}
    prefer_left = True
    while len(chosen) < PAGE_ITEMS and not (blocked[True] and blocked[False]):
        index = left if prefer_left else right
        if 0 <= index < len(candidates):
            item = project(candidates[index])
            size = _size(item) + 1
            if used + size > PAGE_BYTES:
                blocked[prefer_left] = True
            else:
                chosen[index] = item
                used += size
                if prefer_left:
                    left -= 1
                else:
                    right += 1
        else:
            blocked[prefer_left] = True
        prefer_left = not prefer_left
    ordered = sorted(chosen)
    return {
        "items": [chosen[index] for index in ordered],
        "start": start + ordered[0],
        "total": total,
    }
