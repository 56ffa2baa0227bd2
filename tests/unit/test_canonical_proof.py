"""``parse_line``'s proof by msgspec accepts and refuses exactly what the exact check does.

:func:`pwf.canonical.parse_line` first tries to prove a line canonical from
msgspec's sorted encoding and a scan of its bytes (ADR 0063); whatever it
cannot prove goes to the exact check (decode, re-encode by the exact rules,
compare).  Each test here runs every line through both: ``parse_line`` as it
is, and ``parse_line`` with the proof switched off, and requires the same
value (types and signs included) or the same error, message and offset.

The lines are canonical encodings of the property tests' hostile values,
the same values written by ``json.dumps`` in other key orders, escapes and
number forms, canonical lines with one change (whitespace, a duplicate
member, another number form, an escape, a flipped byte), token soup, deep
nesting, and every single-byte flip of the events the fault corpus damages.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from pwf import canonical
from pwf.canonical import MISSING, encode, parse_line
from pwf.errors import CanonicalError, InputError, LineError
from pwf.events import open_body

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.unit.test_canonical_properties import SETTINGS, json_values
else:
    from test_canonical_properties import SETTINGS, json_values

Outcome = tuple[str, str, object]


def _outcome(parse: Callable[[bytes], object], line: bytes) -> Outcome:
    """What parsing ``line`` gives: the value shown with its types, or the error."""
    try:
        value = parse(line)
    except LineError as error:
        return (type(error).__name__, str(error), error.offset)
    except InputError as error:  # open_body's typed data
        return (type(error).__name__, str(error), None)
    return ("value", _typed(value), None)


def _typed(value: object) -> str:
    """``repr`` with every number's type and sign visible (``1`` and ``1.0``, ``0.0`` and ``-0.0``).

    Written without recursion: the values nest as deep as the interpreter allows.
    """
    out: list[str] = []
    stack: list[tuple[bool, object]] = [(False, value)]
    while stack:
        written, item = stack.pop()
        if written:
            out.append(str(item))
        elif isinstance(item, dict):
            out.append("{")
            stack.append((True, "}"))
            for key, child in reversed(item.items()):
                stack.extend([(True, ","), (False, child), (True, f"{key!r}:")])
        elif isinstance(item, list):
            out.append("[")
            stack.append((True, "]"))
            for child in reversed(item):
                stack.extend([(True, ","), (False, child)])
        else:
            out.append(f"{type(item).__name__}:{item!r}")
    return "".join(out)


def _exact(line: bytes) -> object:
    with mock.patch.object(canonical, "_proven", return_value=MISSING):
        return parse_line(line)


def _fast(line: bytes) -> object:
    """``parse_line`` as it is, called from as deep a stack as :func:`_exact` calls it."""
    with contextlib.nullcontext():
        return parse_line(line)


def _same(line: bytes) -> None:
    assert _outcome(_fast, line) == _outcome(_exact, line), line


def test_the_proof_is_taken_for_plain_lines() -> None:
    """A canonical line without the exact encoder's corner cases is proven, not walked."""
    line = encode({"a": [1, -2, 0.5, 1.5e-7, "x\n\u00e9"], "b": {"c": None, "d": True}})
    assert canonical._proven(line) == json.loads(line)
    with mock.patch.object(canonical, "_exact", side_effect=AssertionError):
        assert parse_line(line) == json.loads(line)


def test_msgspec_escapes_every_character_as_the_exact_encoder() -> None:
    """The proof's premise: msgspec writes each code point but the surrogates as the exact path."""
    for start in range(0, 0x110000, 0x1000):
        text = "".join(
            chr(point) for point in range(start, start + 0x1000) if not 0xD800 <= point <= 0xDFFF
        )
        assert canonical._ENCODER.encode(text) == canonical._string(text).encode(), hex(start)


NEAR_MISSES = [
    b"1",
    b"1.0",
    b"1e2",
    b"1E2",
    b"-0",
    b"-0.0",
    b"0.7",
    b"1e21",
    b"1e+21",
    b"1.5e-7",
    b"100",
    b"9007199254740992",
    b"9007199254740993",
    b"-9007199254740993",
    b"12345678901234567890",
    b"1" * 400,
    b"1e400",
    b'{"a":1,"a":1}',
    b'{"b":1,"a":2}',
    b'{"0":1,"a":2}',
    b'{"a":2,"0":1}',
    b'{"10":1,"9":2}',
    b'{"9":2,"10":1}',
    b'{"01":1}',
    b'{"__proto__":1}',
    b'{"__proto__":{"a":1},"b":2}',
    b'{"b":2}',
    b'["0","1"]',
    b'{"a":["0"]}',
    b'{"a":"x,","0":1}',
    '{"\ue000":1,"\U0001f600":2}'.encode(),
    '{"\U0001f600":2,"\ue000":1}'.encode(),
    '{"a":"\U0001f600"}'.encode(),
    '{"\ud7ff":1}'.encode(),
    '{"a":"\U0001f600","b":"\ue000"}'.encode(),
    '{"a":"\U0001f600\\":"}'.encode(),
    '{"a":"\U0001f600\\\\","\ue000":1}'.encode(),
    '{"\U0001f600\\\\":1}'.encode(),
    '{"\U0001f600\\"":1}'.encode(),
    '{"x\\"\U0001f600":1,"a":2}'.encode(),
    '["\U0001f600","\ue000"]'.encode(),
    '{"\ue000\\"":1,"\U0001f600\\"":2}'.encode(),
    '{"\U0001f600\\"":2,"\ue000\\"":1}'.encode(),
    '{"\ud000":1,"a":"\ud000"}'.encode(),
    b'"\\u00e9"',
    b'"\\u00E9"',
    '"\u00e9"'.encode(),
    b'"\\ud800"',
    b'"\\uD800"',
    b'"\\ud83d\\ude00"',
    b'"\\/"',
    b'"\\u001f"',
    b'"\\u001F"',
    b'"\x7f"',
    b'{"a": 1}',
    b' {"a":1}',
    b'{"a":1} ',
    b'{"a":1}\n',
    b"[1,2,]",
    b"",
    b"nul",
    b"[" * 64 + b"]" * 64,
    b"[" * 65 + b"]" * 65,
    b"[" * 1000 + b"]" * 1000,
    b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 70 + b"1" + b"}" * 70,
    b"\xef\xbb\xbf{}",
    b'"\xff"',
    b'{"a":1,"b":9007199254740993}',
    b'{"a":1,"b":"9007199254740993"}',
    b'{"a":"12:1234567890123456"}',
    b'{"a":[1234567890123456,1]}',
]


def test_near_misses() -> None:
    """Hand-picked lines on both sides of each rule the proof relies on."""
    for line in NEAR_MISSES:
        _same(line)


def test_nesting_up_to_and_past_the_interpreter_s_limit() -> None:
    """Where msgspec and the exact walk run out of stack, at depths around the recursion limit."""
    limit = sys.getrecursionlimit()
    for depth in range(limit - 250, limit + 10):
        _same(b"[" * depth + b"]" * depth)
    for depth in range(limit - 250, limit + 10, 7):
        _same(b'{"a":' * depth + b"1" + b"}" * depth)


@SETTINGS
@given(json_values())
def test_canonical_encodings_of_hostile_values(value: Any) -> None:
    """Every corner value's canonical line: accepted alike, with the same value."""
    try:
        line = encode(value)
    except CanonicalError:
        return
    _same(line)


@SETTINGS
@given(json_values(missing=False), st.booleans(), st.booleans())
def test_other_writers_of_the_same_values(value: Any, ascii_only: bool, sort_keys: bool) -> None:
    """``json.dumps`` in other key orders, escapes and number forms: judged alike."""
    try:
        text = json.dumps(
            value, ensure_ascii=ascii_only, sort_keys=sort_keys, separators=(",", ":")
        )
    except ValueError:  # a float json cannot write
        return
    _same(text.encode("utf-8", "surrogatepass"))


EDITS = st.sampled_from(["space", "duplicate", "number", "escape", "flip", "cut"])


@SETTINGS
@given(json_values(missing=False), EDITS, st.integers(0, 10_000), st.integers(0, 255))
def test_canonical_lines_with_one_change(value: Any, edit: str, where: int, byte: int) -> None:
    """A canonical line with one edit of the kind a hand or a damaged disk makes."""
    try:
        line = encode(value)
    except CanonicalError:
        return
    at = where % (len(line) + 1)
    changed = {
        "space": line[:at] + b" " + line[at:],
        "duplicate": _duplicated(line),
        "number": line.replace(b"1", [b"1.0", b"1e0", b"01", b"-0", b"1E+0"][byte % 5], 1),
        "escape": line.replace(b"a", [b"\\u0061", b"\\u0041"][byte % 2], 1),
        "flip": line[:at] + bytes([line[at] ^ (1 << byte % 8)]) + line[at + 1 :]
        if at < len(line)
        else line + bytes([byte]),
        "cut": line[:at],
    }[edit]
    _same(changed)


def _duplicated(line: bytes) -> bytes:
    """The line with its object's first member written twice (itself when it has none)."""
    if not line.startswith(b"{") or line == b"{}":
        return line
    first = line[1:].split(b",", 1)[0].rstrip(b"}")
    return b"{" + first + b"," + line[1:]


TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b" ",
    b"0",
    b"1",
    b"-",
    b".",
    b"e",
    b"E",
    b"+",
    b"7" * 16,
    b'"a"',
    b'"b"',
    b'"0"',
    b'"9"',
    b'"10"',
    b'"__proto__"',
    b'"\\u0041"',
    b'"\\ud800"',
    b'"\\ud83d\\ude00"',
    '"\ue000"'.encode(),
    '"\U0001f600"'.encode(),
    b"true",
    b"null",
    b'"',
    b"\\",
]


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=24))
def test_token_soup(tokens: list[bytes]) -> None:
    """Lines made of JSON's pieces, mostly not JSON at all."""
    _same(b"".join(tokens))


def test_every_flip_of_the_fault_corpus_events(tmp_path: Path, fill: Any) -> None:
    """Each event the fault corpus damages, every byte flipped as it flips them: the same verdict.

    ``open_body`` is what the deep walk asks, so its error is compared too.
    """
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415 - the test's only store

    with SqliteStore(tmp_path / "pwf.db", create=True) as store:
        fill(store, (1, 3, 2, 1))
        bodies = [bytes(event.body) for event in store.read()]
    assert len(bodies) == 7
    for body in bodies:
        _same(body)
        for offset in range(len(body)):
            flipped = body[:offset] + bytes([body[offset] ^ 0x01]) + body[offset + 1 :]
            _same(flipped)
            assert _outcome(open_body, flipped) == _outcome(_opened_exactly, flipped)


def _opened_exactly(body: bytes) -> object:
    with mock.patch.object(canonical, "_proven", return_value=MISSING):
        return open_body(body)
