"""The client protocol ``pi-workflows.client.v1``; imports canonical, errors and msgspec.

NDJSON over a local socket (DOMAIN §6): each line is one canonical JSON object
of type ``hello``, ``request``, ``response`` or ``event``.  Unknown members,
wrong schemas, bad ids and non-canonical bytes are refused with
:class:`~pwf.errors.ProtocolError`; the host then closes the connection
without answering.

Messages are frozen Structs with Python field names; on the wire the names
are camelCase and absent optional members are omitted, never ``null``.
A request's fingerprint (DOMAIN §7.1) is derived from its members, so a
request built here and one parsed from the wire agree on it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import TYPE_CHECKING, Final, TypeAlias, TypeGuard, get_args

import msgspec

from pwf import canonical
from pwf.errors import Outcome, ProtocolError
from pwf.protocol._lines import (
    MAX_MESSAGE_DEPTH,
    Dialect,
    encode_message,
    encode_object,
    one_of,
    read_object,
    wire_members,
)
from pwf.protocol.wire import CLIENT_SCHEMA, MAX_PROTOCOL_MESSAGE_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "CLIENT_SCHEMA",
    "EVENT_NAMES",
    "MAX_MESSAGE_DEPTH",
    "MAX_OPAQUE_ID_BYTES",
    "MAX_PROTOCOL_MESSAGE_BYTES",
    "MAX_SAFE_INTEGER",
    "OPERATIONS",
    "OUTCOMES",
    "TOO_LARGE",
    "VIEW_OPERATIONS",
    "ClientEvent",
    "ClientHello",
    "ClientMessage",
    "ClientRequest",
    "ClientResponse",
    "collapse_error",
    "encode_event",
    "encode_hello",
    "encode_line",
    "encode_request",
    "encode_response",
    "is_safe_integer",
    "js_length",
    "parse_event",
    "parse_hello",
    "parse_message",
    "parse_request",
    "parse_response",
    "payload_member",
    "request_fingerprint",
]

MAX_OPAQUE_ID_BYTES: Final = 256
"""Opaque ids are non-empty text of at most this many UTF-8 bytes."""

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: revisions must not exceed it."""

OUTCOMES: Final = frozenset(get_args(Outcome))

EVENT_NAMES: Final = frozenset(
    {"runs", "run_snapshot", "run_patch", "run_page", "session_snapshot", "unavailable"}
)

OPERATIONS: Final = frozenset(
    {
        "run.start",
        "run.pause",
        "run.resume",
        "run.cancel",
        "run.status",
        "run.list",
        "checkpoint.answer",
        "decision.answer",
        "interaction.submit",
        "interaction.update",
        "workflowMessage.reportBranch",
        "workflowTurn.report",
        "sessionView.clearTerminal",
        "run.restart",
        "run.changeSettings",
        "followUp.queue",
        "followUp.remove",
        "session.record",
        "channel.reload",
        "channel.recover",
        "controller.list",
        "controller.get",
        "controller.apply",
        "controller.reconcile",
        "controller.delete",
        "host.status",
        "host.stop",
        "state.backup",
        "state.prune",
    }
)
"""The 29 operations the ``host_commands`` CHECK allows (DOMAIN §8)."""

VIEW_OPERATIONS: Final = frozenset(
    {
        "view.runs.watch",
        "view.runs.page",
        "view.run.get",
        "view.run.watch",
        "view.run.unwatch",
        "view.page",
        "view.content",
        "view.session.watch",
        "state.status",
        "state.verify",
        "channel.status",
    }
)
"""The 11 operations answered without ``host_commands`` (HOST.md §2); 40 with :data:`OPERATIONS`."""

TOO_LARGE: Final = "Client protocol message exceeds 1 MiB"
"""The one error text for every size refusal, as the original words it."""
_DIALECT: Final = Dialect(
    name="Client",
    limit=MAX_PROTOCOL_MESSAGE_BYTES,
    too_large=TOO_LARGE,
    not_canonical="Client protocol message must use canonical JSON",
    not_object="Client protocol message must be an object",
)

_TYPES: Final = frozenset({"hello", "request", "response", "event"})
_BREAKS: Final = re.compile(r"[\r\n\t]+")
# What JavaScript's String.prototype.trim removes; Python's str.strip differs
# (it also strips U+001C..U+001F and U+0085, and keeps U+FEFF).
_JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_MAX_ERROR_UNITS: Final = 1000
_SHOWN_CHARS: Final = 100


class ClientHello(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The host's greeting, the first line on every connection."""

    schema: str = CLIENT_SCHEMA
    type: str = "hello"
    connection_id: str
    package_version: str


class ClientRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel", dict=True):
    """One client request; ``fingerprint`` identifies it for idempotency."""

    schema: str = CLIENT_SCHEMA
    type: str = "request"
    request_id: str
    client_id: str
    operation: str
    idempotency_key: str
    payload: object
    run_id: str | None = None
    expected_revision: int | None = None

    @functools.cached_property
    def fingerprint(self) -> str:
        """Hex SHA-256 of the canonical request without its ``requestId`` (DOMAIN §7.1)."""
        return request_fingerprint(wire_members(self))


class ClientResponse(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The answer to one request; ``receipt`` is :data:`canonical.MISSING` when absent."""

    schema: str = CLIENT_SCHEMA
    type: str = "response"
    request_id: str
    outcome: str
    revision: int | None = None
    receipt: object = canonical.MISSING
    error: str | None = None


class ClientEvent(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pushed view update for one subscription."""

    schema: str = CLIENT_SCHEMA
    type: str = "event"
    subscription_id: str
    event: str
    payload: object
    revision: int | None = None
    run_id: str | None = None


ClientMessage: TypeAlias = ClientHello | ClientRequest | ClientResponse | ClientEvent

# --------------------------------------------------------------------------- field checks


def _shown(text: str) -> str:
    """A wire value fit for a one-line error message."""
    line = _BREAKS.sub(" ", text)
    return line if len(line) <= _SHOWN_CHARS else line[: _SHOWN_CHARS - 3] + "..."


def _header(members: Mapping[str, object], kind: str, allowed: frozenset[str]) -> None:
    """Check schema, type and that every member is known."""
    if members.get("schema") != CLIENT_SCHEMA:
        raise ProtocolError("Invalid client protocol schema")
    found = members.get("type")
    if found != kind:
        if isinstance(found, str) and found in _TYPES:
            raise ProtocolError(f"Expected client {kind}")
        raise ProtocolError("Invalid client protocol message type")
    for key in members:
        if key not in allowed:
            raise ProtocolError(f"Unknown client protocol field: {_shown(key)}")


def _opaque(members: Mapping[str, object], name: str) -> str:
    """A required opaque id: non-empty text of at most 256 UTF-8 bytes."""
    value = members.get(name)
    if not _is_opaque(value):
        raise ProtocolError(f"{name} must be nonempty text of at most 256 bytes")
    return value


def _is_opaque(value: object) -> TypeGuard[str]:
    """Tell whether a value is non-empty text of at most 256 UTF-8 bytes.

    A character takes at most 4 bytes (a lone surrogate 3), so text of at
    most 64 characters fits without being encoded to count its bytes.
    """
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_OPAQUE_ID_BYTES
        and (
            len(value) <= MAX_OPAQUE_ID_BYTES // 4
            or len(value.encode("utf-8", "surrogatepass")) <= MAX_OPAQUE_ID_BYTES
        )
    )


def _optional_opaque(members: Mapping[str, object], name: str) -> str | None:
    """An opaque id that may be absent."""
    return _opaque(members, name) if name in members else None


def _text(members: Mapping[str, object], name: str, label: str) -> str:
    """Required non-empty text."""
    value = members.get(name)
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"{label} must be nonempty text")
    return value


def is_safe_integer(value: object, minimum: int = 0) -> TypeGuard[int]:
    """Tell whether a value is an integer from ``minimum`` to the largest safe one (bools are not).

    The one check of every protocol integer: a revision, and the worker
    protocol's generation and expected revision.
    """
    return type(value) is int and minimum <= value <= MAX_SAFE_INTEGER


def js_length(text: str) -> int:
    """JavaScript's ``length``: UTF-16 code units, so characters outside the BMP count twice."""
    return len(text) + sum(char > "\uffff" for char in text)


def _revision(members: Mapping[str, object], name: str, label: str) -> int | None:
    """An optional safe non-negative integer."""
    if name not in members:
        return None
    value = members[name]
    if not is_safe_integer(value):
        raise ProtocolError(f"{label} must be a non-negative integer")
    return value


def _payload(members: Mapping[str, object], label: str) -> object:
    """The payload member, which must be present and may be null."""
    if "payload" not in members:
        raise ProtocolError(f"Client {label} payload is required")
    return members["payload"]


def _operation(members: Mapping[str, object]) -> str:
    """A known operation name (recorded or view)."""
    value = members.get("operation")
    if not isinstance(value, str) or not value:
        raise ProtocolError("operation must be nonempty text")
    if value not in OPERATIONS and value not in VIEW_OPERATIONS:
        raise ProtocolError(f"Unknown client operation: {_shown(value)}")
    return value


# --------------------------------------------------------------------------- readers

_HELLO_KEYS: Final = frozenset({"schema", "type", "connectionId", "packageVersion"})
_REQUEST_KEYS: Final = frozenset(
    {
        "schema",
        "type",
        "requestId",
        "clientId",
        "operation",
        "idempotencyKey",
        "runId",
        "expectedRevision",
        "payload",
    }
)
_RESPONSE_KEYS: Final = frozenset(
    {"schema", "type", "requestId", "outcome", "revision", "receipt", "error"}
)
_EVENT_KEYS: Final = frozenset(
    {"schema", "type", "subscriptionId", "event", "revision", "runId", "payload"}
)


def _read_hello(members: Mapping[str, object]) -> ClientHello:
    _header(members, "hello", _HELLO_KEYS)
    return ClientHello(
        connection_id=_opaque(members, "connectionId"),
        package_version=_text(members, "packageVersion", "packageVersion"),
    )


def _read_request(members: Mapping[str, object]) -> ClientRequest:
    _header(members, "request", _REQUEST_KEYS)
    return ClientRequest(
        request_id=_opaque(members, "requestId"),
        client_id=_opaque(members, "clientId"),
        idempotency_key=_opaque(members, "idempotencyKey"),
        operation=_operation(members),
        run_id=_optional_opaque(members, "runId"),
        expected_revision=_revision(members, "expectedRevision", "request expectedRevision"),
        payload=_payload(members, "request"),
    )


def _read_response(members: Mapping[str, object]) -> ClientResponse:
    _header(members, "response", _RESPONSE_KEYS)
    return ClientResponse(
        request_id=_opaque(members, "requestId"),
        outcome=one_of(members, "outcome", OUTCOMES, "Invalid client response outcome"),
        revision=_revision(members, "revision", "response revision"),
        error=_text(members, "error", "response error") if "error" in members else None,
        receipt=members.get("receipt", canonical.MISSING),
    )


def _read_event(members: Mapping[str, object]) -> ClientEvent:
    _header(members, "event", _EVENT_KEYS)
    event = one_of(members, "event", EVENT_NAMES, "Invalid client event name")
    return ClientEvent(
        subscription_id=_opaque(members, "subscriptionId"),
        event=event,
        revision=_revision(members, "revision", "event revision"),
        run_id=_optional_opaque(members, "runId"),
        payload=_payload(members, "event"),
    )


_READERS: Final[dict[str, Callable[[Mapping[str, object]], ClientMessage]]] = {
    "hello": _read_hello,
    "request": _read_request,
    "response": _read_response,
    "event": _read_event,
}

# --------------------------------------------------------------------------- parsing


def parse_message(line: bytes) -> ClientMessage:
    """Parse one line (without its newline) of any of the four message types.

    Raises:
        ProtocolError: the line is too long, not canonical, or not a valid message.
    """
    members = read_object(line, _DIALECT)
    if members.get("schema") != CLIENT_SCHEMA:
        raise ProtocolError("Invalid client protocol schema")
    kind = members.get("type")
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        raise ProtocolError("Invalid client protocol message type")
    return reader(members)


def parse_hello(line: bytes) -> ClientHello:
    """Parse a hello line (without its newline).

    Raises:
        ProtocolError: the line is not a valid hello.
    """
    return _read_hello(read_object(line, _DIALECT))


def parse_request(line: bytes) -> ClientRequest:
    """Parse a request line (without its newline); its fingerprint comes with it.

    The fingerprint is hashed from the line's own bytes (:func:`_line_fingerprint`),
    so the request is not encoded a second time to get it.

    Raises:
        ProtocolError: the line is not a valid request (DOMAIN §6: no response is sent).
    """
    request = _read_request(read_object(line, _DIALECT))
    fingerprint = _line_fingerprint(line, request.request_id)
    if fingerprint is not None:
        request.__dict__["fingerprint"] = fingerprint  # what the cached property would compute
    request.__dict__[_LINE] = line  # its payload members' bytes, for payload_member
    return request


_LINE: Final = "_line"
"""Where :func:`parse_request` keeps the canonical line a request was read from."""
_MEMBERS: Final = "_payload_members"
"""Where :func:`payload_member` keeps the line's payload members, once decoded."""


class _LinePayload(msgspec.Struct):
    """A request line's payload members, each as the bytes the line holds (unknown keys skipped)."""

    payload: dict[str, msgspec.Raw]


_LINE_PAYLOAD: Final = msgspec.json.Decoder(_LinePayload)


def payload_member(request: ClientRequest, name: str) -> msgspec.Raw | None:
    """The canonical bytes of the payload member ``name``, as the request's line holds them.

    A request read by :func:`parse_request` came on a line proven
    canonical, and a member of a canonical object is written as its value's
    canonical bytes, so they are the very bytes ``canonical.encode`` would
    write for the value: a decider keeps them instead of encoding the value
    a second time (ADR 0105).  The members are decoded from the line the
    first time one is asked for.  None when the member is absent, or the
    request was not read from a line (built in process), or its payload is
    not an object msgspec reads (a caller then encodes the value).
    """
    members: dict[str, msgspec.Raw] | None = request.__dict__.get(_MEMBERS)
    if members is None:
        line = request.__dict__.get(_LINE)
        members = {}
        if line is not None:
            try:
                members = _LINE_PAYLOAD.decode(line).payload
            except msgspec.MsgspecError:
                members = {}
        request.__dict__[_MEMBERS] = members
    return members.get(name)


def _line_fingerprint(line: bytes, request_id: str) -> str | None:
    """The fingerprint of a canonical request line: its bytes without the ``requestId`` member.

    A canonical object is its members' bytes in key order, so dropping one
    member and its comma leaves the canonical bytes of the rest.  ``requestId``
    sorts after ``clientId`` (never first) and before ``schema`` (never last),
    and the members after ``payload`` are strings whose own quotes are
    escaped, so the last ``,"requestId":<id>,`` in the line is the request's
    own member, even when the payload holds a ``requestId`` too.  None when it
    is not found; the property then encodes the members.
    """
    member = b',"requestId":' + _json_text(request_id)
    at = line.rfind(member)
    end = at + len(member)
    if at < 0 or line[end : end + 1] != b",":
        return None
    return hashlib.sha256(line[:at] + line[end:]).hexdigest()


def _json_text(text: str) -> bytes:
    """The canonical bytes of a string: quoted as is when it holds no character JSON escapes."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return b'"' + text.encode() + b'"'
    return canonical.encode(text)


def parse_response(line: bytes) -> ClientResponse:
    """Parse a response line (without its newline).

    Raises:
        ProtocolError: the line is not a valid response.
    """
    return _read_response(read_object(line, _DIALECT))


def parse_event(line: bytes) -> ClientEvent:
    """Parse an event line (without its newline).

    Raises:
        ProtocolError: the line is not a valid event.
    """
    return _read_event(read_object(line, _DIALECT))


def request_fingerprint(members: Mapping[str, object]) -> str:
    """Hex SHA-256 of the canonical request members without ``requestId`` (DOMAIN §7.1).

    Raises:
        CanonicalError: a member has no canonical JSON form.
    """
    return canonical.hex_digest({key: item for key, item in members.items() if key != "requestId"})


# --------------------------------------------------------------------------- encoding


def encode_hello(hello: ClientHello) -> bytes:
    """Canonical bytes of a hello, without a newline.

    Raises:
        ProtocolError: the hello is invalid or exceeds 1 MiB.
    """
    return encode_message(hello, _read_hello, _DIALECT)


def encode_request(request: ClientRequest) -> bytes:
    """Canonical bytes of a request, without a newline.

    Raises:
        ProtocolError: the request is invalid or exceeds 1 MiB.
    """
    return encode_message(request, _read_request, _DIALECT)


def encode_response(response: ClientResponse) -> bytes:
    """Canonical bytes of a response, without a newline.

    The host encodes one per request from typed values, so its fields are
    checked where they stand (:func:`_well_formed`); only a response that
    fails that check is read back as the wire members, for the error
    :func:`parse_response` would give.

    Raises:
        ProtocolError: the response is invalid or exceeds 1 MiB.
    """
    if _well_formed(response):
        return encode_object(wire_members(response), _DIALECT)
    return encode_message(response, _read_response, _DIALECT)


def _well_formed(response: ClientResponse) -> bool:
    """Whether :func:`_read_response` accepts the wire members of ``response``.

    A Struct has no unknown members, and an absent revision or error is
    None (omitted on the wire), so these are all the reader's checks.
    """
    error = response.error
    revision = response.revision
    outcome = response.outcome
    return (
        response.schema == CLIENT_SCHEMA
        and response.type == "response"
        and _is_opaque(response.request_id)
        and isinstance(outcome, str)
        and outcome in OUTCOMES
        and (revision is None or is_safe_integer(revision))
        and (error is None or (isinstance(error, str) and error != ""))
    )


def encode_event(event: ClientEvent) -> bytes:
    """Canonical bytes of an event, without a newline.

    Raises:
        ProtocolError: the event is invalid or exceeds 1 MiB.
    """
    return encode_message(event, _read_event, _DIALECT)


def encode_line(message: bytes) -> bytes:
    """Frame an encoded message as one NDJSON line.

    A message may be exactly 1 MiB, but its line (message plus newline) may
    not exceed 1 MiB either, so a sendable message is at most 1 MiB - 1 bytes.

    Raises:
        ProtocolError: the line would exceed 1 MiB, or the message holds a newline.
    """
    if len(message) + 1 > MAX_PROTOCOL_MESSAGE_BYTES:
        raise ProtocolError(TOO_LARGE)
    if b"\n" in message:
        raise ProtocolError("Client protocol message must not contain a newline")
    return message + b"\n"


def collapse_error(text: str) -> str:
    """Collapse an error text to the one line the connection layer sends (DOMAIN §6).

    Runs of CR, LF and TAB become one space and the ends are trimmed as
    JavaScript trims; an empty result becomes "Workflow request failed"; over
    1000 UTF-16 code units (JavaScript length) keeps the first 997 and adds "...".
    """
    line = _BREAKS.sub(" ", text).strip(_JS_WHITESPACE)
    if not line:
        return "Workflow request failed"
    if js_length(line) <= _MAX_ERROR_UNITS:
        return line
    units = line.encode("utf-16-le", "surrogatepass")[: (_MAX_ERROR_UNITS - 3) * 2]
    return units.decode("utf-16-le", "surrogatepass") + "..."
