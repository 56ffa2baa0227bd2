"""One Struct per fact, the registry of tags, and reading events back.

May import ``pwf.canonical`` and ``pwf.errors`` only.  Every event type is
listed in :data:`EVENT_TYPES`; its wire name is its explicit ``TAG`` and never
its class or module path, so refactors cannot break old logs.  A breaking
change gets a new tag plus a pure upcaster in :data:`UPCASTERS` (ADR 0003).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

import msgspec

from pwf import canonical
from pwf.errors import EventDataError, LineError, Outcome
from pwf.events._base import (
    MAX_EVENT_BYTES,
    SCHEMA,
    Actor,
    ActorType,
    Cause,
    Entry,
    Envelope,
    Event,
    Hex256,
    OpaqueId,
    SafeInt,
    Sealed,
    entry_of,
    one_of,
    seal,
)
from pwf.events.commands import CommandRecorded, CommandRefused
from pwf.events.host import HostClaimed, HostReleased, HostRenewed
from pwf.events.interactions import (
    InteractionCancelled,
    InteractionConsumed,
    InteractionRequested,
    InteractionRevised,
    InteractionSettled,
    MessageCancelled,
    MessageCreated,
    SubmissionFinished,
    SubmissionRecorded,
)
from pwf.events.log import LogCompacted, LogMigrated, LogPruned
from pwf.events.runs import (
    AttemptChanged,
    AttemptStarted,
    RunClaimed,
    RunFinished,
    RunLeaseRenewed,
    RunLeasesRenewed,
    RunPaused,
    RunQueueDoneForContinuation,
    RunReserved,
    RunResumed,
    RunStarted,
    RunUpdatePublished,
    RunWaiting,
    WorkerAttached,
    WorkerEnded,
    WorkerMessageRecorded,
)
from pwf.events.sessions import (
    BranchReported,
    CoordinatorAttached,
    CoordinatorDetached,
    DeadlineShifted,
    FollowUpClosed,
    FollowUpQueued,
    InteractionTimeoutStarted,
    MessageSent,
    TerminalCleared,
    TurnEnded,
    TurnStarted,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "EVENT_TYPES",
    "MAX_EVENT_BYTES",
    "REGISTRY",
    "SCHEMA",
    "UPCASTERS",
    "Actor",
    "ActorType",
    "AttemptChanged",
    "AttemptStarted",
    "BranchReported",
    "Cause",
    "CommandRecorded",
    "CommandRefused",
    "CoordinatorAttached",
    "CoordinatorDetached",
    "DeadlineShifted",
    "Entry",
    "Envelope",
    "Event",
    "FollowUpClosed",
    "FollowUpQueued",
    "Hex256",
    "HostClaimed",
    "HostReleased",
    "HostRenewed",
    "InteractionCancelled",
    "InteractionConsumed",
    "InteractionRequested",
    "InteractionRevised",
    "InteractionSettled",
    "InteractionTimeoutStarted",
    "LogCompacted",
    "LogMigrated",
    "LogPruned",
    "MessageCancelled",
    "MessageCreated",
    "MessageSent",
    "OpaqueId",
    "Outcome",
    "RunClaimed",
    "RunFinished",
    "RunLeaseRenewed",
    "RunLeasesRenewed",
    "RunPaused",
    "RunQueueDoneForContinuation",
    "RunReserved",
    "RunResumed",
    "RunStarted",
    "RunUpdatePublished",
    "RunWaiting",
    "SafeInt",
    "Sealed",
    "SubmissionFinished",
    "SubmissionRecorded",
    "TerminalCleared",
    "TurnEnded",
    "TurnStarted",
    "WorkerAttached",
    "WorkerEnded",
    "WorkerMessageRecorded",
    "content_hash_of",
    "one_of",
    "open_body",
    "open_canonical",
    "read_body",
    "seal",
]

EVENT_TYPES: Final[tuple[type[Event], ...]] = (
    CommandRecorded,
    CommandRefused,
    RunReserved,
    RunClaimed,
    RunStarted,
    RunWaiting,
    RunPaused,
    RunResumed,
    RunFinished,
    RunQueueDoneForContinuation,
    RunUpdatePublished,
    WorkerEnded,
    WorkerAttached,
    RunLeaseRenewed,
    RunLeasesRenewed,
    WorkerMessageRecorded,
    AttemptStarted,
    AttemptChanged,
    InteractionRequested,
    InteractionSettled,
    InteractionRevised,
    InteractionCancelled,
    InteractionConsumed,
    SubmissionRecorded,
    SubmissionFinished,
    MessageCreated,
    MessageCancelled,
    CoordinatorAttached,
    CoordinatorDetached,
    BranchReported,
    MessageSent,
    TurnStarted,
    TurnEnded,
    DeadlineShifted,
    InteractionTimeoutStarted,
    FollowUpQueued,
    FollowUpClosed,
    TerminalCleared,
    LogCompacted,
    LogMigrated,
    LogPruned,
    HostClaimed,
    HostRenewed,
    HostReleased,
)

REGISTRY: Final[Mapping[str, type[Event]]] = {cls.TAG: cls for cls in EVENT_TYPES}

UPCASTERS: Final[Mapping[str, Callable[[object], tuple[str, object]]]] = {}
"""Old tag -> pure function from old data to (new tag, new data)."""

_ENVELOPE: Final = msgspec.json.Decoder(Envelope)
_DATA: Final[dict[str, msgspec.json.Decoder[Event]]] = {}
"""Each tag's data decoder, made on its first use: making all of them at import
took a third of a one-line ``pwf request`` that decodes none (ADR 0031)."""
_HASH_MEMBER: Final = b'"contentHash":"'


def content_hash_of(body: bytes) -> str:
    """Recompute the content hash of stored bytes: SHA-256 without the hash member.

    The member sits between ``cause`` (or ``batch``) and ``data``; canonical
    bytes hold it exactly once at the top level, since nested quotes are escaped.
    """
    start = body.find(_HASH_MEMBER)
    if start < 0:
        raise LineError("event has no contentHash member")
    end = start + len(_HASH_MEMBER) + 64 + 2  # hex digits, closing quote, comma
    return hashlib.sha256(body[:start] + body[end:]).hexdigest()


def _raw_fields(cls: type[msgspec.Struct]) -> tuple[str, ...]:
    """The wire names of a Struct's ``msgspec.Raw`` fields (alone or with UNSET)."""
    found = _RAW_FIELDS.get(cls)
    if found is None:
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        found = tuple(
            field.encode_name
            for field in info.fields
            if isinstance(field.type, msgspec.inspect.RawType)
            or (
                isinstance(field.type, msgspec.inspect.UnionType)
                and any(isinstance(t, msgspec.inspect.RawType) for t in field.type.types)
            )
        )
        _RAW_FIELDS[cls] = found
    return found


_RAW_FIELDS: dict[type, tuple[str, ...]] = {}


def surrogate_decode(data: bytes, cls: type[Any]) -> Any:  # noqa: ANN401 - the Struct asked for
    """Decode canonical bytes that hold a lone surrogate into ``cls`` (ADR 0027).

    msgspec refuses such an escape; the standard library keeps it in ``str``.
    Raw fields get the canonical bytes of their value back, which are the
    stored bytes, since a stored body is canonical throughout.

    Raises:
        msgspec.ValidationError: the value does not fit ``cls``.
        msgspec.DecodeError: the bytes are not JSON.
    """
    value = canonical.decode(data)
    if isinstance(value, dict):
        for name in _raw_fields(cls):
            if name in value:
                value[name] = msgspec.Raw(canonical.encode(value[name]))
    return msgspec.convert(value, cls)


def _data_decoder(tag: str) -> msgspec.json.Decoder[Event] | None:
    decoder = _DATA.get(tag)
    if decoder is None and tag in REGISTRY:
        decoder = _DATA[tag] = msgspec.json.Decoder(REGISTRY[tag])
    return decoder


def _decode_data(tag: str, data: msgspec.Raw) -> Event:
    decoder = _data_decoder(tag)
    if decoder is None:
        upcast = UPCASTERS.get(tag)
        if upcast is None:
            raise EventDataError(f"unknown event type: {tag}")
        tag, value = upcast(canonical.decode(bytes(data)))
        return msgspec.convert(value, REGISTRY[tag])
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as error:  # a DecodeError too: caught first
        raise EventDataError(f"{tag}: {error}") from None
    except msgspec.DecodeError as error:
        if not canonical.has_lone_surrogate(bytes(data)):
            raise EventDataError(f"{tag}: {error}") from None
    try:
        event: Event = surrogate_decode(bytes(data), REGISTRY[tag])
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise EventDataError(f"{tag}: {error}") from None
    return event


def open_body(body: bytes) -> Entry:
    """Check one stored event (canonical, typed, self-hash) and return it.

    Chain rules across events (gapless seq, prev hash) are the caller's.

    Raises:
        LineError: not canonical JSON, or the content hash does not match.
        EventDataError: the envelope or its data does not fit its type.
    """
    canonical.parse_line(body, limit=MAX_EVENT_BYTES)
    return open_canonical(body)


def open_canonical(body: bytes) -> Entry:
    """:func:`open_body` of bytes whose canonical form the caller has proven: typed, self-hash.

    Raises:
        LineError: the content hash does not match.
        EventDataError: the envelope or its data does not fit its type.
    """
    envelope = _envelope(body)
    if content_hash_of(body) != envelope.content_hash:
        raise LineError("content hash does not match the event's bytes")
    return _entry(envelope)


def read_body(body: bytes) -> Entry:
    """The typed event of stored bytes, old tags upcast, without :func:`open_body`'s byte checks.

    For a caller that proves the content hash itself and leaves the canonical
    form to ``pwf log verify`` (the fold of ADR 0013).

    Raises:
        EventDataError: the envelope or its data does not fit its type.
    """
    return _entry(_envelope(body))


def _envelope(body: bytes) -> Envelope:
    try:
        return _ENVELOPE.decode(body)
    except msgspec.ValidationError as error:  # a DecodeError too: caught first
        raise EventDataError(f"envelope: {error}") from None
    except msgspec.DecodeError as error:
        if not canonical.has_lone_surrogate(body):
            raise EventDataError(f"envelope: {error}") from None
    try:
        envelope: Envelope = surrogate_decode(body, Envelope)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise EventDataError(f"envelope: {error}") from None
    return envelope


def _entry(envelope: Envelope) -> Entry:
    event = _decode_data(envelope.type, envelope.data)
    return entry_of(envelope, event, envelope.content_hash)
