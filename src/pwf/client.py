"""A small typed client of a served host: connect, check the hello, request, read events.

Imports the standard library, :mod:`pwf.errors` and the protocol's constants only, so ``pwf call``
starts fast; a request given as a dict is encoded with :mod:`pwf.canonical`,
imported when first needed.  One :class:`HostClient` is one connection.
Responses are matched to requests by ``requestId`` (a host may answer out of
order); events and answers to other requests that arrive meanwhile are kept
until they are asked for.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final, Self

from pwf._closing import Closing
from pwf.errors import PwfError
from pwf.protocol.wire import CLIENT_SCHEMA, MAX_PROTOCOL_MESSAGE_BYTES, PACKAGE_VERSION

if TYPE_CHECKING:
    import socket
    from collections.abc import Iterator

__all__ = [
    "CLIENT_SCHEMA",
    "PACKAGE_VERSION",
    "HelloError",
    "HostClient",
    "HostUnavailableError",
    "WatchRefusedError",
    "call",
    "default_db",
    "message_lines",
    "request_message",
    "socket_path",
]

CONNECT_SECONDS: Final = 2.0
"""The original client waits this long for the connection and again for the hello."""

_READ_LIMIT: Final = MAX_PROTOCOL_MESSAGE_BYTES + 1
"""A longer line cannot be a message: read this much and let the parser refuse it."""


class HostUnavailableError(PwfError):
    """No host answers on the socket, or the connection was lost."""


class HelloError(PwfError):
    """The host did not greet first, or runs another version of the protocol."""


class WatchRefusedError(PwfError):
    """The host answered a watch request with another outcome than ``accepted``."""


def message_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Number the lines of ``stream`` (``pwf call``'s, ``pwf request``'s) without their newline.

    Empty lines are skipped.  A line too long to be a message is cut after
    :data:`_READ_LIMIT` bytes and the rest of it is discarded, so memory
    stays bounded; the parser refuses the cut line for its length.
    """
    number = 0
    while chunk := stream.readline(_READ_LIMIT):
        number += 1
        if chunk.endswith(b"\n"):
            chunk = chunk[:-1]
        elif len(chunk) == _READ_LIMIT:
            while (rest := stream.readline(_READ_LIMIT)) and not rest.endswith(b"\n"):
                pass
        if chunk:
            yield number, chunk


def request_message(  # noqa: PLR0913 - the members of a request, all optional but two
    operation: str,
    payload: object = None,
    *,
    request_id: str,
    idempotency_key: str | None = None,
    client_id: str = "pwf-python",
    run_id: str | None = None,
    expected_revision: int | None = None,
) -> dict[str, object]:
    """A client-protocol request as an object: ``HostClient.request`` encodes it canonically.

    ``payload`` None sends ``{}``; ``idempotency_key`` defaults to ``request_id``.
    """
    message: dict[str, object] = {
        "clientId": client_id,
        "idempotencyKey": idempotency_key or request_id,
        "operation": operation,
        "payload": {} if payload is None else payload,
        "requestId": request_id,
        "schema": CLIENT_SCHEMA,
        "type": "request",
    }
    if run_id is not None:
        message["runId"] = run_id
    if expected_revision is not None:
        message["expectedRevision"] = expected_revision
    return message


def default_db() -> Path:
    """The database ``--db`` defaults to: ``$PWF_DB``, else ``./.pwf/state.db``."""
    return Path(os.environ.get("PWF_DB") or Path(".pwf") / "state.db").absolute()


def socket_path(db: str | os.PathLike[str]) -> Path:
    """``<dirname(db)>/host/host.sock`` (HOST §1.1), resolved as the original's client does.

    The original computes ``path.join(path.dirname(path.resolve(db)), "host",
    "host.sock")``: ``..`` removes the name before it without following a link.
    """
    return Path(os.path.abspath(db)).parent / "host" / "host.sock"  # noqa: PTH100 - as path.resolve


class HostClient(Closing):
    """One connection to a served host."""

    def __init__(self, sock: socket.socket) -> None:
        """Wrap a connected socket; :meth:`connect` reads and checks the hello."""
        self._sock = sock
        self._buffer = b""
        self.hello: dict[str, object] = {}
        self._responses: dict[str, tuple[dict[str, object], bytes]] = {}
        self._events: deque[dict[str, object]] = deque()

    @property
    def connection_id(self) -> str:
        """The id the host gave this connection in its hello."""
        return str(self.hello.get("connectionId"))

    @classmethod
    def connect(
        cls,
        path: str | os.PathLike[str],
        *,
        timeout: float = CONNECT_SECONDS,
        version: str = PACKAGE_VERSION,
    ) -> Self:
        """Connect, read the hello and check its version (HOST §1.10-§1.11).

        Raises:
            HostUnavailableError: nothing listens on ``path``.
            HelloError: the first line is not a hello, or its version is not ``version``.
        """
        import socket  # noqa: PLC0415 - `pwf request` reads its lines with this module, no socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(os.fspath(path))
        except OSError as error:
            sock.close()
            raise HostUnavailableError(f"no workflow host answers on {path}: {error}") from None
        client = cls(sock)
        try:
            first = client._read_line()
        except (HostUnavailableError, TimeoutError):
            sock.close()
            raise HelloError("Workflow host did not send hello first") from None
        hello = _decode(first)
        if hello.get("type") != "hello" or hello.get("schema") != CLIENT_SCHEMA:
            sock.close()
            raise HelloError("Workflow host did not send hello first")
        if hello.get("packageVersion") != version:
            sock.close()
            raise HelloError(
                f"Workflow client version mismatch: host {hello.get('packageVersion')},"
                f" client {version}. Install matching pi-workflows and piw packages."
            )
        sock.settimeout(None)
        client.hello = hello
        return client

    def send(self, line: bytes) -> None:
        """Send one request line (canonical JSON, without its newline).

        Raises:
            HostUnavailableError: the connection is lost.
        """
        try:
            self._sock.sendall(line + b"\n")
        except OSError as error:
            raise HostUnavailableError(f"the workflow host connection was lost: {error}") from None

    def request(self, request: bytes | dict[str, object]) -> dict[str, object]:
        """Send a request and wait for the response with its ``requestId``.

        Raises:
            HostUnavailableError: the connection is lost before the answer.
        """
        if isinstance(request, dict):
            from pwf import canonical  # noqa: PLC0415 - only callers that pass objects need it

            line = canonical.encode(request)
            request_id = request["requestId"]
        else:
            line = request
            request_id = _decode(request).get("requestId")
        self.send(line)
        return self.response(str(request_id))[0]

    def watch(
        self, request: dict[str, object], *, timeout: float | None = None
    ) -> Iterator[dict[str, object]]:
        """Send a watch request and yield the events pushed for its subscription.

        ``request`` is a ``view.runs.watch``, ``view.run.watch`` or
        ``view.session.watch`` request whose payload names a ``subscriptionId``.
        The iterator stops after ``timeout`` seconds without an event (never
        when None); leaving it does not unsubscribe (send ``view.run.unwatch``).
        Events of other subscriptions on this connection are kept for
        :meth:`events`.

        Raises:
            WatchRefusedError: the host did not accept the watch.
            HostUnavailableError: the connection is lost.
        """
        answer = self.request(request)
        if answer.get("outcome") != "accepted":
            raise WatchRefusedError(
                f"{request.get('operation')} was answered {answer.get('outcome')}:"
                f" {answer.get('error')}"
            )
        payload = request.get("payload")
        wanted = payload.get("subscriptionId") if isinstance(payload, dict) else None
        kept: list[dict[str, object]] = []
        try:
            for event in self.events(timeout):
                if event.get("subscriptionId") == wanted:
                    yield event
                else:
                    kept.append(event)
        finally:
            self._events.extendleft(reversed(kept))

    def response(self, request_id: str) -> tuple[dict[str, object], bytes]:
        """The response to ``request_id`` and its line, keeping other messages read meanwhile.

        Raises:
            HostUnavailableError: the connection is lost before the answer.
        """
        while request_id not in self._responses:
            self._receive()
        return self._responses.pop(request_id)

    def events(self, timeout: float | None = None) -> Iterator[dict[str, object]]:
        """Yield events as they come; stop after ``timeout`` seconds without one.

        Raises:
            HostUnavailableError: the connection is lost.
        """
        while True:
            while self._events:
                yield self._events.popleft()
            self._sock.settimeout(timeout)
            try:
                self._receive()
            except TimeoutError:
                return
            finally:
                self._sock.settimeout(None)

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def _receive(self) -> None:
        line = self._read_line()
        message = _decode(line)
        if message.get("type") == "response":
            self._responses[str(message.get("requestId"))] = (message, line)
        else:
            self._events.append(message)

    def _read_line(self) -> bytes:
        while (newline := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > MAX_PROTOCOL_MESSAGE_BYTES:
                raise HostUnavailableError("the workflow host sent a line over 1 MiB")
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                raise
            except OSError as error:
                raise HostUnavailableError(
                    f"the workflow host connection was lost: {error}"
                ) from None
            if not chunk:
                raise HostUnavailableError("the workflow host closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
        return line


def _decode(line: bytes) -> dict[str, object]:
    try:
        value = json.loads(line)
    except ValueError:
        raise HostUnavailableError("the workflow host sent a line that is not JSON") from None
    if not isinstance(value, dict):
        raise HostUnavailableError("the workflow host sent a line that is not an object")
    return value


def wait_for_host(
    path: str | os.PathLike[str],
    *,
    timeout: float,
    version: str = PACKAGE_VERSION,
) -> HostClient:
    """Connect, retrying until a host answers or ``timeout`` seconds have passed.

    Raises:
        HostUnavailableError: no host answered in time.
        HelloError: a host answered with the wrong hello.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return HostClient.connect(path, version=version)
        except HostUnavailableError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def call(
    path: str | os.PathLike[str],
    request: dict[str, object],
    *,
    retry_for: float = 30.0,
    version: str = PACKAGE_VERSION,
) -> dict[str, object]:
    """Send one request to the host listening on ``path`` and return its response.

    When no host answers or the connection is lost before the answer, the
    same line (same ``requestId``) is sent again once a host answers, for up
    to ``retry_for`` seconds, so work a lost host had already done comes
    back ``adopted`` (DOMAIN §7.2), as ``pwf call`` does.

    Raises:
        HostUnavailableError: no host answered within ``retry_for`` seconds.
        HelloError: a host answered with the wrong hello.
    """
    deadline = time.monotonic() + retry_for
    while True:
        client = wait_for_host(path, timeout=max(0.0, deadline - time.monotonic()), version=version)
        try:
            return client.request(request)
        except HostUnavailableError:
            if time.monotonic() >= deadline:
                raise
        finally:
            client.close()


__all__ += ["wait_for_host"]
