"""The web view's connections: a deadline for each request head and a bound on all (ADR 0115).

Before, one client that opened connections and sent half a request on each
held them forever, and past the descriptor limit no page was served.  These
tests run :class:`pwf.web._serving.Guarded` in a uvicorn server of their
own, with a short deadline and a small bound, in front of a stub app that
holds a request open on ``/hold``; ``pwf web`` serves with it through
:func:`pwf.web.serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

pytest.importorskip("uvicorn")

import uvicorn

from pwf.web._serving import Guarded

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.web._web_served import free_port
else:
    from _web_served import free_port

HEAD = b"GET / HTTP/1.1\r\nHost: x\r\n"
"""The start of a request whose head never ends."""
DEADLINE = 0.6
HOLD = 3.5
"""How long ``/hold`` takes to answer: past the refusal test's waits."""


class _Small(Guarded):
    most: ClassVar[int] = 4
    head_seconds: ClassVar[float] = DEADLINE
    closed: ClassVar[dict[str, int]] = {"late": 0, "evicted": 0, "refused": 0}


async def _app(
    scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/hold":
        await asyncio.sleep(HOLD)
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def port() -> Iterator[int]:
    """A uvicorn server of :class:`_Small` connections in a thread, until the test ends."""
    chosen = free_port()
    config = uvicorn.Config(_app, host="127.0.0.1", port=chosen, http=_Small, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.01)
    try:
        yield chosen
    finally:
        server.should_exit = True
        thread.join(10)
        _Small.closed.update(late=0, evicted=0, refused=0)


def _open(port: int, sent: bytes = HEAD) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=5)
    if sent:
        connection.sendall(sent)
    return connection


def _closed(connection: socket.socket, within: float = 5.0) -> bool:
    """Whether the server closed ``connection`` within ``within`` seconds (what it sent is read)."""
    connection.settimeout(within)
    try:
        while connection.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def _answer(connection: socket.socket, path: str = "/") -> bytes:
    connection.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    connection.settimeout(5)
    return connection.recv(4096)


def test_a_request_head_that_never_ends_is_closed_at_its_deadline(port: int) -> None:
    with contextlib.closing(_open(port)) as half, contextlib.closing(_open(port, b"")) as silent:
        started = time.monotonic()
        assert _closed(half)
        assert _closed(silent)
        assert DEADLINE * 0.8 <= time.monotonic() - started < DEADLINE + 3
    assert _Small.closed["late"] == 2


def test_a_head_sent_a_byte_at_a_time_is_not_given_more_time(port: int) -> None:
    with contextlib.closing(_open(port, b"G")) as trickle:
        started = time.monotonic()
        with contextlib.suppress(OSError):
            for byte in b"ET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40:
                time.sleep(DEADLINE / 10)
                trickle.sendall(bytes([byte]))
        assert _closed(trickle)
        assert time.monotonic() - started < DEADLINE + 3


def test_an_answered_connection_must_send_its_next_head_in_time(port: int) -> None:
    with contextlib.closing(_open(port, b"")) as client:
        assert _answer(client).startswith(b"HTTP/1.1 200")
        client.sendall(HEAD)  # uvicorn's own keep-alive timer stops at the first byte
        started = time.monotonic()
        assert _closed(client)
        assert time.monotonic() - started < DEADLINE + 3


def test_past_the_bound_the_longest_waiting_connection_makes_room(port: int) -> None:
    stalled = [_open(port) for _ in range(4)]
    time.sleep(0.1)
    try:
        with contextlib.closing(_open(port, b"")) as newcomer:
            assert _answer(newcomer).startswith(b"HTTP/1.1 200")
        assert _closed(stalled[0], within=DEADLINE / 2)
        assert _Small.closed["evicted"] >= 1
    finally:
        for connection in stalled:
            connection.close()


def test_past_the_bound_with_every_connection_answered_a_new_one_is_refused(port: int) -> None:
    held = [_open(port, b"") for _ in range(4)]
    try:
        for connection in held:
            connection.sendall(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        with contextlib.closing(_open(port, b"")) as newcomer:
            assert _closed(newcomer, within=2)
        assert _Small.closed["refused"] == 1
        time.sleep(DEADLINE * 1.5)  # a request being answered has no head deadline
        assert not any(_closed(connection, within=0.05) for connection in held)
    finally:
        for connection in held:
            connection.close()
