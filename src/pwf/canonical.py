r"""Canonical JSON exactly as the original writes it; imports msgspec and errors.

The original normalises a value, copies it into fresh JavaScript objects with
keys inserted in default-sort (UTF-16 code unit) order, then calls
``JSON.stringify``.  So (DOMAIN §3.1):

* array-index keys (``"0"`` … ``"4294967294"``) come first, in numeric order,
  then the other keys by UTF-16 code units;
* a member named ``__proto__`` disappears (its value is still checked);
* members whose value is :data:`MISSING` are omitted;
* numbers are doubles printed by ECMAScript ``Number::toString`` (ints too);
* strings escape ``"``, ``\\``, ``\\b\\f\\n\\r\\t``, other controls and lone
  surrogates as lower-case ``\\u00xx`` / ``\\udxxx``; everything else is raw.

:func:`encode` has two paths.  The fast path hands a value to msgspec when a
cheap walk proves that msgspec writes the same bytes: plain dicts with keys
below U+D800 that cannot be array indices, lists, text, bools, null, ints
within ±2**53 and doubles msgspec writes as ``Number::toString`` does.
Anything else (other doubles, digit keys, surrogates, ``MISSING``, Structs)
takes the exact slow path.  A golden corpus and differential tests against
Node pin the two together (ADR 0002).

:func:`parse_line` proves most canonical lines without walking their value:
when msgspec's sorted encoding of the decoded value gives the line back and a
scan of the line's bytes shows none of what msgspec writes otherwise (see
:func:`_proven`), the line is canonical; every other line takes the exact
check (ADR 0063).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, Final

import msgspec

from pwf.errors import (
    CanonicalError,
    InvalidUtf8Error,
    LineTooLongError,
    NonCanonicalLineError,
    NonFiniteNumberError,
    NotJsonError,
)

__all__ = [
    "MAX_LINE_BYTES",
    "MISSING",
    "bindable",
    "canonical_line",
    "decode",
    "digest",
    "encode",
    "has_lone_surrogate",
    "hex_digest",
    "parse_line",
    "raw",
    "text_digest",
    "text_hex_digest",
    "utf8",
]

MISSING: Final = msgspec.UNSET
"""An absent member: omitted from objects, refused inside arrays."""

MAX_LINE_BYTES: Final = 1_048_576
"""MAX_PROTOCOL_MESSAGE_BYTES of the original (1 MiB)."""

_MAX_SAFE: Final = 2**53
_MAX_INDEX: Final = 4_294_967_294
_BOM: Final = b"\xef\xbb\xbf"
_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_DECODER: Final = msgspec.json.Decoder()
_KEY_CACHE_LIMIT: Final = 8192
_TOO_DEEP: Final = "JSON nested deeper than this parser allows"
_key_ok: dict[str, bool] = {}


_LONE_SURROGATE: Final = re.compile(rb"(?<!\\)(?:\\\\)*\\ud[89a-f]")


def has_lone_surrogate(line: bytes) -> bool:
    """Whether canonical bytes hold a lone surrogate (the only surrogates they escape).

    msgspec cannot decode such an escape into ``str``; :func:`decode` and the
    event decoder take the surrogate-preserving way for exactly these bytes.
    """
    return b"\\ud" in line and _LONE_SURROGATE.search(line) is not None


def decode(data: bytes) -> object:
    """The value of stored canonical JSON bytes, lone surrogates kept (ADR 0027).

    msgspec decodes everything else; bytes that hold a lone surrogate escape
    are decoded by the standard library, which keeps it in ``str`` as
    JavaScript does.

    Raises:
        msgspec.DecodeError: the bytes are not JSON.
    """
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError:
        if not has_lone_surrogate(bytes(data)):
            raise
    return json.loads(bytes(data))


def bindable(params: tuple[object, ...] | list[object]) -> tuple[object, ...]:
    """Parameters as better-sqlite3 binds them: text with a lone surrogate holds U+FFFD.

    pwf bound text so before ADR 0071, which keeps each code unit instead
    (``pwf._sqlite.exact_statement``); the deep verify still accepts an
    event row whose indexed columns hold this form, as older logs do.
    """
    return tuple(utf8(item).decode() if type(item) is str else item for item in params)


# --------------------------------------------------------------------------- fast path


_DIGITS: Final = frozenset("0123456789")
_LEAVES: Final = frozenset({str, bool, type(None)})
_CONTAINERS: Final = frozenset({dict, list, tuple})


def _learn_key(key: object) -> bool:
    """Tell whether msgspec sorts and writes this key exactly as the original does.

    Keys below U+D800 sort the same by code point and by UTF-16 code unit; a
    key that starts with a digit might be an array index, which JavaScript
    puts first, so it is left to the exact path.
    """
    ok = (
        isinstance(key, str)
        and key[:1] not in _DIGITS
        and key != "__proto__"
        and (key.isascii() or max(key) < "\ud800")
    )
    if ok and len(_key_ok) < _KEY_CACHE_LIMIT:
        # ok is only true for a str key, which mypy cannot see through the and-chain.
        _key_ok[key] = ok  # type: ignore[index]
    return ok


_known_key = _key_ok.get


def _plain(value: object) -> bool:  # noqa: C901 - one branch per JSON kind, on the hot path
    """Tell whether msgspec's sorted encoding of ``value`` is already canonical."""
    kind = type(value)
    items: Any
    # The exact-type tests (``type(value) is dict``) are deliberate: subclasses take the exact
    # path, and they are faster than isinstance.  mypy does not narrow on them, hence the ignores.
    if kind is dict:
        if not all(map(_known_key, value)) and not all(map(_learn_key, value)):  # type: ignore[call-overload]
            return False
        items = value.values()  # type: ignore[attr-defined]
    elif kind is list or kind is tuple:
        items = value
    else:
        items = (value,)
    for item in items:
        kind = type(item)
        if kind in _LEAVES:
            continue
        if kind is int:
            if -_MAX_SAFE <= item <= _MAX_SAFE:
                continue
            return False
        if kind is float:
            if _float_plain(item):
                continue
            return False
        if kind in _CONTAINERS and _plain(item):
            continue
        return False
    return True


def _float_plain(number: float) -> bool:
    """Tell whether msgspec writes this double as ``Number::toString`` does."""
    return math.isfinite(number) and _ENCODER.encode(number) == format_number(number).encode()


# --------------------------------------------------------------------------- slow path

_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESCAPE: Final = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    return _ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _string(text: str) -> str:
    if any("\ud800" <= char <= "\udfff" for char in text):
        # JavaScript strings are UTF-16: a high+low pair written as two Python
        # code points is one character there.  Join pairs; lone halves remain.
        text = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, text) + '"'


def format_number(number: float) -> str:
    """Write a double as ECMAScript ``Number::toString(10)`` does."""
    if not math.isfinite(number):
        raise NonFiniteNumberError
    if number == 0:
        return "0"
    if number.is_integer() and abs(number) <= _MAX_SAFE:
        return str(int(number))  # exact, and what the shortest digits give too
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    raw = (whole + fraction).lstrip("0")
    digits = raw.rstrip("0")
    # x = 0.digits * 10**point, as in the ECMAScript algorithm (n there).
    point = len(whole) - (len(whole + fraction) - len(raw)) + int(exponent or 0)
    return sign + _place_point(digits, point)


def _place_point(digits: str, point: int) -> str:
    size = len(digits)
    if size <= point <= 21:
        return digits + "0" * (point - size)
    if 0 < point <= 21:
        return digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    power = point - 1
    exponent = f"e+{power}" if power >= 0 else f"e-{-power}"
    if size == 1:
        return digits + exponent
    return digits[0] + "." + digits[1:] + exponent


def _array_index(key: str) -> int | None:
    if key == "0":
        return 0
    if key[:1] in _DIGITS and key[0] != "0" and key.isascii() and key.isdigit():
        index = int(key)
        if index <= _MAX_INDEX:
            return index
    return None


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _object(members: dict[Any, Any], out: list[str]) -> None:
    indexed: list[tuple[int, str]] = []
    named: list[str] = []
    for key in members:
        if not isinstance(key, str):
            raise CanonicalError(f"object keys must be text, not {type(key).__name__}")
        index = _array_index(key)
        if index is None:
            named.append(key)
        else:
            indexed.append((index, key))
    indexed.sort()
    named.sort(key=_utf16)
    out.append("{")
    first = True
    for key in [key for _, key in indexed] + named:
        item = members[key]
        if item is MISSING:
            continue
        if key == "__proto__":
            _value(item, [])  # normalised, then dropped: no own property is created
            continue
        if not first:
            out.append(",")
        first = False
        out.append(_string(key))
        out.append(":")
        _value(item, out)
    out.append("}")


def _value(value: object, out: list[str]) -> None:  # noqa: C901, PLR0912 - one branch per JSON kind
    # Exact-type tests, so that subclasses (IntEnum, a str subclass) are refused or handled
    # on purpose; mypy does not narrow on ``type(value) is X``, hence the ignores below.
    kind = type(value)
    if value is None:
        out.append("null")
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is str:
        out.append(_string(value))  # type: ignore[arg-type]
    elif kind is int or kind is float:
        try:
            out.append(format_number(float(value)))  # type: ignore[arg-type]
        except OverflowError:
            raise NonFiniteNumberError from None
    elif kind is dict:
        _object(value, out)  # type: ignore[arg-type]
    elif kind is list or kind is tuple:
        out.append("[")
        items: list[object] | tuple[object, ...] = value  # type: ignore[assignment]
        for position, item in enumerate(items):
            if item is MISSING:
                raise CanonicalError("JSON arrays cannot hold an absent element")
            if position:
                out.append(",")
            _value(item, out)
        out.append("]")
    elif kind is msgspec.Raw:
        out.append(bytes(value).decode())  # type: ignore[call-overload]
    elif isinstance(value, msgspec.Struct):
        if value.__struct_config__.array_like:
            raise CanonicalError("an array-like Struct has no canonical object form")
        _object(_struct_members(value), out)
    else:
        raise CanonicalError(f"a value of type {kind.__name__} has no JSON form")


# --------------------------------------------------------------------------- Structs

_INT: Final = 1
_STRUCT: Final = 2
_ANY: Final = 3
_FLAT: Final = 4
_Check = tuple[int, int, type | None]
_Plan = tuple[_Check, ...] | None
_plans: dict[type, _Plan] = {}
_SAFE_TYPES: Final = (
    msgspec.inspect.StrType,
    msgspec.inspect.BoolType,
    msgspec.inspect.NoneType,
    msgspec.inspect.RawType,
)


def _field_check(kind: msgspec.inspect.Type) -> tuple[int, type | None] | None:
    """Classify a field type: nothing to check, an int to bound, a Struct, or anything.

    A field declared as one Struct class whose own fields need no look is
    marked flat: a value of exactly that class is skipped, anything else
    (a subclass, say) is looked at like any other value.
    """
    members = kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,)
    found: set[tuple[int, type | None]] = set()
    for member in members:
        if isinstance(member, _SAFE_TYPES):
            continue
        if isinstance(member, msgspec.inspect.LiteralType):
            if all(type(choice) is str for choice in member.values):
                continue
            found.add((_INT, None))
        elif isinstance(member, msgspec.inspect.IntType):
            found.add((_INT, None))
        elif isinstance(member, msgspec.inspect.StructType):
            flat = _plans.get(member.cls, False) == () or _make_plan(member.cls) == ()
            found.add((_FLAT, member.cls) if flat else (_STRUCT, None))
        else:
            return (_ANY, None)
    if len(found) > 1:
        return (_ANY, None)
    return found.pop() if found else None


def _make_plan(cls: type) -> _Plan:
    """Work out once per Struct class which fields need a look before msgspec writes it."""
    if cls in _plans:
        return _plans[cls]
    _plans[cls] = None  # a class that contains itself is left to the exact path
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    plan: _Plan = None
    if (
        not info.array_like
        and info.tag_field is None
        and all(_learn_key(field.encode_name) for field in info.fields)
    ):
        checks = [(index, _field_check(field.type)) for index, field in enumerate(info.fields)]
        plan = tuple((index, *check) for index, check in checks if check is not None)
    _plans[cls] = plan
    return plan


def _struct_plain(value: msgspec.Struct) -> bool:  # noqa: C901 - one branch per field kind, on the hot path
    """Tell whether msgspec's sorted encoding of a Struct is already canonical."""
    plan = _plans.get(type(value), False)
    if plan is False:
        plan = _make_plan(type(value))
    if plan is None:
        return False
    fields = msgspec.structs.astuple(value)
    # plan is a tuple here; mypy keeps bool from the lookup's False default (one lookup, hot path).
    for index, kind, cls in plan:  # type: ignore[union-attr]
        item = fields[index]
        if kind == _INT:
            if type(item) is int:
                if -_MAX_SAFE <= item <= _MAX_SAFE:
                    continue
                return False
        elif kind == _FLAT and type(item) is cls:
            continue
        if isinstance(item, msgspec.Struct):
            if _struct_plain(item):
                continue
            return False
        if item is MISSING or item is None or (kind == _ANY and _plain(item)):
            continue
        return False
    return True


_EMPTY_DEFAULTS: Final = (list, dict, set)


def _struct_members(value: msgspec.Struct) -> dict[str, object]:
    """The members msgspec would write for a Struct, as a dict for the exact path."""
    config = value.__struct_config__
    members: dict[str, object] = {}
    if config.tag_field is not None:
        members[config.tag_field] = config.tag
    for field in msgspec.structs.fields(value):
        item = getattr(value, field.name)
        # msgspec omits a default by identity, and a factory default only when
        # the factory is list, dict or set and the value an empty one of it.
        factory = field.default_factory
        if config.omit_defaults and (
            item is field.default
            or (factory in _EMPTY_DEFAULTS and type(item) is factory and not item)
        ):
            continue
        members[field.encode_name] = item
    return members


# --------------------------------------------------------------------------- public API


def encode(value: object) -> bytes:
    """Return the original's canonical JSON bytes for ``value``.

    Raises:
        CanonicalError: the value has no JSON form (non-finite number,
            non-text key, absent array element, foreign type).
    """
    try:
        fast = _struct_plain(value) if isinstance(value, msgspec.Struct) else _plain(value)
    except RecursionError:
        raise CanonicalError(_TOO_DEEP) from None
    if fast:
        try:
            return _ENCODER.encode(value)
        except UnicodeEncodeError:
            pass  # a surrogate somewhere: the slow path writes it as JavaScript does
    out: list[str] = []
    try:
        _value(value, out)
    except RecursionError:
        raise CanonicalError(_TOO_DEEP) from None
    return "".join(out).encode()


def raw(value: object) -> msgspec.Raw:
    """Canonical bytes of ``value`` wrapped for embedding verbatim in a Struct field."""
    return msgspec.Raw(encode(value))


def digest(value: object) -> bytes:
    """SHA-256 of the canonical bytes of ``value`` (32 raw bytes)."""
    return hashlib.sha256(encode(value)).digest()


def hex_digest(value: object) -> str:
    """Lower-case hex SHA-256 of the canonical bytes of ``value``."""
    return hashlib.sha256(encode(value)).hexdigest()


def utf8(text: str) -> bytes:
    """The UTF-8 bytes Node writes for ``text``: each lone surrogate becomes U+FFFD.

    A surrogate pair held as two Python code points is one character there,
    so it is joined first.  Text without surrogates takes the plain encoder.
    """
    try:
        return text.encode()
    except UnicodeEncodeError:
        joined = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")
        return joined.encode()


def text_digest(text: str) -> bytes:
    """SHA-256 of the UTF-8 bytes of ``text`` as Node writes them (32 raw bytes)."""
    return hashlib.sha256(utf8(text)).digest()


def text_hex_digest(text: str) -> str:
    """Lower-case hex SHA-256 of the UTF-8 bytes of ``text`` as Node writes them."""
    return hashlib.sha256(utf8(text)).hexdigest()


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _loads(line: bytes, text: str) -> object:
    try:
        return _DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass  # lone surrogate escapes and huge exponents: let the exact parser decide
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise NotJsonError(
            f"not JSON: {error.msg} at byte {len(text[: error.pos].encode())}",
            offset=error.pos,
        ) from None
    except ValueError as error:  # NaN, Infinity, or an integer too long to convert
        raise NotJsonError(f"not JSON: {error}") from None


_STRINGS: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
"""A JSON string, its runs of plain bytes taken whole: four times faster than one byte a
step on a line of long strings, and the same strings (ADR 0105)."""
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_BRACKETS_OR_QUOTES: Final = bytes(b for b in range(256) if b not in b'[]{}"')


def nesting_depth(line: bytes, limit: int) -> int:
    """How deeply a JSON text nests arrays and objects, counted up to ``limit + 1``.

    Cheap when the text has few brackets (depth never exceeds their count);
    otherwise strings are blanked and only the brackets are walked.  A text
    without a backslash and with its quotes in pairs has its strings between
    them, every second piece of a split at the quotes (ADR 0105).
    """
    opened = line.count(b"[") + line.count(b"{")
    if opened <= limit:
        return opened
    if b"\\" not in line and line.count(b'"') % 2 == 0:
        brackets = b"".join(line.translate(None, _NOT_BRACKETS_OR_QUOTES).split(b'"')[::2])
    else:
        brackets = _STRINGS.sub(b'""', line).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


_PROOF_DEPTH: Final = 64
"""Lines that may nest deeper take the exact check, whose walk recurses."""
_ZEROED: Final = bytes.maketrans(b"123456789", b"000000000")
_BELOW_U_D000: Final = bytes(range(0xED))
"""Every byte but the UTF-8 lead bytes of U+D000 on (where code point and UTF-16 order part)."""
_LONG_RUN: Final = b"0" * 16
"""Sixteen digits: where an integer beyond 2**53 may start."""
_NUMBER_OPENS: Final = b":,[-"
_HIGH: Final = re.compile(rb"[\xed-\xff]")
_BACKSLASH: Final = ord("\\")


class _UnprovenError(Exception):
    """A double whose text ``Number::toString`` does not give back: the exact check decides."""


def _double(text: str) -> float:
    """A double of the line, decoded only when the exact encoder writes it as the line does."""
    number = float(text)
    if math.isfinite(number) and format_number(number) == text:
        return number
    raise _UnprovenError


_PROOF_DECODER: Final = msgspec.json.Decoder(float_hook=_double)


def _proven(line: bytes) -> object:
    """The value of ``line`` if it is proven canonical without the exact walk, else ``MISSING``.

    The proof: msgspec decodes it, each double's text is ``Number::toString``'s
    (:func:`_double`), msgspec's sorted encoding gives the line back, and the
    bytes hold nothing msgspec writes otherwise than the exact encoder:

    * no member but an object's first whose key opens with a digit (it may
      be an array index, which the exact encoder puts first): in msgspec's
      compact output a quote after ``,`` opens a string or closes one, and a
      closing quote is followed by ``,}]:``, so ``,"`` and a digit open a
      key (or an array's text, refused too).  An index key that msgspec
      writes first is also first by the exact rules;
    * no ``__proto__`` member;
    * no key with a character from U+D000 on, which sorts otherwise by
      UTF-16 (:func:`_high_key`);
    * no run of sixteen digits after ``:,[-`` or at the start (an integer
      beyond 2**53, which the exact encoder writes as a double);
    * no nesting deeper than :data:`_PROOF_DEPTH`.

    msgspec escapes every other character as the exact encoder does (a unit
    test holds the two to that, code point by code point).
    """
    if nesting_depth(line, _PROOF_DEPTH) > _PROOF_DEPTH:  # counts the brackets first itself
        return MISSING
    try:
        value = _PROOF_DECODER.decode(line)
        again = _ENCODER.encode(value)
    except (msgspec.DecodeError, msgspec.EncodeError, _UnprovenError, RecursionError):
        return MISSING
    if again != line or b'"__proto__":' in line:
        return MISSING
    if not line.isascii() and line.translate(None, _BELOW_U_D000) and _high_key(line):
        return MISSING
    zeroed = line.translate(_ZEROED)
    if b',"0' in zeroed or not _short_integers(zeroed):
        return MISSING
    return value


def _high_key(line: bytes) -> bool:
    """Whether a key holds a character from U+D000 on (the line being msgspec's compact output).

    Such a character is inside a string; the string ends at the first quote
    after it that no odd run of backslashes escapes, and it is a key when
    ``:`` follows that quote.
    """
    found = _HIGH.search(line)
    while found is not None:
        end = _closing_quote(line, found.end())
        if line[end + 1 : end + 2] == b":":
            return True
        found = _HIGH.search(line, end)
    return False


def _closing_quote(line: bytes, start: int) -> int:
    """Where the string that holds ``start`` ends: its first unescaped quote from there."""
    quote = line.find(b'"', start)
    while quote > 0:
        before = quote
        while line[before - 1] == _BACKSLASH:
            before -= 1
        if (quote - before) % 2 == 0:
            return quote
        quote = line.find(b'"', quote + 1)
    return len(line)


def _short_integers(zeroed: bytes) -> bool:
    """No run of sixteen digits that may be a number (after ``:,[-`` or at the start)."""
    found = zeroed.find(_LONG_RUN)
    while found >= 0:
        start = len(zeroed[:found].rstrip(b"0"))
        if start == 0 or zeroed[start - 1] in _NUMBER_OPENS:
            return False
        found = zeroed.find(_LONG_RUN, found + len(_LONG_RUN))
    return True


def _line_text(line: bytes, limit: int) -> str:
    """The text of one line of at most ``limit`` bytes: UTF-8 without a byte order mark.

    Raises:
        LineTooLongError: more than ``limit`` bytes.
        InvalidUtf8Error: a byte order mark or bytes that are not UTF-8.
    """
    if len(line) > limit:
        raise LineTooLongError(len(line), limit)
    if line.startswith(_BOM):
        raise InvalidUtf8Error("a byte order mark is not allowed", offset=0)
    try:
        return line.decode()
    except UnicodeDecodeError as error:
        raise InvalidUtf8Error(f"invalid UTF-8 at byte {error.start}", offset=error.start) from None


def canonical_line(line: bytes, *, limit: int = MAX_LINE_BYTES) -> bytes:
    """The canonical form of one JSON line, whatever its spacing, key order or number forms.

    For tools that write JSON by hand (``pwf request --canonicalize``): the
    value is read as :func:`parse_line` reads it and written again.

    Raises:
        LineTooLongError: more than ``limit`` bytes.
        InvalidUtf8Error: a byte order mark or bytes that are not UTF-8.
        NotJsonError: the text does not parse.
        NonCanonicalLineError: the value has no canonical form.
    """
    return _reencoded(line, _line_text(line, limit), "no canonical JSON form")[1]


def parse_line(line: bytes, *, limit: int = MAX_LINE_BYTES) -> object:
    r"""Parse one line that must already be canonical; return its value.

    The line is accepted only if re-encoding the parsed value gives the same
    bytes, which refuses whitespace, reordered or duplicate keys, ``1.0``,
    ``1E2``, ``-0``, ``\\/``, upper-case escapes and ``__proto__`` members.

    Raises:
        LineTooLongError: more than ``limit`` bytes.
        InvalidUtf8Error: a byte order mark or bytes that are not UTF-8.
        NotJsonError: the text does not parse.
        NonCanonicalLineError: it parses but is not canonical.
    """
    text = _line_text(line, limit)
    value = _proven(line)
    if value is not MISSING:
        return value
    return _exact(line, text)


def _reencoded(line: bytes, text: str, refusal: str) -> tuple[object, bytes]:
    """The value of a line of valid UTF-8 and its canonical bytes.

    Raises:
        NotJsonError: the text does not parse, or nests deeper than the interpreter's stack.
        NonCanonicalLineError: the value has no canonical form (``refusal: why``).
    """
    try:
        value = _loads(line, text)
        return value, encode(value)
    except CanonicalError as error:
        raise NonCanonicalLineError(f"{refusal}: {error}") from None
    except RecursionError:
        # Nesting deeper than the interpreter's stack: refused, never a crash.
        raise NotJsonError(_TOO_DEEP) from None


def _exact(line: bytes, text: str) -> object:
    """:func:`parse_line`'s exact check of valid UTF-8: decode, re-encode, compare the bytes."""
    value, again = _reencoded(line, text, "not canonical JSON")
    if again != line:
        offset = next(
            (i for i, (a, b) in enumerate(zip(again, line, strict=False)) if a != b),
            min(len(again), len(line)),
        )
        raise NonCanonicalLineError(
            f"not canonical JSON (first difference at byte {offset})", offset=offset
        )
    return value
