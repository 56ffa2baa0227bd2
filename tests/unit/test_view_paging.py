"""Windows over histories: the numbers HOST §2.8 and §2.10 fix."""

from __future__ import annotations

import pytest

from pwf import canonical
from pwf.views._paging import PAGE_BYTES, PAGE_ITEMS, centred_page, forward_page, page_start


@pytest.mark.parametrize(
    ("total", "cursor", "start"),
    [
        (300, None, 44),
        (300, 0, 0),
        (300, 150, 22),
        (300, 299, 44),
        (256, None, 0),
        (256, 255, 0),
        (0, None, 0),
        (1000, 10_000, 744),
    ],
)
def test_page_start_is_the_originals_window(total: int, cursor: int | None, start: int) -> None:
    """TV's four numbers, 256 or fewer items from 0, a cursor past the end clamped."""
    assert page_start(total, cursor) == start


def _item(size: int) -> str:
    """A JSON string whose canonical form is exactly ``size`` bytes."""
    text = "x" * (size - 2)
    assert len(canonical.encode(text)) == size
    return text


def test_limits_are_256_items_and_65536_bytes() -> None:
    assert (PAGE_ITEMS, PAGE_BYTES) == (256, 65_536)


def test_forward_page_cuts_by_bytes_with_one_byte_between_items() -> None:
    """1 000-byte items: 1 000 + 64 * 1 001 = 65 064 fits, one more does not."""
    values = [_item(1000)] * 100
    assert len(forward_page(values, lambda v: v)) == 65


def test_forward_page_keeps_exactly_65536_bytes() -> None:
    """Two items of 32 767 and 32 768 bytes plus the comma make 65 536: both stay."""
    values = [_item(32_767), _item(32_768), _item(2)]
    assert len(forward_page(values, lambda v: v)) == 2


def test_forward_page_always_holds_one_item() -> None:
    assert forward_page([_item(70_000), _item(2)], lambda v: v) == [_item(70_000)]


def test_forward_page_holds_at_most_256_items() -> None:
    assert len(forward_page(list(range(300)), lambda v: v)) == 256


def test_centred_page_of_small_items_is_the_candidate_window() -> None:
    values = list(range(300))
    window = centred_page(values, 300, 150, lambda v: v)
    assert (window["start"], window["total"]) == (22, 300)
    assert window["items"] == list(range(22, 278))


def test_centred_page_without_cursor_ends_at_the_last_item() -> None:
    window = centred_page(list(range(300)), 300, None, lambda v: v)
    assert window["start"] == 44
    assert window["items"][-1] == 299  # type: ignore[index]


def test_centred_page_grows_left_and_right_in_turn() -> None:
    """65 items of 1 000 bytes fit: the cursor's, then 32 on each side."""
    values = [f"{index:03d}" + "y" * 995 for index in range(300)]
    window = centred_page(values, 300, 150, lambda v: v)
    items = window["items"]
    assert isinstance(items, list)
    assert len(items) == 65
    assert window["start"] == 150 - 32
    assert items[32] == values[150]


def test_centred_page_at_the_left_edge_grows_right_only() -> None:
    values = [f"{index:03d}" + "y" * 995 for index in range(300)]
    window = centred_page(values, 300, 0, lambda v: v)
    assert window["start"] == 0
    assert len(window["items"]) == 65  # type: ignore[arg-type]


def test_centred_page_of_nothing() -> None:
    assert centred_page([], 0, None, lambda v: v) == {"items": [], "start": 0, "total": 0}


# The exact byte boundary of HOST §2.8: one byte under, at and one byte over 65 536, where
# the comma between two items is the byte that decides.
BOUNDARY = [(-1, 2), (0, 2), (1, 1)]
"""(bytes past 65 536 with the comma counted, items kept)."""


@pytest.mark.parametrize(("past", "kept"), BOUNDARY)
def test_forward_page_counts_the_comma_on_the_boundary(past: int, kept: int) -> None:
    """32 767 + 1 + (32 768 + past) bytes: both items fit up to 65 536 exactly, not past it."""
    values = [_item(32_767), _item(32_768 + past)]
    assert forward_page(values, lambda v: v) == values[:kept]


def test_forward_page_counts_every_comma() -> None:
    """64 items of 1 024 bytes are 65 536 bytes without their 63 commas: 63 fit with them."""
    assert len(forward_page([_item(1024)] * 100, lambda v: v)) == 63


@pytest.mark.parametrize(("past", "kept"), BOUNDARY)
@pytest.mark.parametrize("side", ["left", "right"])
def test_centred_page_takes_an_item_that_fills_65536_bytes_exactly(
    side: str, past: int, kept: int
) -> None:
    """The cursor's 32 767 bytes, a comma and its neighbour's 32 768 + past, on either side."""
    cursor, neighbour = _item(32_767), _item(32_768 + past)
    values = [neighbour, cursor] if side == "left" else [cursor, neighbour]
    at = values.index(cursor)
    window = centred_page(values, len(values), at, lambda v: v)
    expected = values if kept == 2 else [cursor]
    assert (window["items"], window["start"]) == (expected, values.index(expected[0]))


def _room_for(neighbours: int, size: int) -> str:
    """A cursor item that leaves room for exactly ``neighbours`` items of ``size`` bytes."""
    return _item(PAGE_BYTES - neighbours * (size + 1))


@pytest.mark.parametrize(
    ("room", "window"),
    [
        (1, ["L1", "C"]),
        (2, ["L1", "C", "R1"]),
        (3, ["L2", "L1", "C", "R1"]),
        (4, ["L2", "L1", "C", "R1", "R2"]),
        (5, ["L3", "L2", "L1", "C", "R1", "R2"]),
    ],
)
def test_centred_page_grows_left_first_then_right_in_turn(room: int, window: list[str]) -> None:
    """With room for one more neighbour at a time, the window takes them in the order
    left 1, right 1, left 2, right 2, left 3: the cursor's left neighbour first."""
    size = 1000
    names = ["L3", "L2", "L1", "C", "R1", "R2", "R3"]
    values = {name: f"{name}".ljust(size - 2, "-") for name in names}
    values["C"] = _room_for(room, size)
    page = centred_page([values[name] for name in names], len(names), 3, lambda v: v)
    assert [values[name] for name in window] == page["items"]
    assert names.index(window[0]) == page["start"]


def test_centred_page_grows_on_one_side_once_the_other_is_full() -> None:
    """A neighbour that does not fit ends that side; the other side still grows to the limit."""
    big, small = _item(65_436), _item(100)  # 100 + 1 + 65 436 is one byte over
    values = [small, big, _item(100), small, small, small]
    page = centred_page(values, len(values), 2, lambda v: v)
    assert page["items"] == values[2:]
    assert page["start"] == 2
