"""NDJSON framing of protocol streams; imports errors and the client protocol's limit.

:class:`FrameDecoder` turns the bytes of a socket or pipe into lines.  It keeps
one growing buffer and remembers how far it has searched for a newline, so
feeding a long line in small pieces stays linear (DOMAIN §6).
"""

from __future__ import annotations

from typing import Final

from pwf.errors import ProtocolError
from pwf.protocol.client import MAX_PROTOCOL_MESSAGE_BYTES, TOO_LARGE

__all__ = ["FrameDecoder"]

_NEWLINE: Final = b"\n"


class FrameDecoder:
    """Split a byte stream into newline-terminated frames of at most 1 MiB per line.

    A frame whose line (frame plus newline) exceeds 1 MiB, or a buffered tail
    above 1 MiB with no newline, raises :class:`~pwf.errors.ProtocolError`.
    After that the decoder is closed and every further :meth:`feed` raises
    too: a decoder error closes the connection.
    """

    __slots__ = ("_buffer", "_failed", "_scanned")

    def __init__(self) -> None:
        """Start with an empty buffer."""
        self._buffer = bytearray()
        self._scanned = 0
        self._failed = False

    @property
    def pending(self) -> int:
        """Bytes buffered after the last complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the complete frames, without their newlines.

        Empty frames are skipped.

        Raises:
            ProtocolError: a frame or the unterminated tail is too long, or the
                decoder already failed.
        """
        if self._failed:
            raise ProtocolError("Protocol frame decoder is closed after an error")
        self._buffer += data
        frames: list[bytes] = []
        start = 0
        newline = self._buffer.find(_NEWLINE, self._scanned)
        while newline >= 0:
            if newline - start + 1 > MAX_PROTOCOL_MESSAGE_BYTES:
                self._fail()
            if newline > start:
                frames.append(bytes(self._buffer[start:newline]))
            start = newline + 1
            newline = self._buffer.find(_NEWLINE, start)
        del self._buffer[:start]
        self._scanned = len(self._buffer)
        if self._scanned > MAX_PROTOCOL_MESSAGE_BYTES:
            self._fail()
        return frames

    def _fail(self) -> None:
        self._failed = True
        self._buffer.clear()
        raise ProtocolError(TOO_LARGE)
