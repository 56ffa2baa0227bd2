"""The client protocol's constants are written once, and the light client reads them cheaply."""

from __future__ import annotations

import subprocess
import sys

from pwf import callhost, canonical, client
from pwf.protocol import client as protocol_client
from pwf.protocol import wire
from pwf.server import _connections


def test_every_room_reads_the_one_set_of_constants() -> None:
    assert client.CLIENT_SCHEMA is protocol_client.CLIENT_SCHEMA is wire.CLIENT_SCHEMA
    assert client.PACKAGE_VERSION is vars(_connections)["PACKAGE_VERSION"] is wire.PACKAGE_VERSION
    assert vars(client)["MAX_PROTOCOL_MESSAGE_BYTES"] is wire.MAX_PROTOCOL_MESSAGE_BYTES
    assert protocol_client.MAX_PROTOCOL_MESSAGE_BYTES is wire.MAX_PROTOCOL_MESSAGE_BYTES
    assert vars(callhost)["MAX_FRAMED_MESSAGE_BYTES"] is wire.MAX_FRAMED_MESSAGE_BYTES


def test_the_message_limit_is_the_canonical_line_limit() -> None:
    assert wire.MAX_PROTOCOL_MESSAGE_BYTES == canonical.MAX_LINE_BYTES == 1 << 20
    assert wire.MAX_FRAMED_MESSAGE_BYTES == wire.MAX_PROTOCOL_MESSAGE_BYTES - 1


def test_the_light_client_does_not_load_the_parser() -> None:
    """``pwf call``'s client reads the constants without msgspec or the protocol's parser."""
    code = (
        "import sys, pwf.client, pwf.callhost;"
        "print(sorted(m for m in sys.modules"
        " if m.split('.')[0] == 'msgspec' or m in ('pwf.protocol.client', 'pwf.canonical')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"
