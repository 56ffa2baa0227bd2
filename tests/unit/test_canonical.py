"""Unit tests for pwf.canonical: DOMAIN §3.1, §3.2, §4, §7.1, §12.1 and SCENARIOS section A."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from decimal import Decimal
from typing import Any, Final, Literal

import msgspec
import pytest

from pwf import canonical
from pwf.canonical import MAX_LINE_BYTES, MISSING, encode, parse_line
from pwf.errors import (
    CanonicalError,
    InputError,
    InvalidUtf8Error,
    LineError,
    LineTooLongError,
    NonCanonicalLineError,
    NonFiniteNumberError,
    NotJsonError,
)

SCHEMA = "pi-workflows.client.v1"


def slow(value: object) -> bytes:
    """The exact path alone, never msgspec."""
    out: list[str] = []
    canonical._value(value, out)
    return "".join(out).encode()


def request(**changes: object) -> dict[str, object]:
    """The canonical client request of scenario A.7, with members replaced."""
    base: dict[str, object] = {
        "clientId": "client-1",
        "idempotencyKey": "status-1",
        "operation": "host.status",
        "payload": {},
        "requestId": "request-1",
        "schema": SCHEMA,
        "type": "request",
    }
    return base | changes


def fingerprint(message: dict[str, object]) -> str:
    """DOMAIN §7.1: hex SHA-256 of the canonical request without its requestId member."""
    return canonical.hex_digest({key: item for key, item in message.items() if key != "requestId"})


# --------------------------------------------------------------------------- scenarios A


def test_a1_keys_sort_by_utf16_code_units() -> None:
    """Keys sort by UTF-16 code units, with array-index keys first in numeric order."""
    value = {"\uffff": 1, "\U00010000": 2, "": 3, "a": 4, "B": 5, "\u00e9": 6}
    expected = '{"":3,"B":5,"a":4,"\u00e9":6,"\U00010000":2,"\uffff":1}'.encode()
    assert expected == encode(value)
    assert b'{"2":3,"10":2,"-1":5,"01":4,"b":1}' == encode(
        {"b": 1, "10": 2, "2": 3, "01": 4, "-1": 5}
    )


def test_a2_number_formatting_follows_javascript() -> None:
    """Numbers print as ECMAScript Number::toString; NaN and infinities are refused."""
    value = [
        1e21,
        1e-7,
        -0.0,
        0.1,
        100,
        1.5e300,
        123456789012345678901,
        1e20,
        0.000001,
        5e-324,
        0.1 + 0.2,
        2e21,
        123e-20,
    ]
    expected = (
        b"[1e+21,1e-7,0,0.1,100,1.5e+300,123456789012345680000,100000000000000000000,"
        b"0.000001,5e-324,0.30000000000000004,2e+21,1.23e-18]"
    )
    assert expected == encode(value)
    for number in (math.nan, math.inf, -math.inf):
        with pytest.raises(NonFiniteNumberError, match=r"^JSON numbers must be finite$"):
            encode(number)


def test_a3_string_escaping() -> None:
    """Quotes, backslashes, controls and lone surrogates are escaped; the rest is raw UTF-8."""
    value = '\x00\x1f"\\/\u2028\ud800\x7f\b\f\n\r\t'
    expected = b'"\\u0000\\u001f\\"\\\\/' + "\u2028".encode() + b"\\ud800\x7f\\b\\f\\n\\r\\t" + b'"'
    assert expected == encode(value)


def test_a4_non_canonical_lines_are_rejected() -> None:
    """Whitespace, insertion order, 1.0, duplicates and 1e+20 are refused; plain digits pass."""
    line = encode(request())
    assert request() == parse_line(line)
    insertion_order = json.dumps(
        {
            "schema": SCHEMA,
            "type": "request",
            "requestId": "request-1",
            "clientId": "client-1",
            "operation": "host.status",
            "idempotencyKey": "status-1",
            "payload": {},
        },
        separators=(",", ":"),
    ).encode()
    with_n = encode(request(payload={"n": 1}))
    assert b'"payload":{"n":1}' in with_n
    variants = [
        line.replace(b'"operation":', b'"operation": '),
        insertion_order,
        with_n.replace(b'"n":1', b'"n":1.0'),
        line.replace(b'"payload":{}', b'"payload":{"a":1,"a":2}'),
    ]
    response = {
        "outcome": "accepted",
        "receipt": {"large": 10**20},
        "requestId": "request-1",
        "schema": SCHEMA,
        "type": "response",
    }
    response_line = encode(response)
    assert b'"receipt":{"large":100000000000000000000}' in response_line
    variants.append(response_line.replace(b"100000000000000000000", b"1e+20"))
    for variant in variants:
        with pytest.raises(NonCanonicalLineError):
            parse_line(variant)
    assert response == parse_line(response_line)


def test_a7_fingerprint_ignores_request_id_only() -> None:
    """The fingerprint hashes the request without requestId, so only other members change it."""
    first = fingerprint(request())
    assert "c5b58e1545e811b2c08997cf42f88cf7cc8ae4a6e82c47d97fadb29fa3731493" == first
    assert first == fingerprint(request(requestId="request-2"))
    assert first == canonical.hex_digest(request(requestId=MISSING))
    assert "618c2f6cb9ee3dacbd5fb45c6eb074a70125a928107dfb823359517fc1b83925" == fingerprint(
        request(payload={"changed": True})
    )


# --------------------------------------------------------------------------- DOMAIN examples


def test_empty_object_digest() -> None:
    """DOMAIN §3.2: the digest of {} is 44136fa3…caaff8a."""
    expected = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert expected == canonical.hex_digest({})
    assert bytes.fromhex(expected) == canonical.digest({})


def test_terminal_fingerprint_example() -> None:
    """DOMAIN §12.1: the terminal fingerprint of the failed echo run is 96eeb250…."""
    facts: dict[str, object] = {
        "error": "boom",
        "finalOutput": None,
        "input": {},
        "reason": None,
        "status": "failed",
        "workflowRef": "builtin:echo",
    }
    expected = "96eeb2504de7d6d9f3b48c7fb61a8db885d657d807eb63a3b5a2c47f069ac4b9"
    assert expected == canonical.hex_digest(facts)


def test_workflow_message_id_example() -> None:
    """DOMAIN §4: the step message of interaction-run-1-attempt-1, key 1:initial, is ef38de41…."""
    identity = {
        "idempotencyKey": "1:initial",
        "kind": "step",
        "sourceId": "interaction-run-1-attempt-1",
    }
    expected = "workflow-message-ef38de41cf51c92267369039a7055ee78bd9045683835c11b94831c4844bdffa"
    assert expected == "workflow-message-" + canonical.hex_digest(identity)


def test_text_digests_hash_utf8_bytes() -> None:
    """Text digests are SHA-256 of the UTF-8 bytes, raw and in lower-case hex."""
    text = "client-1\0caf\u00e9"
    assert hashlib.sha256(text.encode()).digest() == canonical.text_digest(text)
    assert hashlib.sha256(text.encode()).hexdigest() == canonical.text_hex_digest(text)


def test_domain_key_order_examples() -> None:
    """DOMAIN §3.1: "4294967295" is an ordinary key, "4294967294" an array index."""
    assert b'{"0":1,"4294967294":2,"4294967295":3,"a":4}' == encode(
        {"a": 4, "4294967295": 3, "4294967294": 2, "0": 1}
    )
    assert b'{"a":1}' == encode({"__proto__": 1, "a": 1})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"": 1, "0": 2}, b'{"0":2,"":1}', id="zero before empty"),
        pytest.param({"-1": 1, "0": 2, "!": 3}, b'{"0":2,"!":3,"-1":1}', id="zero before signs"),
        pytest.param({" ": 1, "7": [2]}, b'{"7":[2]," ":1}', id="digit before space"),
        pytest.param({"a": {"0": None, "-": True}}, b'{"a":{"0":null,"-":true}}', id="nested"),
        pytest.param({"\U00010000": 1, "\uffff": 2, "\ue000": 3}, None, id="astral keys"),
    ],
)
def test_index_and_astral_keys_never_take_msgspec_order(
    value: dict[str, object], expected: bytes | None
) -> None:
    """Otherwise plain dicts with index or astral keys still get the original's order."""
    assert slow(value) == encode(value)
    if expected is not None:
        assert expected == encode(value)


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (9.99e-7, "9.99e-7"),
        (1.5e300, "1.5e+300"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-1e-7, "-1e-7"),
        (-0.0, "0"),
        (0.0, "0"),
        (1.0, "1"),
        (100.0, "100"),
        (float(2**53), "9007199254740992"),
        (float(2**53 + 1), "9007199254740992"),
        (float(2**64), "18446744073709552000"),
        (123456789012345678901.0, "123456789012345680000"),
        (0.1 + 0.2, "0.30000000000000004"),
        (123e-20, "1.23e-18"),
        (-123.456, "-123.456"),
        (1.5e-6, "0.0000015"),
        (2e21, "2e+21"),
    ],
)
def test_format_number_matches_number_to_string(number: float, text: str) -> None:
    """format_number writes the DOMAIN §3.1 examples exactly as JavaScript does."""
    assert text == canonical.format_number(number)


def test_python_ints_go_through_doubles() -> None:
    """A Python int is converted to a double first, as the original's numbers are."""
    assert b"[9007199254740992,-9007199254740992,9007199254740992]" == encode(
        [2**53 + 1, -(2**53) - 1, 2**53]
    )
    assert b"1e+21" == encode(10**21)
    with pytest.raises(NonFiniteNumberError):
        encode(10**400)


# --------------------------------------------------------------------------- strict parser


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"a": 1}', id="space after colon"),
        pytest.param(b'{"a":1, "b":2}', id="space after comma"),
        pytest.param(b' {"a":1}', id="leading space"),
        pytest.param(b'{"a":1}\n', id="trailing newline"),
        pytest.param(b"[1,\t2]", id="tab"),
        pytest.param(b'{"b":1,"a":2}', id="reordered keys"),
        pytest.param(b'{"10":1,"2":2}', id="index keys as text order"),
        pytest.param(b'{"a":1,"a":1}', id="duplicate keys"),
        pytest.param(b"1.0", id="1.0"),
        pytest.param(b"1E2", id="1E2"),
        pytest.param(b"1e2", id="1e2"),
        pytest.param(b"1e+20", id="1e+20"),
        pytest.param(b"1.50", id="trailing zero"),
        pytest.param(b"-0", id="-0"),
        pytest.param(b"-0.0", id="-0.0"),
        pytest.param(b'"\\/"', id="escaped solidus"),
        pytest.param(b'"\\u0041"', id="escaped A"),
        pytest.param(b'"\\uD800"', id="upper-case surrogate escape"),
        pytest.param(b'"\\u001F"', id="upper-case control escape"),
        pytest.param(b'"\\u000a"', id="long newline escape"),
        pytest.param(b'"\\ud83d\\ude00"', id="escaped surrogate pair"),
        pytest.param(b'{"__proto__":1}', id="__proto__ member"),
        pytest.param(b'{"__proto__":{},"a":1}', id="__proto__ beside others"),
        pytest.param(b"1e400", id="overflows to infinity"),
        pytest.param(b"9007199254740993", id="integer beyond 2**53"),
        pytest.param(b"123456789012345678901", id="integer rounded by doubles"),
    ],
)
def test_parse_line_rejects_non_canonical_text(line: bytes) -> None:
    """JSON that parses but is not byte-for-byte canonical is refused as non-canonical."""
    with pytest.raises(NonCanonicalLineError):
        parse_line(line)


def test_non_canonical_error_names_first_difference() -> None:
    """The refusal carries the byte offset where the canonical form first differs."""
    with pytest.raises(NonCanonicalLineError) as caught:
        parse_line(b'{"a": 1}')
    assert 5 == caught.value.offset


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"NaN", id="NaN"),
        pytest.param(b"Infinity", id="Infinity"),
        pytest.param(b"[-Infinity]", id="-Infinity"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"a":1', id="truncated"),
        pytest.param(b"[1,]", id="trailing comma"),
        pytest.param(b"{'a':1}", id="single quotes"),
        pytest.param(b"01", id="leading zero"),
        pytest.param(b'"a\nb"', id="raw control in string"),
    ],
)
def test_parse_line_rejects_text_that_is_not_json(line: bytes) -> None:
    """Text that does not parse as JSON is refused as not JSON."""
    with pytest.raises(NotJsonError):
        parse_line(line)


@pytest.mark.parametrize(
    ("line", "offset"),
    [
        pytest.param(b"\xef\xbb\xbf{}", 0, id="byte order mark"),
        pytest.param(b'"\xff"', 1, id="invalid byte"),
        pytest.param(b'{"a":"\xc3"}', 6, id="truncated sequence"),
        pytest.param(b'"\xed\xa0\x80"', 1, id="encoded surrogate"),
        pytest.param(b'"\xc0\xaf"', 1, id="overlong solidus"),
    ],
)
def test_parse_line_rejects_invalid_utf8(line: bytes, offset: int) -> None:
    """A byte order mark or bytes that are not UTF-8 are refused with their offset."""
    with pytest.raises(InvalidUtf8Error) as caught:
        parse_line(line)
    assert offset == caught.value.offset


def test_parse_line_size_limit() -> None:
    """A canonical line of exactly 1 048 576 bytes passes; one byte more is too long."""
    assert 1_048_576 == MAX_LINE_BYTES
    exact = b'"' + b"a" * (MAX_LINE_BYTES - 2) + b'"'
    assert MAX_LINE_BYTES == len(exact)
    assert "a" * (MAX_LINE_BYTES - 2) == parse_line(exact)
    too_long = b'"' + b"a" * (MAX_LINE_BYTES - 1) + b'"'
    with pytest.raises(LineTooLongError, match="exceeds 1 MiB") as caught:
        parse_line(too_long)
    assert (MAX_LINE_BYTES + 1, MAX_LINE_BYTES) == (caught.value.size, caught.value.limit)


def test_parse_line_custom_limit() -> None:
    """The limit can be lowered by the caller."""
    assert [1] == parse_line(b"[1]", limit=3)
    with pytest.raises(LineTooLongError):
        parse_line(b"[10]", limit=3)


@pytest.mark.parametrize(
    ("line", "value"),
    [
        pytest.param(b'"\\ud800"', "\ud800", id="lone surrogate escape"),
        pytest.param(b'"\\udc00\\ud800"', "\udc00\ud800", id="reversed halves"),
        pytest.param(b"100000000000000000000", 10**20, id="1e20 in digits"),
        pytest.param(b"1e+21", 1e21, id="1e+21"),
        pytest.param(b"1e-7", 1e-7, id="1e-7"),
        pytest.param(b"5e-324", 5e-324, id="smallest subnormal"),
        pytest.param(b'{"2":1,"10":2,"a":[]}', {"2": 1, "10": 2, "a": []}, id="index keys"),
        pytest.param('"\U0001f600\u2028/"'.encode(), "\U0001f600\u2028/", id="raw characters"),
        pytest.param(b"null", None, id="null"),
    ],
)
def test_parse_line_accepts_canonical_text(line: bytes, value: object) -> None:
    """Canonical lines parse to their value, including lone surrogates and huge integers."""
    assert value == parse_line(line)


def test_line_errors_are_input_errors() -> None:
    """Every parser refusal is a LineError and an InputError (exit code 2)."""
    for error in (LineTooLongError, InvalidUtf8Error, NotJsonError, NonCanonicalLineError):
        assert issubclass(error, LineError)
        assert issubclass(error, InputError)
        assert 2 == error.exit_code


# --------------------------------------------------------------------------- encode errors


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({1: "a"}, id="int key"),
        pytest.param({None: 1}, id="None key"),
        pytest.param({(1, 2): 1}, id="tuple key"),
        pytest.param({"a": {2.5: 1}}, id="nested float key"),
        pytest.param([{"ok": 1, b"k": 2}], id="bytes key in list"),
    ],
)
def test_non_text_keys_are_refused(value: object) -> None:
    """Object keys must be text."""
    with pytest.raises(CanonicalError, match="object keys must be text"):
        encode(value)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({1, 2}, id="set"),
        pytest.param(frozenset(), id="frozenset"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param(bytearray(b"x"), id="bytearray"),
        pytest.param(dt.datetime(2024, 1, 1, tzinfo=dt.UTC), id="datetime"),
        pytest.param(dt.date(2024, 1, 1), id="date"),
        pytest.param(Decimal("1.5"), id="Decimal"),
        pytest.param(object(), id="object"),
        pytest.param(1j, id="complex"),
        pytest.param(MISSING, id="MISSING alone"),
        pytest.param([1, {"a": {2}}], id="nested set"),
        pytest.param({"a": [b"x"]}, id="nested bytes"),
    ],
)
def test_foreign_values_are_refused(value: object) -> None:
    """Values without a JSON form raise CanonicalError."""
    with pytest.raises(CanonicalError, match="has no JSON form"):
        encode(value)


def test_missing_inside_arrays_is_refused() -> None:
    """An absent array element is an error, in lists and tuples alike."""
    for value in ([1, MISSING], (MISSING,), {"a": [MISSING]}):
        with pytest.raises(CanonicalError, match="absent element"):
            encode(value)


def test_missing_members_are_omitted() -> None:
    """A member whose value is MISSING is left out; None stays as null."""
    assert b'{"a":null,"c":{}}' == encode({"a": None, "b": MISSING, "c": {"d": MISSING}})
    assert b"{}" == encode({"only": MISSING})


def test_proto_value_is_still_normalised() -> None:
    """A `__proto__` member vanishes but its value is still checked."""
    assert b'{"a":1}' == encode({"__proto__": {"x": [1, 2]}, "a": 1})
    with pytest.raises(NonFiniteNumberError):
        encode({"__proto__": math.nan, "a": 1})
    with pytest.raises(NonFiniteNumberError):
        encode({"a": 1, "__proto__": {"deep": [math.inf]}})
    with pytest.raises(CanonicalError):
        encode({"__proto__": {1: 2}})
    with pytest.raises(CanonicalError):
        encode({"__proto__": [MISSING]})


def test_non_finite_numbers_fail_anywhere() -> None:
    """NaN and infinities fail deep inside containers too."""
    for value in ([1, [math.inf]], {"a": {"b": -math.inf}}, (math.nan,)):
        with pytest.raises(NonFiniteNumberError, match="JSON numbers must be finite"):
            encode(value)
    with pytest.raises(ValueError, match="JSON numbers must be finite"):
        canonical.format_number(math.nan)


# --------------------------------------------------------------------------- surrogates


def test_surrogate_pair_code_points_join_as_in_javascript() -> None:
    """Two Python code points forming a surrogate pair are one character in JavaScript."""
    expected = '"\U0001f600"'.encode()
    assert expected == encode("\ud83d\ude00")
    assert expected == encode("\U0001f600")
    assert '{"\U0001f600":1}'.encode() == encode({"\ud83d\ude00": 1})
    assert '["a\U00010000b"]'.encode() == encode(["a\ud800\udc00b"])


def test_lone_surrogates_escape_in_lower_case() -> None:
    """Lone surrogates, in values and keys, are written as lower-case \\udxxx escapes."""
    assert b'"\\udbff"' == encode("\udbff")
    assert b'"\\udc00\\ud800"' == encode("\udc00\ud800")
    assert b'"x\\udfffy"' == encode("x\udfffy")
    assert b'{"\\ud800":1}' == encode({"\ud800": 1})


def test_raw_embeds_canonical_bytes() -> None:
    """raw() wraps the canonical bytes, which encode then embeds verbatim."""
    wrapped = canonical.raw({"b": 1, "a": [1.0]})
    assert isinstance(wrapped, msgspec.Raw)
    assert b'{"a":[1],"b":1}' == bytes(wrapped)
    assert b'[{"a":[1],"b":1},2]' == encode([wrapped, 2])


# --------------------------------------------------------------------------- Structs


class Leaf(msgspec.Struct, rename="camel", omit_defaults=True):
    """A small nested Struct with an int field."""

    item_count: int
    label: str | None = None


class Envelope(msgspec.Struct, rename="camel", omit_defaults=True):
    """A Struct with every kind of field the module plans for."""

    request_id: str
    leaf: Leaf
    receipt: msgspec.Raw
    details: Any = None
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    note: str | msgspec.UnsetType = msgspec.UNSET
    revision: int | msgspec.UnsetType = msgspec.UNSET
    leaves: list[Leaf] = msgspec.field(default_factory=list)


RECEIPT = {"b": [1, 2.5], "a": None}


def _envelope(**changes: Any) -> Envelope:
    base = Envelope(request_id="request-1", leaf=Leaf(3), receipt=canonical.raw(RECEIPT))
    return msgspec.structs.replace(base, **changes)


def _as_dict(**changes: Any) -> dict[str, object]:
    base: dict[str, object] = {
        "requestId": "request-1",
        "leaf": {"itemCount": 3},
        "receipt": RECEIPT,
    }
    return base | changes


STRUCT_CASES = [
    pytest.param(_envelope(), _as_dict(), id="defaults omitted"),
    pytest.param(
        _envelope(note="hi", revision=7, counts={"a": 1}, details={"x": [1, "y"]}),
        _as_dict(note="hi", revision=7, counts={"a": 1}, details={"x": [1, "y"]}),
        id="unset fields set",
    ),
    pytest.param(
        _envelope(leaf=Leaf(2**53 + 1, label="big")),
        _as_dict(leaf={"itemCount": 2**53 + 1, "label": "big"}),
        id="int beyond 2**53",
    ),
    pytest.param(
        _envelope(revision=-(2**60)),
        _as_dict(revision=-(2**60)),
        id="optional int beyond 2**53",
    ),
    pytest.param(
        _envelope(details={"b": 3, "10": 1, "2": 2}),
        _as_dict(details={"b": 3, "10": 1, "2": 2}),
        id="digit-key dict",
    ),
    pytest.param(
        _envelope(counts={"10": 1, "2": 2, "\uffff": 3, "\U00010000": 4}),
        _as_dict(counts={"10": 1, "2": 2, "\uffff": 3, "\U00010000": 4}),
        id="typed dict with index and astral keys",
    ),
    pytest.param(
        _envelope(leaf=Leaf(1, label="\ud800")),
        _as_dict(leaf={"itemCount": 1, "label": "\ud800"}),
        id="lone surrogate",
    ),
    pytest.param(
        _envelope(details=[1e21, 0.1, -0.0]),
        _as_dict(details=[1e21, 0.1, -0.0]),
        id="floats",
    ),
    pytest.param(
        _envelope(leaves=[Leaf(1), Leaf(2**54, label="x")]),
        _as_dict(leaves=[{"itemCount": 1}, {"itemCount": 2**54, "label": "x"}]),
        id="list of Structs",
    ),
    pytest.param(
        _envelope(details={"__proto__": 1, "z": Leaf(5)}),
        _as_dict(details={"z": {"itemCount": 5}}),
        id="__proto__ and Struct inside Any",
    ),
]


@pytest.mark.parametrize(("struct", "members"), STRUCT_CASES)
def test_struct_encodes_like_its_dict(struct: Envelope, members: dict[str, object]) -> None:
    """A Struct encodes like the slow path and like the equivalent plain dict."""
    expected = encode(members)
    assert expected == encode(struct)
    assert expected == slow(struct)


def test_struct_fast_path_is_taken_for_plain_structs() -> None:
    """A Struct with nothing to fix goes to msgspec, one that needs fixing does not."""
    assert canonical._struct_plain(_envelope(note="hi", revision=7, counts={"a": 1}))
    assert not canonical._struct_plain(_envelope(leaf=Leaf(2**53 + 1)))
    assert not canonical._struct_plain(_envelope(details={"10": 1}))


def test_struct_int_beyond_2_53_is_rounded_like_javascript() -> None:
    """An int field beyond 2**53 prints as the nearest double."""
    assert b'{"itemCount":9007199254740992}' == encode(Leaf(2**53 + 1))
    assert b'{"itemCount":18014398509481984,"label":"x"}' == encode(Leaf(2**54 + 1, label="x"))


def test_struct_digit_key_dict_uses_javascript_order() -> None:
    """A dict inside a Struct puts array-index keys first, in numeric order."""
    struct = _envelope(details={"b": 3, "10": 1, "2": 2, "-1": 4})
    assert b'"details":{"2":2,"10":1,"-1":4,"b":3}' in encode(struct)


class Defaults(msgspec.Struct, omit_defaults=True):
    """Defaults of each kind msgspec knows: a value, a builtin factory, another factory."""

    limit: int = 1000
    tags: list[str] = msgspec.field(default_factory=list)
    seed: list[int] = msgspec.field(default_factory=lambda: [1])
    extra: Any = None


@pytest.mark.parametrize(
    "struct",
    [
        pytest.param(Defaults(), id="all defaults"),
        pytest.param(Defaults(limit=int("1000")), id="equal but not identical int"),
        pytest.param(Defaults(tags=[]), id="empty builtin factory value"),
        pytest.param(Defaults(tags=["a"]), id="non-empty builtin factory value"),
        pytest.param(Defaults(seed=[1]), id="equal custom factory value"),
    ],
)
def test_struct_omit_defaults_matches_msgspec(struct: Defaults) -> None:
    """The exact path omits exactly the members msgspec omits, so both paths agree."""
    expected = msgspec.json.Encoder(order="sorted").encode(struct)
    assert expected == encode(struct)
    assert expected == slow(struct)
    members = json.loads(expected) | {"extra": 0.5}
    assert encode(members) == encode(msgspec.structs.replace(struct, extra=0.5))


class TestNesting:
    def test_depth_counts_brackets_outside_strings(self):
        """Brackets inside strings (escaped quotes included) do not count."""
        assert 3 == canonical.nesting_depth(b"[[[]]]", 128)
        assert 1 == canonical.nesting_depth(b'["' + b"[" * 300 + b'"]', 128)
        assert 1 == canonical.nesting_depth(b'["\\"' + b"[" * 300 + b'"]', 128)

    def test_depth_stops_past_the_limit(self):
        """The walk stops one past the limit."""
        assert 129 == canonical.nesting_depth(b"[" * 5000 + b"]" * 5000, 128)

    def test_too_deep_is_an_error_not_a_crash(self):
        """Nesting past the interpreter's stack is refused as not JSON, never a RecursionError."""
        with pytest.raises(NotJsonError, match="nested deeper"):
            canonical.parse_line(b"[" * 100_000 + b"]" * 100_000)


# ------------------------------------------------------ edges a mutation run found unpinned


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
        assert 2 == canonical.nesting_depth(b"[{}]", 1)

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
        with pytest.raises(InvalidUtf8Error):
            canonical.canonical_line(b"\xef\xbb\xbf[1]")

    def test_invalid_utf8_names_its_byte(self) -> None:
        """pwf refuses invalid UTF-8 (DOMAIN §15), pointing at the first bad byte."""
        with pytest.raises(InvalidUtf8Error) as caught:
            canonical.canonical_line(b'["\xff"]')
        assert 2 == caught.value.offset

    def test_a_value_without_a_canonical_form_is_refused(self) -> None:
        """A number out of double range has no canonical form."""
        with pytest.raises(NonCanonicalLineError):
            canonical.canonical_line(b"[1e999]")


class TestParseLine:
    """``parse_line`` names where a line stops being canonical."""

    def test_a_byte_order_mark_is_named(self) -> None:
        """A line that opens with a BOM is refused at byte 0."""
        with pytest.raises(InvalidUtf8Error) as caught:
            canonical.parse_line(b"\xef\xbb\xbf[1]")
        assert 0 == caught.value.offset

    def test_invalid_utf8_names_its_byte(self) -> None:
        """The refusal points at the first bad byte."""
        with pytest.raises(InvalidUtf8Error) as caught:
            canonical.parse_line(b"[\xff]")
        assert 1 == caught.value.offset

    def test_the_first_difference_is_named(self) -> None:
        """The offset is the first byte where the line and its canonical form part."""
        with pytest.raises(NonCanonicalLineError) as caught:
            canonical.parse_line(b"[1, 2]")
        assert 3 == caught.value.offset

    def test_a_fraction_differs_where_it_starts(self) -> None:
        """``[1.0]`` is canonically ``[1]``: they part at the point, byte 2."""
        with pytest.raises(NonCanonicalLineError) as caught:
            canonical.parse_line(b"[1.0]")
        assert 2 == caught.value.offset


def _fresh_structs() -> dict[str, Any]:
    """Struct classes made anew on every call, so canonical meets each one for the first time.

    The encoder works out once per class which fields need a look; classes
    made inside the test make it do so inside the test.
    """
    inner = msgspec.defstruct("Inner", [("a", str), ("b", bool)])
    sub_inner = msgspec.defstruct("SubInner", [("c", int, 2**53 + 1)], bases=(inner,))
    outer = msgspec.defstruct(
        "Outer",
        [
            ("count", int),
            ("inner", inner),
            ("kind", Literal["x", "y"]),
            ("level", Literal[1, 2]),
            ("maybe", int | None, None),
            ("extra", object, None),
        ],
        omit_defaults=True,
    )
    indexed = msgspec.defstruct(
        "Indexed", [("low", int), ("high", int)], rename={"low": "2", "high": "10"}
    )
    tagged = msgspec.defstruct("Tagged", [("x", int)], tag=True)
    row = msgspec.defstruct("Row", [("x", int)], array_like=True)
    return {
        "Inner": inner,
        "SubInner": sub_inner,
        "Outer": outer,
        "Indexed": indexed,
        "Tagged": tagged,
        "Row": row,
    }


class TestStructsMetForTheFirstTime:
    """A Struct encodes as the object of its members would (DOMAIN §3.1), whatever its fields."""

    def test_plain_fields(self) -> None:
        """Text, booleans, literals and a nested Struct; an omitted default is absent."""
        kinds: Any = _fresh_structs()
        value = kinds["Outer"](count=1, inner=kinds["Inner"](a="s", b=True), kind="y", level=1)
        assert b'{"count":1,"inner":{"a":"s","b":true},"kind":"y","level":1}' == encode(value)

    def test_integers_past_2_53_go_through_doubles(self) -> None:
        """An int field, an optional one and one inside an untyped field are doubles first."""
        kinds: Any = _fresh_structs()
        value = kinds["Outer"](
            count=2**53 + 1,
            inner=kinds["Inner"](a="s", b=False),
            kind="x",
            level=2,
            maybe=-(2**53) - 1,
            extra=[2**53 + 1, {"10": 1, "2": 2}],
        )
        assert (
            b'{"count":9007199254740992,"extra":[9007199254740992,{"2":2,"10":1}],'
            b'"inner":{"a":"s","b":false},"kind":"x","level":2,"maybe":-9007199254740992}'
        ) == encode(value)

    def test_a_subclass_in_a_nested_field_is_written_whole(self) -> None:
        """A field declared as one class holding a subclass writes the subclass's members."""
        kinds: Any = _fresh_structs()
        value = kinds["Outer"](count=1, inner=kinds["SubInner"](a="s", b=True), kind="x", level=1)
        assert (
            b'{"count":1,"inner":{"a":"s","b":true,"c":9007199254740992},"kind":"x","level":1}'
        ) == encode(value)

    def test_index_named_fields_come_first_in_numeric_order(self) -> None:
        """Fields encoded as "2" and "10" are array indices: "2" first."""
        kinds: Any = _fresh_structs()
        assert b'{"2":1,"10":2}' == encode(kinds["Indexed"](low=1, high=2))

    def test_a_tagged_struct_writes_its_tag(self) -> None:
        """The tag member is part of the object, with the class's tag as its value."""
        kinds: Any = _fresh_structs()
        assert b'{"type":"Tagged","x":2}' == encode(kinds["Tagged"](x=2))
        assert b'{"type":"Tagged","x":9007199254740992}' == encode(kinds["Tagged"](x=2**53 + 1))

    def test_an_array_like_struct_has_no_object_form(self) -> None:
        """Canonical JSON has no form for a Struct written as an array."""
        kinds: Any = _fresh_structs()
        with pytest.raises(CanonicalError):
            encode(kinds["Row"](x=1))


# ------------------------------------------- lines msgspec writes as they stand, still refused

_ASTRAL: Final = "\U0001f600"
"""Sorts before U+E000 by UTF-16 code units (its high surrogate is D83D), after it by code point."""


class TestLinesMsgspecWritesAsTheyStand:
    """Lines msgspec's sorted encoding gives back, refused where DOMAIN §3.1 writes them otherwise.

    Each line below is msgspec's own compact output of its value, so only the
    rules of the original tell it from the canonical form.
    """

    @pytest.mark.parametrize(
        "keys",
        [
            pytest.param(("\ue000", _ASTRAL), id="plain keys"),
            pytest.param(('\ue000"', _ASTRAL + '"'), id="an escaped quote ends each key"),
            pytest.param(('\ue000"a', _ASTRAL + '"a'), id="an escaped quote inside each key"),
            pytest.param(('\ue000b"a', _ASTRAL + '"a'), id="an escaped quote at an odd byte"),
            pytest.param(("\ue000\\", _ASTRAL + "\\"), id="an escaped backslash ends each key"),
            pytest.param(('\ue000\\"', _ASTRAL + '\\"'), id="a backslash and a quote end each key"),
        ],
    )
    def test_keys_in_code_point_order_are_refused(self, keys: tuple[str, str]) -> None:
        """Keys sort by UTF-16 code units: an astral key precedes one of U+E000 to U+FFFF."""
        low, astral = keys
        line = json.dumps({low: 1, astral: "x"}, ensure_ascii=False, separators=(",", ":"))
        assert line.encode() == msgspec.json.encode({low: 1, astral: "x"}, order="sorted")
        with pytest.raises(NonCanonicalLineError):
            parse_line(line.encode())
        expected = {astral: "x", low: 1}
        assert expected == parse_line(encode(expected))

    @pytest.mark.parametrize(
        "value",
        [
            pytest.param("\ue000", id="plain"),
            pytest.param('\ue000"', id="an escaped quote"),
        ],
    )
    def test_a_high_character_in_a_value_does_not_hide_the_keys_after_it(self, value: str) -> None:
        """Text from U+E000 in a member's value, then keys in code-point order: refused."""
        line = msgspec.json.encode({"a": value, "\ue000": 1, _ASTRAL: "x"}, order="sorted")
        assert line.index(b'"a":') < line.index("\ue000".encode(), line.index(b'"a":'))
        with pytest.raises(NonCanonicalLineError):
            parse_line(line)

    @pytest.mark.parametrize(
        "line",
        [
            pytest.param(b"[9007199254740993]", id="in an array"),
            pytest.param(b'{"a":9007199254740993}', id="a member"),
            pytest.param(b"[1,9007199254740993]", id="after a comma"),
            pytest.param(b"[-9007199254740993]", id="negative"),
            pytest.param(b'[9007199254740993,"a1234567890123456"]', id="before digits in text"),
            pytest.param(b'["1234567890123456",9007199254740993]', id="after digits in text"),
            pytest.param(
                b'["1234567890123456",9007199254740993,"a1234567890123456"]',
                id="between digits in text",
            ),
        ],
    )
    def test_an_integer_past_2_53_is_refused_wherever_it_stands(self, line: bytes) -> None:
        """Numbers are doubles: 2**53 + 1 is written 9007199254740992, its own digits refused."""
        with pytest.raises(NonCanonicalLineError):
            parse_line(line)
        assert b"9007199254740992" in encode(json.loads(line))

    def test_digits_in_text_are_not_a_number(self) -> None:
        """Sixteen digits and more inside a string are text, canonical as they stand."""
        line = b'{"1234567890123456789":"12345678901234567890"}'
        assert {"1234567890123456789": "12345678901234567890"} == parse_line(line)

    def test_an_integer_after_a_double_is_still_written_as_a_double(self) -> None:
        """Every number after a fraction is looked at too: 2**53 + 1 is written as its double."""
        assert b"[1.5,9007199254740992]" == encode([1.5, 2**53 + 1])
        assert b'{"a":1.5,"b":9007199254740992}' == encode({"a": 1.5, "b": 2**53 + 1})


_ONE_BYTE_A_STEP: Final = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def _depth_by_the_old_walk(line: bytes, limit: int) -> int:
    """``nesting_depth`` before ADR 0105: every string blanked one byte a step, then the walk."""
    if line.count(b"[") + line.count(b"{") <= limit:
        return min(line.count(b"[") + line.count(b"{"), limit)
    depth = deepest = 0
    brackets = _ONE_BYTE_A_STEP.sub(b'""', line).translate(None, _NOT_BRACKETS)
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


_DEEP: Final = b"[" * 70 + b"]" * 70


@pytest.mark.parametrize(
    "line",
    [
        _DEEP,
        b'["' + b"[" * 80 + b'",' + _DEEP + b"]",
        b'["\\"' + b"[" * 80 + b'",' + _DEEP + b"]",
        b'["\\\\",' + _DEEP + b',"\\\\\\"[[["]',
        b'{"a":"x\\ny","b":' + _DEEP + b"}",
        b'["unterminated ' + b"[" * 80,
        b'["' + b"]" * 80 + b'",' + _DEEP + b"]",
        b"[" + b",".join(b'{"k":["v","[{"]}' for _ in range(40)) + b"]",
        canonical.encode(
            {"nodes": [{"id": f"n-{n}", "next": [n + 1], "tools": ["a"]} for n in range(40)]}
        ),
    ],
)
def test_the_depth_is_the_old_walks_on_every_kind_of_line(line: bytes) -> None:
    """Strings split at their quotes, or blanked by runs, leave the same brackets (ADR 0105)."""
    for limit in (1, 64, 128):
        assert _depth_by_the_old_walk(line, limit) == canonical.nesting_depth(line, limit)


def test_a_line_without_a_backslash_is_split_at_its_quotes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No regular expression for the usual line, whose strings hold no escape (ADR 0105).

    A definition snapshot of a few hundred nodes has more brackets than the proof's limit:
    blanking its strings one byte a step took 0.2 ms a 10 KB line.
    """

    class _Unused:
        def sub(self, *_: object) -> bytes:
            raise AssertionError("the strings were blanked by the regular expression")

    monkeypatch.setattr(canonical, "_STRINGS", _Unused())
    line = canonical.encode({"nodes": [{"id": f"n-{n}", "next": [n + 1]} for n in range(80)]})
    assert 4 == canonical.nesting_depth(line, 64)
