"""The worker protocol between the host and its run workers; imports canonical, errors, msgspec.

A worker is launched with a ``pi-workflows.worker-launch.v1`` envelope, then
sends ``pi-workflows.worker-message.v1`` lines and reads
``pi-workflows.worker-response.v1`` lines (DOMAIN §14).  Unlike the client
protocol, extra message members are allowed: they are kept out of
:class:`WorkerMessage` but count in its fingerprint, the SHA-256 of the whole
canonical message.  Text limits count UTF-16 code units (JavaScript string
length), and a line (message plus newline) may not exceed 1 MiB.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import TYPE_CHECKING, Final, TypeGuard

import msgspec

from pwf import canonical
from pwf.errors import ProtocolError
from pwf.protocol._lines import Dialect, encode_message, one_of, read_object
from pwf.protocol.client import is_safe_integer, js_length
from pwf.protocol.wire import MAX_FRAMED_MESSAGE_BYTES

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "KINDS",
    "LAUNCH_ENV",
    "MAX_WORKER_TEXT_UNITS",
    "WORKER_LAUNCH_SCHEMA",
    "WORKER_MESSAGE_SCHEMA",
    "WORKER_OUTCOMES",
    "WORKER_PROTOCOL_VERSION",
    "WORKER_RESPONSE_SCHEMA",
    "LaunchEnvelope",
    "WorkerMessage",
    "WorkerResponse",
    "encode_launch",
    "encode_worker_response",
    "launch_variable",
    "parse_launch",
    "parse_launch_variable",
    "parse_worker_message",
    "parse_worker_response",
]

WORKER_MESSAGE_SCHEMA: Final = "pi-workflows.worker-message.v1"
WORKER_RESPONSE_SCHEMA: Final = "pi-workflows.worker-response.v1"
WORKER_LAUNCH_SCHEMA: Final = "pi-workflows.worker-launch.v1"
WORKER_PROTOCOL_VERSION: Final = 1
LAUNCH_ENV: Final = "PI_WORKFLOWS_WORKER_LAUNCH"
"""The environment variable that gives a worker its launch envelope (HOST §7.2)."""

MAX_WORKER_TEXT_UNITS: Final = 256
"""Ids and operation names are non-empty text of at most this many UTF-16 code units."""

KINDS: Final = frozenset(
    {
        "worker.ready",
        "node.started",
        "node.update",
        "node.finished",
        "node.failed",
        "run.parked",
        "run.finished",
        "interaction.requested",
        "interaction.accepted",
        "interaction.rejected",
        "notification.requested",
        "presentation.requested",
        "effect.reserve",
        "effect.settle",
        "worker.progress",
        "worker.exiting",
    }
)

WORKER_OUTCOMES: Final = frozenset({"accepted", "adopted", "rejected", "claimLost"})

TOO_LARGE: Final = "Worker protocol message exceeds 1 MiB"
_DIALECT: Final = Dialect(
    name="Worker",
    limit=MAX_FRAMED_MESSAGE_BYTES,
    too_large=TOO_LARGE,
    not_canonical="Worker protocol message must be a canonical JSON object",
    not_object="Worker protocol message must be a canonical JSON object",
)
"""A worker's line counts its newline: the message itself is at most 1 MiB - 1 bytes."""


class WorkerMessage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One worker message; ``fingerprint`` covers every member received, extras too."""

    schema: str = WORKER_MESSAGE_SCHEMA
    launch_schema: str = WORKER_LAUNCH_SCHEMA
    message_id: str
    kind: str
    operation: str
    run_id: str
    generation: int
    worker_epoch: str
    expected_revision: int
    attempt_id: str | None = None
    payload: object
    fingerprint: str


class WorkerResponse(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The host's answer to one worker message; ``result`` is MISSING when absent."""

    schema: str = WORKER_RESPONSE_SCHEMA
    message_id: str
    outcome: str
    revision: int | None = None
    result: object = canonical.MISSING
    error: str | None = None


class LaunchEnvelope(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What a worker is started with: which run, generation and epoch it serves."""

    schema: str = WORKER_LAUNCH_SCHEMA
    run_id: str
    generation: int
    worker_epoch: str
    project_path: str
    workflow_source: object
    """The run's ``{root, mounted}`` object (HOST.md §7.2), never text."""
    definition_digest: str
    input_hash: str
    protocol_version: int = WORKER_PROTOCOL_VERSION


# --------------------------------------------------------------------------- checks


def _is_text(value: object) -> TypeGuard[str]:
    """Tell whether a value is non-empty text of at most 256 UTF-16 code units."""
    return isinstance(value, str) and 0 < js_length(value) <= MAX_WORKER_TEXT_UNITS


def _text(members: Mapping[str, object], name: str) -> str:
    value = members.get(name)
    if not _is_text(value):
        raise ProtocolError(f"Worker {name} must be nonempty bounded text")
    return value


def _generation(members: Mapping[str, object]) -> int:
    value = members.get("generation")
    if not is_safe_integer(value, 1):
        raise ProtocolError("Worker generation must be positive")
    return value


def _expected_revision(members: Mapping[str, object]) -> int:
    value = members.get("expectedRevision")
    if not is_safe_integer(value):
        raise ProtocolError("Worker expectedRevision must be non-negative")
    return value


def _payload(members: Mapping[str, object]) -> object:
    if "payload" not in members:
        raise ProtocolError("Worker payload is required")
    return members["payload"]


# --------------------------------------------------------------------------- messages


def _read_message(members: Mapping[str, object], fingerprint: str) -> WorkerMessage:
    if (
        members.get("schema") != WORKER_MESSAGE_SCHEMA
        or members.get("launchSchema") != WORKER_LAUNCH_SCHEMA
    ):
        raise ProtocolError("Invalid worker message schema")
    return WorkerMessage(
        message_id=_text(members, "messageId"),
        run_id=_text(members, "runId"),
        worker_epoch=_text(members, "workerEpoch"),
        kind=one_of(members, "kind", KINDS, "Invalid worker message kind"),
        generation=_generation(members),
        expected_revision=_expected_revision(members),
        operation=_text(members, "operation"),
        attempt_id=_text(members, "attemptId") if "attemptId" in members else None,
        payload=_payload(members),
        fingerprint=fingerprint,
    )


def parse_worker_message(line: bytes) -> WorkerMessage:
    """Parse one worker message line (without its newline).

    The fingerprint is the SHA-256 of the line itself, which is the
    canonical encoding of the whole message since the line must be canonical.

    Raises:
        ProtocolError: the line is too long, not canonical, or not a valid message.
    """
    return _read_message(read_object(line, _DIALECT), hashlib.sha256(line).hexdigest())


# --------------------------------------------------------------------------- responses


def _read_response(members: Mapping[str, object]) -> WorkerResponse:
    if members.get("schema") != WORKER_RESPONSE_SCHEMA:
        raise ProtocolError("Invalid worker response schema")
    message_id = _text(members, "messageId")
    outcome = one_of(members, "outcome", WORKER_OUTCOMES, "Invalid worker response outcome")
    return WorkerResponse(
        message_id=message_id,
        outcome=outcome,
        revision=_optional_revision(members),
        result=members.get("result", canonical.MISSING),
        error=_optional_error(members),
    )


def _optional_revision(members: Mapping[str, object]) -> int | None:
    if "revision" not in members:
        return None
    value = members["revision"]
    if not is_safe_integer(value):
        raise ProtocolError("Worker response revision must be non-negative")
    return value


def _optional_error(members: Mapping[str, object]) -> str | None:
    if "error" not in members:
        return None
    value = members["error"]
    if not isinstance(value, str):
        raise ProtocolError("Worker response error must be text")
    return value


def encode_worker_response(response: WorkerResponse) -> bytes:
    """Canonical bytes of a worker response, without a newline.

    Raises:
        ProtocolError: the response is invalid or its line would exceed 1 MiB.
    """
    return encode_message(response, _read_response, _DIALECT)


def parse_worker_response(line: bytes) -> WorkerResponse:
    """Parse one worker response line (without its newline); extra members are ignored.

    Raises:
        ProtocolError: the line is too long, not canonical, or not a valid response.
    """
    return _read_response(read_object(line, _DIALECT))


# --------------------------------------------------------------------------- launch


def encode_launch(envelope: LaunchEnvelope) -> bytes:
    """Canonical bytes of a launch envelope, without a newline.

    Raises:
        ProtocolError: a field is invalid or the line would exceed 1 MiB.
    """
    return encode_message(envelope, _check_launch, _DIALECT)


def _check_launch(members: Mapping[str, object]) -> None:
    if members["schema"] != WORKER_LAUNCH_SCHEMA:
        raise ProtocolError("Invalid worker launch schema")
    version = members["protocolVersion"]
    if type(version) is not int or version != WORKER_PROTOCOL_VERSION:
        raise ProtocolError("Worker launch protocolVersion must be 1")
    _text(members, "runId")
    _text(members, "workerEpoch")
    _generation(members)
    for name in ("projectPath", "definitionDigest", "inputHash"):
        if not isinstance(members[name], str):
            raise ProtocolError(f"Worker launch {name} must be text")
    source = members["workflowSource"]
    if not isinstance(source, dict) or not isinstance(source.get("root"), dict):
        raise ProtocolError("Worker launch workflowSource must be a {root, mounted} object")


def launch_variable(envelope: bytes) -> str:
    """:data:`LAUNCH_ENV`'s value for an encoded envelope: its base64url, without padding."""
    return base64.urlsafe_b64encode(envelope).decode("ascii").rstrip("=")


def parse_launch_variable(value: str | None) -> LaunchEnvelope:
    """The launch envelope in :data:`LAUNCH_ENV`'s ``value``.

    Raises:
        ProtocolError: it is missing, not base64url, or not a valid envelope.
    """
    if not value:
        raise ProtocolError(f"{LAUNCH_ENV} is not set")
    try:
        data = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError) as error:
        raise ProtocolError(f"{LAUNCH_ENV} is not base64url") from error
    return parse_launch(data)


def parse_launch(line: bytes) -> LaunchEnvelope:
    """Parse a canonical launch envelope (as a worker reads it from its environment).

    Raises:
        ProtocolError: the bytes are not canonical JSON or not a valid envelope.
    """
    members = read_object(line, _DIALECT)
    names = {field.encode_name for field in msgspec.structs.fields(LaunchEnvelope)}
    if set(members) != names:
        raise ProtocolError("Worker launch envelope members are invalid")
    _check_launch(members)
    return msgspec.convert(members, LaunchEnvelope)
