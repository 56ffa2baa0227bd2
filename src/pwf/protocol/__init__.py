"""The wire protocols of the host; imports canonical, errors and msgspec only.

Pure code: parsing, checking and encoding of client and worker messages, and
NDJSON framing.  No sockets, clock or logging; the host and server rooms do
the I/O.

* :mod:`pwf.protocol.client`: ``pi-workflows.client.v1`` (DOMAIN §6, §7.1).
* :mod:`pwf.protocol.worker`: the worker launch, message and response schemas (DOMAIN §14).
* :mod:`pwf.protocol.framing`: :class:`FrameDecoder`.
"""

from __future__ import annotations

from pwf.protocol.client import (
    CLIENT_SCHEMA,
    EVENT_NAMES,
    MAX_OPAQUE_ID_BYTES,
    MAX_PROTOCOL_MESSAGE_BYTES,
    MAX_SAFE_INTEGER,
    OPERATIONS,
    OUTCOMES,
    VIEW_OPERATIONS,
    ClientEvent,
    ClientHello,
    ClientMessage,
    ClientRequest,
    ClientResponse,
    collapse_error,
    encode_event,
    encode_hello,
    encode_line,
    encode_request,
    encode_response,
    parse_event,
    parse_hello,
    parse_message,
    parse_request,
    parse_response,
    request_fingerprint,
)
from pwf.protocol.framing import FrameDecoder
from pwf.protocol.worker import (
    KINDS,
    MAX_WORKER_TEXT_UNITS,
    WORKER_LAUNCH_SCHEMA,
    WORKER_MESSAGE_SCHEMA,
    WORKER_OUTCOMES,
    WORKER_PROTOCOL_VERSION,
    WORKER_RESPONSE_SCHEMA,
    LaunchEnvelope,
    WorkerMessage,
    WorkerResponse,
    encode_launch,
    encode_worker_response,
    parse_worker_message,
    parse_worker_response,
)

__all__ = [
    "CLIENT_SCHEMA",
    "EVENT_NAMES",
    "KINDS",
    "MAX_OPAQUE_ID_BYTES",
    "MAX_PROTOCOL_MESSAGE_BYTES",
    "MAX_SAFE_INTEGER",
    "MAX_WORKER_TEXT_UNITS",
    "OPERATIONS",
    "OUTCOMES",
    "VIEW_OPERATIONS",
    "WORKER_LAUNCH_SCHEMA",
    "WORKER_MESSAGE_SCHEMA",
    "WORKER_OUTCOMES",
    "WORKER_PROTOCOL_VERSION",
    "WORKER_RESPONSE_SCHEMA",
    "ClientEvent",
    "ClientHello",
    "ClientMessage",
    "ClientRequest",
    "ClientResponse",
    "FrameDecoder",
    "LaunchEnvelope",
    "WorkerMessage",
    "WorkerResponse",
    "collapse_error",
    "encode_event",
    "encode_hello",
    "encode_launch",
    "encode_line",
    "encode_request",
    "encode_response",
    "encode_worker_response",
    "parse_event",
    "parse_hello",
    "parse_message",
    "parse_request",
    "parse_response",
    "parse_worker_message",
    "parse_worker_response",
    "request_fingerprint",
]
