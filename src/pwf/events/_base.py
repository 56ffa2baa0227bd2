"""The event envelope and the base of every event; imports canonical and errors.

An event is one canonical-JSON object (DOMAIN §2.1)::

    {"actor":{…},"at":…,"batch":…,"cause":{…},"contentHash":"…","data":{…},
     "eventId":"…","prevHash":"…","schema":"pwf.event.v1","seq":…,"type":"…"}

``type`` is the event's explicit dotted tag and ``data`` its fields; the tag
is not repeated inside ``data`` (ADR 0003).  ``contentHash`` is the SHA-256 of
the canonical envelope without that member; ``prevHash`` chains to the event
before.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, ClassVar, Final, Literal, TypeVar

import msgspec

from pwf import canonical
from pwf.errors import InputError

SCHEMA: Final = "pwf.event.v1"

MAX_EVENT_BYTES: Final = 8 * 1_048_576
"""Largest stored event: eight protocol lines, as events carry receipts and inputs."""

SafeInt = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]
"""A non-negative integer that survives the original's conversion to a double."""

Positive = Annotated[int, msgspec.Meta(ge=1, le=2**53 - 1)]
"""A positive integer that survives the original's conversion to a double (seq, revision, epoch)."""

OpaqueId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
"""A non-empty opaque identifier (the byte limit is checked where ids enter)."""

Hex256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
"""A lower-case hex SHA-256 digest."""

_Member = TypeVar("_Member", bound=str)


def one_of(value: object, members: tuple[_Member, ...]) -> _Member | None:
    """The member of a Literal's ``members`` equal to ``value``, else None.

    Narrows a value read from outside (a payload, a row) to a Literal type by
    checking it at run time: the answer is the member itself, never a cast.
    """
    for member in members:
        if member == value:
            return member
    return None


ActorType = Literal[
    "session", "host", "controller", "channel", "human", "policy", "control", "system"
]


class Actor(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Who caused a batch (the original's actor set)."""

    type: ActorType
    id: OpaqueId


class Cause(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel", omit_defaults=True
):
    """The client request or worker message a batch answers, when there is one."""

    operation: str
    request_id: str | None = None
    client_id: str | None = None
    idempotency_key: str | None = None
    fingerprint: Hex256 | None = None
    worker_epoch: str | None = None
    message_id: str | None = None


class Event(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel", omit_defaults=True
):
    """A fact.  Subclasses set a stable dotted ``TAG``; fields only grow (ADR 0003)."""

    TAG: ClassVar[str]
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ()
    """Fields holding JSON values that the blob store keeps by hash (DOMAIN §3.3)."""
    TEXT_BLOBS: ClassVar[tuple[str, ...]] = ()
    """Fields holding text that the blob store keeps by hash."""

    def index_run_id(self) -> str | None:
        """The run this event is about, for the log's run index."""
        value = getattr(self, "run_id", None)
        return value if isinstance(value, str) else None

    def index_session_id(self) -> str | None:
        """The session this event is about, for the log's session index."""
        for name in ("target_session_id", "session_id", "origin_session_id"):
            value = getattr(self, name, None)
            if isinstance(value, str):
                return value
        return None


class _Sealing(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """The envelope as written; ``content_hash`` is absent while it is hashed."""

    actor: Actor
    at: int
    batch: int
    data: Event
    event_id: str
    prev_hash: str | None
    schema: str
    seq: int
    type: str
    cause: Cause | None = None
    content_hash: str | msgspec.UnsetType = msgspec.UNSET


class Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """An event as read back from the log; ``data`` stays raw until its tag is known."""

    actor: Actor
    at: SafeInt
    batch: Positive
    content_hash: Hex256
    data: msgspec.Raw
    event_id: OpaqueId
    prev_hash: Hex256 | None
    schema: Literal["pwf.event.v1"]
    seq: Positive
    type: str
    cause: Cause | None = None


class Entry(msgspec.Struct, frozen=True):
    """One event: the envelope's members and the typed event."""

    seq: int
    batch: int
    at: int
    type: str
    actor: Actor
    cause: Cause | None
    event: Event
    event_id: str
    content_hash: str
    prev_hash: str | None


class Sealed(msgspec.Struct, frozen=True):
    """An event ready to store: the entry and its exact canonical bytes."""

    entry: Entry
    body: bytes


def seal(  # noqa: PLR0913 - the envelope has this many members
    event: Event,
    *,
    seq: int,
    batch: int,
    at: int,
    actor: Actor,
    cause: Cause | None,
    event_id: str,
    prev_hash: str | None,
) -> Sealed:
    """Write an event's canonical bytes and compute its content hash."""
    draft = _Sealing(
        actor=actor,
        at=at,
        batch=batch,
        data=event,
        event_id=event_id,
        prev_hash=prev_hash,
        schema=SCHEMA,
        seq=seq,
        type=event.TAG,
        cause=cause,
    )
    unsealed = canonical.encode(draft)
    content_hash = hashlib.sha256(unsealed).hexdigest()
    body = _with_hash(unsealed, content_hash)
    if body is None:
        body = canonical.encode(msgspec.structs.replace(draft, content_hash=content_hash))
    if len(body) > MAX_EVENT_BYTES:
        raise InputError(f"{event.TAG} event of {len(body)} bytes exceeds {MAX_EVENT_BYTES} bytes")
    return Sealed(entry=entry_of(draft, event, content_hash), body=body)


def entry_of(envelope: _Sealing | Envelope, event: Event, content_hash: str) -> Entry:
    """The entry of an envelope, as sealed or as read back, with its typed event."""
    return Entry(
        seq=envelope.seq,
        batch=envelope.batch,
        at=envelope.at,
        type=envelope.type,
        actor=envelope.actor,
        cause=envelope.cause,
        event=event,
        event_id=envelope.event_id,
        content_hash=content_hash,
        prev_hash=envelope.prev_hash,
    )


_DATA: Final = b',"data":'


def _with_hash(unsealed: bytes, content_hash: str) -> bytes | None:
    """The sealed bytes: ``unsealed`` with ``"contentHash"`` in its sorted place, before ``data``.

    A canonical object is its members' canonical bytes in key order, so adding
    a member whose value is plain ASCII text is inserting its bytes before the
    next key.  The members before ``data`` (``actor``, ``at``, ``batch``,
    ``cause``) hold no key ``data``, and a string's own quotes are escaped, so
    the first ``,"data":`` is the envelope's.  Encoding the envelope a second
    time gave the same bytes at twice the cost.  None when it is not found.
    """
    at = unsealed.find(_DATA)
    if at < 0:
        return None
    at += 1
    return b"".join(
        (unsealed[:at], b'"contentHash":"', content_hash.encode(), b'",', unsealed[at:])
    )
