"""The constants both ends of the client protocol share; imports nothing.

The host's connections, the protocol's parser and the light client of
``pwf call`` (:mod:`pwf.client`, which must not load the parser) read the
schema name, the version a hello names and the size limits from here, so
each is written once.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIENT_SCHEMA",
    "MAX_FRAMED_MESSAGE_BYTES",
    "MAX_PROTOCOL_MESSAGE_BYTES",
    "PACKAGE_VERSION",
]

CLIENT_SCHEMA: Final = "pi-workflows.client.v1"
"""The ``schema`` of every client message (DOMAIN §6)."""
PACKAGE_VERSION: Final = "0.16.1"
"""The original's version: its clients refuse a host whose hello names another (HOST §1.11)."""
MAX_PROTOCOL_MESSAGE_BYTES: Final = 1_048_576
"""1 MiB: the largest encoded message (:data:`pwf.canonical.MAX_LINE_BYTES` too)."""
MAX_FRAMED_MESSAGE_BYTES: Final = MAX_PROTOCOL_MESSAGE_BYTES - 1
"""The largest message whose framed line (the message and its newline) fits in 1 MiB."""
