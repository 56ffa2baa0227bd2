"""One client connection: hello first, NDJSON frames, concurrent requests (HOST §1.10-§1.16).

Every complete frame becomes its own task, started in arrival order; a
response is written when its decision is committed, so answers on one
connection can come out of order and are matched by ``requestId``.  A frame
decoder error, a line that is not a request, or an answer over 1 MiB closes
this connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING, Final

from pwf.errors import PwfError
from pwf.protocol.client import (
    ClientHello,
    ClientResponse,
    collapse_error,
    encode_hello,
    encode_line,
    encode_response,
    parse_request,
)
from pwf.protocol.framing import FrameDecoder

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pwf.protocol.client import ClientRequest

__all__ = ["PACKAGE_VERSION", "Connection"]

PACKAGE_VERSION: Final = "0.16.1"
"""The original's version: its clients refuse a host whose hello names another (HOST §1.11)."""
_READ_BYTES: Final = 1 << 16
_MAX_BUFFERED: Final = 64 << 20
"""A client that lets this much of its answers pile up unread is closed."""

log = logging.getLogger("pwf.server")


class Connection:
    """A client socket and the requests in flight on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Name the connection (``connection-<uuid>``); nothing is sent yet."""
        self.id = f"connection-{uuid.uuid4()}"  # noqa: TID251 - the edge mints connection ids
        self.reader = reader
        self.writer = writer
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    async def serve(
        self,
        answer: Callable[[Connection, ClientRequest], Awaitable[ClientResponse]],
        after: Callable[[ClientRequest, ClientResponse], None],
    ) -> None:
        """Send the hello, then read frames until the peer leaves or breaks the protocol."""
        hello = encode_hello(ClientHello(connection_id=self.id, package_version=PACKAGE_VERSION))
        self.writer.write(encode_line(hello))
        decoder = FrameDecoder()
        try:
            await self.writer.drain()
            while not self.closed and (data := await self.reader.read(_READ_BYTES)):
                for frame in decoder.feed(data):
                    request = parse_request(frame)
                    task = asyncio.create_task(self._respond(answer, after, request))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
        except PwfError as error:
            log.info("closing %s: %s", self.id, error)
        except OSError as error:
            log.info("client socket error: %s", error)
        finally:
            self.close()

    async def _respond(
        self,
        answer: Callable[[Connection, ClientRequest], Awaitable[ClientResponse]],
        after: Callable[[ClientRequest, ClientResponse], None],
        request: ClientRequest,
    ) -> None:
        try:
            response = await answer(self, request)
        except Exception as error:  # noqa: BLE001 - a thrown handler answers rejected (HOST §1)
            response = ClientResponse(
                request_id=request.request_id,
                outcome="rejected",
                error=collapse_error(str(error) or type(error).__name__),
            )
        try:
            line = encode_line(encode_response(response))
        except PwfError as error:
            log.info("closing %s: %s", self.id, error)
            self.close()
        else:
            self.send(line)
        after(request, response)

    def send(self, line: bytes) -> None:
        """Write one framed line unless the connection is closed."""
        if self.closed:
            return
        self.writer.write(line)
        if self.writer.transport.get_write_buffer_size() > _MAX_BUFFERED:
            log.info("closing %s: it reads no answers", self.id)
            self.close()

    def close(self) -> None:
        """Destroy the socket; requests in flight are still decided, their answers dropped."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            self.writer.transport.abort()

    async def drained(self) -> None:
        """Wait for the requests in flight on this connection."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
