"""Canonical JSON at the edges a mutation run found unpinned (DOMAIN §3.1, §3.2; ADR 0027).

Each expectation comes from the spec or from JavaScript itself
(``Number::toString``, property order, ``TextEncoder``), never from pwf's output.
"""

from __future__ import annotations

import msgspec
import pytest

from pwf import canonical
from pwf.canonical import encode
from pwf.errors import InvalidUtf8Error, LineTooLongError, NonCanonicalLineError


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.5, "0.5"),
        (0.001, "0.001"),
        (0.0123, "0.0123"),
        (2.0**53 + 2, "9007199254740994"),
        (-(2.0**53) - 2, "-9007199254740994"),
        (1.5e21, "1.5e+21"),
        (-5e-7, "-5e-7"),
    ],
)
def test_number_to_string_edges(number: float, text: str) -> None:
    """Plain notation down to 1e-6 with its leading zeros, integers past 2**53, exponents."""
    assert text == canonical.format_number(number)


def test_the_last_array_index_key_comes_first() -> None:
    """DOMAIN §3.1: 4 294 967 294 is an array index, so it precedes a key that sorts before it."""
    assert b'{"10":1,"4294967294":2,"3a":3}' == encode({"3a": 3, "4294967294": 2, "10": 1})


def test_false_is_written_as_false() -> None:
    """A JSON boolean: ``false`` in lower case, in an object and an array (no fast path)."""
    assert b'{"0":false}' == encode({"0": False})
    assert b"[false,true]" == encode((False, True))


class TestNestingDepth:
    """How deep a protocol line nests, counted over both brackets (HOST §1 depth limit)."""

    def test_objects_and_arrays_both_count(self) -> None:
        """Depth counts ``{`` as well as ``[``, below and above the limit."""
        assert 2 == canonical.nesting_depth(b'[{"a":1}]', 128)
        assert 2 == canonical.nesting_depth(b'{"a":{}}', 128)

    def test_the_walk_reads_brackets_only(self) -> None:
        """Values between brackets neither deepen nor close a level."""
        assert 2 == canonical.nesting_depth(b"[1,[2]]", 1)

    def test_a_closing_bracket_closes_one_level(self) -> None:
        """After ``[[],[]`` the depth is back to one, so ``[[]]`` inside reaches three."""
        assert 3 == canonical.nesting_depth(b"[[],[],[[]]]", 2)


class TestLoneSurrogates:
    """Canonical bytes escape only lone surrogates (DOMAIN §3.1, ADR 0027)."""

    def test_an_escaped_lone_surrogate_is_found(self) -> None:
        """``\\ud800`` escapes a lone surrogate; an escaped backslash before ``ud800`` does not."""
        assert canonical.has_lone_surrogate(b'"\\ud800"')
        assert canonical.has_lone_surrogate(b'"\\\\\\udfff"')
        assert not canonical.has_lone_surrogate(b'"\\\\ud800"')
        assert not canonical.has_lone_surrogate(b'"\\u0041"')

    def test_decode_keeps_a_lone_surrogate(self) -> None:
        """Stored bytes with a lone surrogate decode to the same one code unit."""
        assert ["\ud800", "a"] == canonical.decode(b'["\\ud800","a"]')
        assert {"a": 1} == canonical.decode(b'{"a":1}')

    def test_decode_still_refuses_bytes_that_are_not_json(self) -> None:
        """The surrogate-keeping way is only for bytes that hold a lone surrogate."""
        with pytest.raises(msgspec.DecodeError):
            canonical.decode(b'["a",')

    def test_bindable_text_carries_u_fffd(self) -> None:
        """A lone surrogate binds as Node's UTF-8 does (U+FFFD); other values are untouched."""
        assert ("a\ufffdb", 1, None, b"\xed") == canonical.bindable(["a\ud800b", 1, None, b"\xed"])


class TestCanonicalLine:
    """``canonical_line`` rewrites any JSON line into its canonical form (DOMAIN §3.1)."""

    def test_spacing_order_and_numbers_are_rewritten(self) -> None:
        """Whitespace goes, indices come first, ``1.0`` and ``1E2`` are written as numbers."""
        assert b'{"2":1,"a":[1,100]}' == canonical.canonical_line(b'{ "a" : [1.0, 1E2], "2": 1 }')

    def test_a_line_over_the_limit_is_refused(self) -> None:
        """The limit is a number of bytes, the line's own included."""
        assert b"[1]" == canonical.canonical_line(b"[1]", limit=3)
        with pytest.raises(LineTooLongError):
            canonical.canonical_line(b"[1]", limit=2)

    def test_a_byte_order_mark_is_refused(self) -> None:
        """DOMAIN §3.1: a BOM is never canonical."""
        with pytest.raises(InvalidUtf8Error, match=r"^a byte order mark is not allowed$"):
            canonical.canonical_line(b"\xef\xbb\xbf[1]")

    def test_invalid_utf8_names_its_byte(self) -> None:
        """pwf refuses invalid UTF-8 (DOMAIN §15), naming the first bad byte."""
        with pytest.raises(InvalidUtf8Error, match=r"^invalid UTF-8 at byte 2$") as caught:
            canonical.canonical_line(b'["\xff"]')
        assert 2 == caught.value.offset

    def test_a_value_without_a_canonical_form_is_refused(self) -> None:
        """A number out of double range has no canonical form."""
        with pytest.raises(NonCanonicalLineError, match=r"^no canonical JSON form: "):
            canonical.canonical_line(b"[1e999]")


class TestParseLine:
    """``parse_line`` names where a line stops being canonical."""

    def test_a_byte_order_mark_is_named(self) -> None:
        """The refusal text of a BOM, in its own case."""
        with pytest.raises(InvalidUtf8Error, match=r"^a byte order mark is not allowed$"):
            canonical.parse_line(b"\xef\xbb\xbf[1]")

    def test_invalid_utf8_names_its_byte(self) -> None:
        """The refusal names the first bad byte."""
        with pytest.raises(InvalidUtf8Error, match=r"^invalid UTF-8 at byte 1$"):
            canonical.parse_line(b"[\xff]")

    def test_the_first_difference_is_named(self) -> None:
        """The offset is the first byte where the line and its canonical form part."""
        with pytest.raises(NonCanonicalLineError, match=r"first difference at byte 3\)$") as caught:
            canonical.parse_line(b"[1, 2]")
        assert 3 == caught.value.offset

    def test_a_fraction_differs_where_it_starts(self) -> None:
        """``[1.0]`` is canonically ``[1]``: they part at the point, byte 2."""
        with pytest.raises(NonCanonicalLineError) as caught:
            canonical.parse_line(b"[1.0]")
        assert 2 == caught.value.offset
