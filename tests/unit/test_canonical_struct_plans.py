"""A Struct's fast path never writes other bytes than its members' object would (DOMAIN §3.1).

The encoder works out once per Struct class which fields need a look before
msgspec may write the value itself; a field it wrongly skips would let
msgspec's own digits through.  Each test makes its classes anew, so the plan
is made inside the test, and holds a value whose canonical form differs
from msgspec's: an integer past 2**53 (ECMAScript writes the double's
digits) or a large float (ECMAScript writes ``1e+21`` where msgspec writes ``1e21``).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from pwf.canonical import encode

PAST: int = 2**53 + 1
"""An integer a double cannot hold: ECMAScript writes 9007199254740992."""
WRITTEN: bytes = b"9007199254740992"


def test_a_union_field_looks_at_every_member() -> None:
    """A field typed text or integer still bounds the integer it holds."""
    either = msgspec.defstruct("Either", [("v", str | int)])
    assert b'{"v":' + WRITTEN + b"}" == encode(either(v=PAST))
    assert b'{"v":"text"}' == encode(either(v="text"))


def test_a_union_of_text_literals_and_an_integer_looks_at_the_integer() -> None:
    """Text literals need no look; the integer member beside them does."""
    mixed = msgspec.defstruct("Mixed", [("v", Literal["a", "b"] | int)])
    assert b'{"v":' + WRITTEN + b"}" == encode(mixed(v=PAST))


def test_an_integer_literal_field_is_bounded_like_an_integer() -> None:
    """A Struct checks no types when it is made, so a literal field may hold any integer."""
    level = msgspec.defstruct("Level", [("level", Literal[1, 2])])
    assert b'{"level":' + WRITTEN + b"}" == encode(level(level=PAST))
    assert b'{"level":2}' == encode(level(level=2))


def test_a_nested_struct_that_needs_a_look_is_looked_at() -> None:
    """A field declared as a Struct class whose own integer field needs bounding."""
    inner = msgspec.defstruct("Inner", [("n", int)])
    outer = msgspec.defstruct("Outer", [("inner", inner)])
    assert b'{"inner":{"n":' + WRITTEN + b"}}" == encode(outer(inner=inner(n=PAST)))


def test_a_nested_struct_met_before_its_container_is_looked_at() -> None:
    """The same when the nested class's plan was made first, on its own."""
    inner = msgspec.defstruct("Inner", [("n", int)])
    outer = msgspec.defstruct("Outer", [("inner", inner)])
    assert b'{"n":1}' == encode(inner(n=1))
    assert b'{"inner":{"n":' + WRITTEN + b"}}" == encode(outer(inner=inner(n=PAST)))


def test_fields_after_a_flat_struct_are_still_looked_at() -> None:
    """A nested Struct that needs no look ends nothing: the fields after it are checked."""
    flat = msgspec.defstruct("Flat", [("s", str)])
    outer = msgspec.defstruct("Outer", [("a", flat), ("z", int)])
    assert b'{"a":{"s":"x"},"z":' + WRITTEN + b"}" == encode(outer(a=flat(s="x"), z=PAST))


def test_a_float_field_is_written_as_ecmascript_writes_it() -> None:
    """Number::toString writes 1e+21 with its sign, and every digit below 1e21."""
    measure = msgspec.defstruct("Measure", [("v", float)])
    assert b'{"v":1e+21}' == encode(measure(v=1e21))
    assert b'{"v":123456789012345680000}' == encode(measure(v=1.2345678901234568e20))


def test_a_tag_member_sorts_with_the_fields() -> None:
    """The tag is one more member: ``kind`` sorts after ``a``."""
    tagged = msgspec.defstruct("Tagged", [("a", int)], tag="t", tag_field="kind")
    assert b'{"a":1,"kind":"t"}' == encode(tagged(a=1))


def test_a_tag_named_like_an_array_index_comes_first() -> None:
    """Array-index keys come first, in numeric order, tag or field: "10" before " "."""
    tagged = msgspec.defstruct("Indexed", [("a", int)], tag="t", tag_field="10", rename={"a": " "})
    assert b'{"10":"t"," ":1}' == encode(tagged(a=1))
