"""Hypothesis properties of pwf.canonical: fast path, fixpoint, RFC 8785 and Node differentials.

The JSON strategy deliberately reaches the corners where the original's
output differs from a naive sorted ``json.dumps``: array-index keys, keys at
or above U+E000 and astral keys (UTF-16 order differs from code point order),
``__proto__`` members, lone surrogates, doubles of every magnitude, integers
beyond 2**53 and absent (``MISSING``) members.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwf import canonical
from pwf.canonical import MISSING, encode, parse_line

if TYPE_CHECKING:
    from tests._depth import examples
else:
    from _depth import examples

SETTINGS = settings(
    max_examples=examples(quick=100, deep=300),  # ADR 0049
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# --------------------------------------------------------------------------- strategies

INDEX_LIKE_KEYS = ["0", "7", "10", "2", "4294967294", "4294967295", "01", "-1", "00", "-0"]
SPECIAL_KEYS = [
    "",
    "a",
    "B",
    "b",
    "\u00e9",
    "__proto__",
    "\ud7ff",
    "\ue000",
    "\uffff",
    "\U00010000",
    "\U0010ffff",
    "\U0001f600",
]
SPECIAL_FLOATS = [
    0.0,
    -0.0,
    1e21,
    -1e21,
    1e20,
    1e-6,
    1e-7,
    -1e-7,
    9.99e-7,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    0.1 + 0.2,
    float(2**53),
    float(2**53 + 2),
    1.5e300,
    123e-20,
    4.35,
    0.5,
]
SPECIAL_INTS = [0, -1, 2**31, 2**53 - 1, 2**53, 2**53 + 1, -(2**53) - 1, 2**64, 10**21, 10**21 + 1]

_INDEX_LIKE = re.compile(r"-?[0-9]+")


def _chars(*, surrogates: bool) -> st.SearchStrategy[str]:
    """One text chunk: a character, or a surrogate pair written as two code points."""
    options: list[st.SearchStrategy[str]] = [
        st.characters(codec="utf-8"),
        st.characters(max_codepoint=0x7F),
        st.sampled_from(["\x00", "\x1f", "\x7f", "\u2028", "\u2029", '"', "\\", "/", "\n"]),
        st.characters(min_codepoint=0xE000, max_codepoint=0xFFFF, codec="utf-8"),
        st.characters(min_codepoint=0x10000, codec="utf-8"),
    ]
    if surrogates:
        options.append(st.integers(0xD800, 0xDFFF).map(chr))
        options.append(st.sampled_from(["\ud83d\ude00", "\ud800\udc00", "\udbff\udfff"]))
    return st.one_of(options)


def _texts(*, surrogates: bool, max_size: int = 6) -> st.SearchStrategy[str]:
    return st.lists(_chars(surrogates=surrogates), max_size=max_size).map("".join)


def _keys(*, surrogates: bool, index_like: bool, proto: bool) -> st.SearchStrategy[str]:
    specials = [key for key in SPECIAL_KEYS if proto or key != "__proto__"]
    options = [st.sampled_from(specials), _texts(surrogates=surrogates, max_size=4)]
    if index_like:
        options.append(st.sampled_from(INDEX_LIKE_KEYS))
        options.append(st.integers(0, 2**33).map(str))
    keys = st.one_of(options)
    if not index_like:
        keys = keys.filter(lambda key: not _INDEX_LIKE.fullmatch(key))
    if not proto:
        keys = keys.filter(lambda key: key != "__proto__")
    return keys


def _js_key(key: str) -> str:
    """The key as JavaScript sees it: surrogate pairs written as two code points are joined."""
    return key.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


def _distinct_in_js(members: dict[str, Any]) -> bool:
    # {"\ud83d\ude00": …, "😀": …} are two Python keys but one JavaScript key.
    return len({_js_key(key) for key in members}) == len(members)


def json_values(  # noqa: PLR0913 - one switch per corner case
    *,
    surrogates: bool = True,
    index_like: bool = True,
    proto: bool = True,
    missing: bool = True,
    floats: bool = True,
    max_int: int = 2**80,
) -> st.SearchStrategy[Any]:
    """JSON-like Python values as pwf accepts them, with the requested corner cases."""
    doubles = st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(SPECIAL_FLOATS),
        st.integers(-(10**22), 10**22).map(float),
    )
    safe = min(2**53, max_int)
    ints = st.one_of(
        st.integers(-safe, safe),
        st.integers(-max_int, max_int),
        st.sampled_from([n for n in SPECIAL_INTS if abs(n) <= max_int]),
    )
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        ints,
        doubles if floats else ints,
        _texts(surrogates=surrogates),
    )
    keys = _keys(surrogates=surrogates, index_like=index_like, proto=proto)

    def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        members = st.one_of(children, st.just(MISSING)) if missing else children
        return st.one_of(
            st.lists(children, max_size=5),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(keys, members, max_size=6).filter(_distinct_in_js),
        )

    return st.recursive(leaves, containers, max_leaves=20)


def slow(value: object) -> bytes:
    """The exact path alone, never msgspec."""
    out: list[str] = []
    canonical._value(value, out)
    return "".join(out).encode()


# --------------------------------------------------------------------------- (1), (2): paths


@SETTINGS
@given(json_values())
def test_fast_path_agrees_with_slow_path(value: Any) -> None:
    """Encoding picks msgspec only when it writes exactly what the exact path writes."""
    assert slow(value) == encode(value)


@SETTINGS
@given(
    json_values(
        missing=False, index_like=False, proto=False, surrogates=False, floats=False, max_int=2**53
    )
)
def test_fast_path_agrees_with_slow_path_on_plain_values(value: Any) -> None:
    """Values that mostly stay on the msgspec path match the exact path byte for byte."""
    assert slow(value) == encode(value)


@SETTINGS
@given(json_values())
def test_canonical_output_is_a_fixpoint_of_parse_line(value: Any) -> None:
    """Canonical bytes parse as a canonical line and re-encode to themselves."""
    # MISSING and __proto__ are kept in the strategy: they never reach the
    # output, so the property holds for them too.  Numbers pass through
    # doubles, hence encode(parse(encode(v))) rather than parse(encode(v)) == v.
    line = encode(value)
    parsed = parse_line(line)
    assert line == encode(parsed)


class Box(msgspec.Struct, rename="camel", omit_defaults=True):
    """A Struct carrying arbitrary JSON beside planned fields."""

    item_count: int
    payload: Any = None
    label: str | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


def _box_members(box: Box) -> dict[str, object]:
    members: dict[str, object] = {"itemCount": box.item_count}
    if box.payload is not None:
        members["payload"] = box.payload
    if box.label is not None:
        members["label"] = box.label
    if box.extra:
        members["extra"] = box.extra
    return members


@SETTINGS
@given(
    st.builds(
        Box,
        item_count=st.one_of(st.integers(-(2**53), 2**53), st.integers(-(2**70), 2**70)),
        payload=json_values(),
        label=st.none() | _texts(surrogates=True),
        extra=st.dictionaries(
            _keys(surrogates=True, index_like=True, proto=True), json_values()
        ).filter(_distinct_in_js),
    )
)
def test_struct_encodes_like_its_members(box: Box) -> None:
    """A Struct encodes like the exact path and like the dict of the members msgspec writes."""
    expected = encode(_box_members(box))
    assert expected == encode(box)
    assert expected == slow(box)


# --------------------------------------------------------------------------- (3) RFC 8785

# RFC 8785 (JCS) shares JSON.stringify's string escaping and number
# formatting, and sorts keys by UTF-16 code units, so on the common ground it
# must agree with the original byte for byte.  The ground is restricted
# because the original is not JCS everywhere:
# * array-index keys are emitted first by JavaScript objects, JCS sorts them
#   as text (so every key of digits, or "-" and digits, is left out);
# * `__proto__` members vanish in the original, JCS keeps them; MISSING has
#   no JCS form at all;
# * lone surrogates are escaped as \udxxx by the original, the rfc8785
#   package refuses them (and surrogate pairs given as two code points);
# * the rfc8785 package refuses Python ints outside ±(2**53 - 1) instead of
#   rounding them to a double as JavaScript does, so ints stay inside.
# Floats need no restriction: rfc8785 implements ECMAScript Number::toString
# from Python's repr (shortest round-trip digits), the same source as pwf.


@SETTINGS
@given(
    json_values(surrogates=False, index_like=False, proto=False, missing=False, max_int=2**53 - 1)
)
def test_agrees_with_rfc8785_on_common_ground(value: Any) -> None:
    """Where JCS and the original coincide, the rfc8785 package writes the same bytes."""
    assert rfc8785.dumps(value) == encode(value)


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_formatting_agrees_with_rfc8785(number: float) -> None:
    """Every finite double prints as ECMAScript Number::toString, which JCS also uses."""
    assert rfc8785.dumps(number).decode() == canonical.format_number(number)


# --------------------------------------------------------------------------- (4) Node

# The oracle does what the original does: copy the value into fresh objects
# with keys inserted in default-sort order (skipping undefined members), then
# JSON.stringify.  Assigning `copy["__proto__"] = …` sets the prototype (or is
# ignored for primitives) instead of creating an own property, so the member
# vanishes exactly as in the original.  Values arrive as Python
# `json.dumps(..., ensure_ascii=True)`: lone surrogates travel as \udxxx
# escapes, doubles as their repr (read back exactly by JSON.parse), and ints
# beyond 2**53 as digits that JSON.parse rounds to the nearest double just as
# the original's Number conversion does.  MISSING travels as a sentinel text.
# The answer is the hex of the UTF-8 bytes; Node 12+ escapes lone surrogates
# in JSON.stringify, so its output is well-formed and converts losslessly.
MISSING_SENTINEL = "\u0000pwf:missing\u0000"
NODE_ORACLE = r"""
"use strict";
const readline = require("readline");
const MISSING = "\u0000pwf:missing\u0000";
function normalise(value) {
  if (value === MISSING) throw new Error("JSON arrays cannot hold an absent element");
  if (Array.isArray(value)) return value.map(normalise);
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new Error("JSON numbers must be finite");
  }
  if (value !== null && typeof value === "object") {
    const copy = {};
    for (const key of Object.keys(value).sort()) {
      const item = value[key];
      if (item === MISSING) continue;
      copy[key] = normalise(item);
    }
    return copy;
  }
  return value;
}
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  let answer;
  try {
    const text = JSON.stringify(normalise(JSON.parse(line)));
    answer = { hex: Buffer.from(text, "utf8").toString("hex") };
  } catch (error) {
    answer = { error: String(error && error.message) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
"""

NodeOracle = Callable[[object], bytes]


def _to_wire(value: object) -> str:
    def default(item: object) -> object:
        if item is MISSING:
            return MISSING_SENTINEL
        raise TypeError(type(item).__name__)

    return json.dumps(value, ensure_ascii=True, allow_nan=False, default=default)


@pytest.fixture(scope="session")
def node_oracle() -> Iterator[NodeOracle]:
    """One long-lived `node` process answering one canonicalisation per line."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    with subprocess.Popen(
        [node, "-e", NODE_ORACLE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as process:
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None
        assert stdout is not None

        def ask(value: object) -> bytes:
            stdin.write(_to_wire(value).encode("ascii") + b"\n")
            stdin.flush()
            answer = json.loads(stdout.readline())
            if "error" in answer:
                raise AssertionError(f"node refused the value: {answer['error']}")
            return bytes.fromhex(answer["hex"])

        try:
            yield ask
        finally:
            stdin.close()
            process.wait(timeout=10)


def test_node_oracle_reproduces_the_scenario_examples(node_oracle: NodeOracle) -> None:
    """The oracle itself yields the DOMAIN §3.1 key order and `__proto__` behaviour."""
    assert b'{"2":3,"10":2,"-1":5,"01":4,"b":1}' == node_oracle(
        {"b": 1, "10": 2, "2": 3, "01": 4, "-1": 5}
    )
    assert b'{"a":1}' == node_oracle({"__proto__": 1, "a": 1})
    assert b'{"b":2}' == node_oracle({"__proto__": {"x": 1}, "b": 2, "c": MISSING})
    assert b'["\\ud800",9007199254740992]' == node_oracle(["\ud800", 2**53 + 1])


@SETTINGS
@given(json_values())
def test_agrees_with_node(node_oracle: NodeOracle, value: Any) -> None:
    """pwf writes exactly the bytes of the original's normalise-then-JSON.stringify."""
    assert node_oracle(value) == encode(value)


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_formatting_agrees_with_node(node_oracle: NodeOracle, number: float) -> None:
    """Every finite double prints as JavaScript's Number::toString."""
    assert math.isfinite(number)
    assert node_oracle(number).decode() == canonical.format_number(number)
