"""Hostile lines for ``pwf request`` and ``pwf worker``, each built from one valid message.

An entry names what it tries, what must come back (``refused``: one
``line N: why`` and exit 2; ``answered``: one response line; ``silent``:
nothing, as for empty and comment lines; ``either``: one of the first two),
and how to build its line from a valid message of the protocol under test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from pwf import canonical

if TYPE_CHECKING:
    from collections.abc import Callable

Expect = Literal["refused", "answered", "silent", "either"]
Message = dict[str, Any]

MIB: Final = 1024 * 1024
SQL: Final = "'; DROP TABLE events;--"
CLIENT_IDS: Final = ("requestId", "clientId", "idempotencyKey", "runId")
WORKER_IDS: Final = ("messageId", "runId", "workerEpoch", "attemptId")


class Hostile(NamedTuple):
    """One corpus entry: its name, the expected answer per protocol, and its builder."""

    name: str
    client: Expect
    worker: Expect
    build: Callable[[Message], bytes]


def _with(message: Message, **members: object) -> Message:
    return {**message, **members}


def _payload_splice(text: bytes) -> Callable[[Message], bytes]:
    """Replace a placeholder payload member with raw ``text`` (no encoder would write it)."""

    def build(message: Message) -> bytes:
        line = canonical.encode(_with(message, payload={"n": "PLACEHOLDER"}))
        return line.replace(b'"n":"PLACEHOLDER"', text)

    return build


def _sized(size: int) -> Callable[[Message], bytes]:
    """A valid message padded to exactly ``size`` bytes (without the newline)."""

    def build(message: Message) -> bytes:
        empty = len(canonical.encode(_with(message, payload={"pad": ""})))
        return canonical.encode(_with(message, payload={"pad": "x" * (size - empty)}))

    return build


def _ids(value: object, fields: tuple[str, ...]) -> Callable[[Message], bytes]:
    """Every id member of the protocol (those the message has) set to ``value``."""

    def build(message: Message) -> bytes:
        chosen = {field: value for field in fields if field in message}
        return canonical.encode(_with(message, **chosen))

    return build


def _one_id(field: str, value: object) -> Callable[[Message], bytes]:
    return lambda message: canonical.encode(_with(message, **{field: value}))


def _prefixed(prefix: bytes, suffix: bytes = b"") -> Callable[[Message], bytes]:
    return lambda message: prefix + canonical.encode(message) + suffix


def _fixed(line: bytes) -> Callable[[Message], bytes]:
    return lambda _message: line


def _spaced(message: Message) -> bytes:
    return canonical.encode(message).replace(b":", b": ", 1)


def _unknown_member(message: Message) -> bytes:
    return canonical.encode(_with(message, zzUnknown=1))


def _sql_ids(message: Message) -> bytes:
    fields = CLIENT_IDS if "requestId" in message else WORKER_IDS
    return _ids(SQL, fields)(message)


def _number_id(message: Message) -> bytes:
    field = "requestId" if "requestId" in message else "messageId"
    return canonical.encode(_with(message, **{field: 7}))


CORPUS: Final = (
    Hostile("number 1e400", "refused", "refused", _payload_splice(b'"n":1e400')),
    Hostile(
        "integer 10^30 spelled out", "refused", "refused", _payload_splice(b'"n":1' + b"0" * 30)
    ),
    Hostile("negative zero", "refused", "refused", _payload_splice(b'"n":-0')),
    Hostile(
        "10 000-deep nesting",
        "refused",
        "refused",
        _payload_splice(b'"n":' + b"[" * 10_000 + b"]" * 10_000),
    ),
    Hostile("raw NUL in a string", "refused", "refused", _payload_splice(b'"n":"a\x00b"')),
    Hostile("escaped NUL in a string", "answered", "answered", _payload_splice(b'"n":"a\\u0000b"')),
    Hostile("invalid UTF-8", "refused", "refused", _payload_splice(b'"n":"a\xff\xfeb"')),
    Hostile("duplicate keys", "refused", "refused", _payload_splice(b'"n":1,"n":2')),
    Hostile("byte order mark", "refused", "refused", _prefixed(b"\xef\xbb\xbf")),
    Hostile("carriage return before the newline", "refused", "refused", _prefixed(b"", b"\r")),
    Hostile("a space after a colon", "refused", "refused", _spaced),
    Hostile("unknown member", "refused", "answered", _unknown_member),
    Hostile("line of 1 MiB - 1 bytes", "answered", "answered", _sized(MIB - 1)),
    Hostile("line of 1 MiB", "refused", "refused", _sized(MIB)),
    Hostile("line of 1 MiB + 1 bytes", "refused", "refused", _sized(MIB + 1)),
    Hostile("SQL-looking ids", "answered", "answered", _sql_ids),
    Hostile(
        "lone surrogate in the payload", "answered", "answered", _payload_splice(b'"n":"\\ud800"')
    ),
    Hostile("number as an id", "refused", "refused", _number_id),
    Hostile(
        "payload as a list", "either", "either", lambda m: canonical.encode(_with(m, payload=[1]))
    ),
    Hostile("array", "refused", "refused", _fixed(b"[]")),
    Hostile("null", "refused", "refused", _fixed(b"null")),
    Hostile("string", "refused", "refused", _fixed(b'"request"')),
    Hostile("empty line", "silent", "silent", _fixed(b"")),
    Hostile("spaces only", "refused", "refused", _fixed(b"   ")),
    Hostile("comment", "silent", "silent", _fixed(b"# a comment")),
    Hostile("bad #at directive", "refused", "refused", _fixed(b"#at soon")),
)
"""What every protocol line must survive; ``client`` and ``worker`` say what comes back."""


SURROGATE_IDS: Final = (
    ("client", "requestId"),
    ("client", "clientId"),
    ("client", "idempotencyKey"),
    ("client", "runId"),
    ("worker", "messageId"),
    ("worker", "runId"),
    ("worker", "workerEpoch"),
    ("worker", "attemptId"),
)
"""Ids holding a lone surrogate (``"\\ud800"`` in canonical JSON): protocol and member.
The original accepts them (ADR 0027); pwf keeps each id by its code units (ADR 0071)."""


def surrogate_id(field: str) -> Callable[[Message], bytes]:
    """A message whose ``field`` is ``x`` followed by a lone high surrogate."""
    return _one_id(field, "x\ud800")
