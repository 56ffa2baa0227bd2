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
