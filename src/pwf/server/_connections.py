"""One client connection: hello first, NDJSON frames, concurrent requests (HOST §1.10-§1.16).

A connection is an :class:`asyncio.Protocol`: each chunk the socket gives is
split into frames at once, and every complete frame is handed to the server
in arrival order.  A response is written when its decision is committed, so
answers on one connection can come out of order and are matched by
``requestId``.  A frame decoder error, a line that is not a request, or an
answer over 1 MiB closes this connection only.

Most requests need no task of their own: the server queues their decision
with a callback (:meth:`Connection.answered` once committed).  Those that
wait (subscriptions, state reads, a submission's verdict) run as tasks.

A connection whose client does not read what it is sent is *backed up*
once :data:`BACKLOG` bytes wait to be written (ADR 0111): its socket is not
read, and its subscriptions are not published, until the client has read
most of them; then it is published what changed meanwhile, once.  So a
client that stalls holds about that much of the host's memory, however
much it watches and however long it stalls.

A connection holds at most :data:`MAX_UNANSWERED` requests read and not
yet answered (ADR 0074).  At that bound it stops reading its socket: the
frames of the chunk in hand wait in order, and the rest of a flood waits in
the socket's buffers and then in the sender, whose writes block.  Reading
resumes once the answers bring it back under the bound.  So one client's
flood slows that client; the host's queue holds at most the bound from each
connection, and the host's own duties are not queued behind a flood.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from typing import TYPE_CHECKING, Final, Protocol

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
from pwf.protocol.wire import PACKAGE_VERSION
from pwf.server._held import Held

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from pwf.protocol.client import ClientRequest

__all__ = ["BACKLOG", "MAX_UNANSWERED", "Connection", "Dispatcher", "thrown"]

_MAX_BUFFERED: Final = 64 << 20
"""A client that lets this much of its answers pile up unread is closed."""
BACKLOG: Final = 256 << 10
"""Bytes waiting to be written past which a connection is backed up (ADR 0111)."""
MAX_UNANSWERED: Final = 64
"""Requests one connection may have read and not yet answered; past it, reading waits."""


class Dispatcher(Protocol):
    """What a connection asks of the server."""

    def opened(self, connection: Connection) -> bool:
        """A connection was accepted; False when the host is stopping (it is then closed)."""

    def dispatch(self, connection: Connection, request: ClientRequest) -> None:
        """Start answering ``request``; the answer comes back through the connection."""

    def after(
        self, connection: Connection, request: ClientRequest, response: ClientResponse
    ) -> None:
        """An answer was written (or dropped with a closed connection)."""

    def lost(self, connection: Connection) -> None:
        """The connection closed; its requests in flight are still being decided."""

    def caught_up(self, connection: Connection) -> None:
        """The client read what was backed up on the connection: it may be published again."""

    def closing(self, connection: Connection, why: str) -> None:
        """The connection is closed for what its client sent or did; ``why`` says what."""


class Connection(asyncio.Protocol):
    """A client socket and the requests in flight on it."""

    def __init__(self, server: Dispatcher, held: Held | None = None) -> None:
        """Name the connection (``connection-<uuid>``); nothing is sent yet.

        ``held`` bounds the bytes of requests read and not yet answered that
        it shares with the host's other connections (ADR 0123).
        """
        self.id = f"connection-{uuid.uuid4()}"  # noqa: TID251 - the edge mints connection ids
        self.server = server
        self.held = Held() if held is None else held
        self._sizes: dict[int, tuple[ClientRequest, int]] = {}
        """Each request in flight (by identity) with the bytes of its line, held until answered."""
        self.transport: asyncio.Transport | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.inflight = 0
        """Requests read and not yet answered, tasks included."""
        self.closed = False
        self.peer: int | None = None
        """The client's process id, where the socket tells it (Linux)."""
        self.unanswered = MAX_UNANSWERED
        """The bound of :attr:`inflight` past which the socket is not read."""
        self._decoder = FrameDecoder()
        self._quiet: asyncio.Event | None = None
        self._frames: collections.deque[bytes] = collections.deque()
        """Frames read from the socket and not yet handed on, while the bound holds them."""
        self._paused = False
        self._pumping = False
        self.backed_up = False
        """Whether :data:`BACKLOG` bytes wait to be written (the transport says so)."""

    # ------------------------------------------------------------------ the protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Send the hello, or close at once when the host is stopping."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=BACKLOG)
        if not self.server.opened(self):
            self.close()
            return
        hello = encode_hello(ClientHello(connection_id=self.id, package_version=PACKAGE_VERSION))
        transport.write(encode_line(hello))

    def data_received(self, data: bytes) -> None:
        """Split the chunk into frames and hand each request on, in order, up to the bound."""
        if self.closed:
            return
        # Reading pauses while frames wait, so none is waiting here: a chunk with a
        # decoder error hands on none of its frames, as before the bound.
        try:
            self._frames.extend(self._decoder.feed(data))
        except PwfError as error:
            self.server.closing(self, str(error))
            self.close()
            return
        self._pump()

    def _pump(self) -> None:
        """Hand on waiting frames while the bound allows; pause or resume reading to match."""
        if self._pumping:  # an answer given while handing on: the loop below goes on
            return
        frames = self._frames
        self._pumping = True
        try:
            while (
                frames
                and self.inflight < self.unanswered
                and not self.backed_up
                and not self.closed
                and self.held.take(self, len(frames[0]))  # else woken when room is freed
            ):
                frame = frames.popleft()
                try:
                    request = parse_request(frame)
                except PwfError:
                    self.held.give(self, len(frame))
                    raise
                self.inflight += 1
                self._sizes[id(request)] = (request, len(frame))
                self.server.dispatch(self, request)
        except PwfError as error:
            self.server.closing(self, str(error))
            self.close()
            return
        finally:
            self._pumping = False
        if self.closed or self.transport is None:
            return
        full = bool(frames) or self.inflight >= self.unanswered or self.backed_up
        if full and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        elif not full and self._paused:
            self._paused = False
            self.transport.resume_reading()

    def wake(self) -> None:
        """Room was freed for the requests that waited for it: hand them on (ADR 0123)."""
        self._pump()

    def pause_writing(self) -> None:
        """The transport holds :data:`BACKLOG` bytes unsent: read and publish no more for now."""
        self.backed_up = True
        self._pump()

    def resume_writing(self) -> None:
        """The client read most of what waited: read its requests and publish it again."""
        self.backed_up = False
        self._pump()
        if not self.closed:
            self.server.caught_up(self)

    def eof_received(self) -> bool:
        """The peer is done sending: close, as a read of nothing always did."""
        self.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Requests in flight are still decided; the server cleans up once they are."""
        if exc is not None:
            self.server.closing(self, f"client socket error: {exc}")
        self.closed = True
        self._frames.clear()
        self.server.lost(self)

    # ------------------------------------------------------------------ answers

    def answered(self, request: ClientRequest, response: ClientResponse) -> None:
        """Write ``request``'s answer (unless closed), free its bytes, then tell the server."""
        held = self._sizes.pop(id(request), None)
        if held is not None:
            self.held.give(self, held[1])
        try:
            line = encode_line(encode_response(response))
        except PwfError as error:
            self.server.closing(self, str(error))
            self.close()
        else:
            self.send(line)
        self._done()
        self.server.after(self, request, response)

    def failed(self, request: ClientRequest, error: BaseException) -> None:
        """A thrown handler answers rejected (HOST §1)."""
        self.answered(request, thrown(request, error))

    def spawn(self, request: ClientRequest, answer: Awaitable[ClientResponse]) -> None:
        """Answer ``request`` with a task that awaits ``answer`` (it counts as in flight)."""
        task = asyncio.get_running_loop().create_task(self._respond(request, answer))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _respond(self, request: ClientRequest, answer: Awaitable[ClientResponse]) -> None:
        try:
            response = await answer
        except Exception as error:  # noqa: BLE001 - a thrown handler answers rejected (HOST §1)
            response = thrown(request, error)
        self.answered(request, response)

    def _done(self) -> None:
        self.inflight -= 1
        if self.inflight == 0 and self._quiet is not None:
            self._quiet.set()
            self._quiet = None
        if self._paused:
            self._pump()

    def send(self, line: bytes) -> None:
        """Write one framed line unless the connection is closed."""
        transport = self.transport
        if self.closed or transport is None:
            return
        transport.write(line)
        if transport.get_write_buffer_size() > _MAX_BUFFERED:
            self.server.closing(self, "it reads no answers")
            self.close()

    def close(self) -> None:
        """Destroy the socket; requests in flight are still decided, their answers dropped."""
        if self.closed:
            return
        self.closed = True
        self._frames.clear()
        if self.transport is not None:
            with contextlib.suppress(Exception):
                self.transport.abort()

    async def drained(self) -> None:
        """Wait for the requests in flight on this connection."""
        while self.inflight > 0:
            if self._quiet is None:
                self._quiet = asyncio.Event()
            await self._quiet.wait()


def thrown(request: ClientRequest, error: BaseException) -> ClientResponse:
    """The answer to a request whose decision raised: rejected with the error's line."""
    return ClientResponse(
        request_id=request.request_id,
        outcome="rejected",
        error=collapse_error(str(error) or type(error).__name__),
    )
