"""A watcher that stops reading holds a bounded share of the host's memory (ADR 0111).

Before, every push to a subscription went into its connection's buffer
until 64 MiB waited unread, and only then was the connection closed: fifty
``view.runs.watch`` connections that never read, beside four writers, took
a host from 38 MB to 2.9 GB in 30 s.  Now a connection with
:data:`~pwf.server._connections.BACKLOG` bytes unsent is left out of
publishes (and its socket is not read) until its client reads them; it is
then sent, once, each payload that changed meanwhile, with the next revision.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING, Final

import pytest

from pwf import canonical
from pwf.server._connections import BACKLOG

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._hosted import Hosted
    from tests.integration._served import init, line, run_start, short_dir

    from pwf.client import HostClient
else:
    from _hosted import Hosted
    from _served import init, line, run_start, short_dir

pytestmark = pytest.mark.slow

RUNS: Final = 300
"""Runs started while the watcher does not read: their pages outgrow every buffer."""
PUSH: Final = 64 << 10
"""The largest ``runs`` payload (HOST §2.8): one push may go past the backlog."""


@pytest.fixture
def hosted() -> Iterator[Hosted]:
    with short_dir() as tmp:
        db = tmp / "state.db"
        init(db)
        host = Hosted(db)
        try:
            yield host
        finally:
            host.close()


def _watcher(path: Path) -> socket.socket:
    """A connection that watches the run list with the smallest receive buffer."""
    sock = socket.socket(socket.AF_UNIX)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect(str(path))
    watch = line("view.runs.watch", {"subscriptionId": "list"}, rid="watch")
    sock.sendall(watch + b"\n")
    return sock


def _buffered(hosted: Hosted) -> list[tuple[int, bool, bool]]:
    """Each watching connection's unsent bytes, whether it is backed up, whether closed."""

    async def look() -> list[tuple[int, bool, bool]]:
        views = hosted.server.views
        assert views is not None
        return [
            (c.transport.get_write_buffer_size(), c.backed_up, c.closed)
            for c in hosted.server.connections
            if c.transport is not None and views.watching(c)
        ]

    found: list[tuple[int, bool, bool]] = hosted.run(look())
    return found


def _start(writer: HostClient, numbers: range) -> None:
    """Start a run for each number, one answer at a time."""
    for number in numbers:
        writer.send(run_start(number))
        assert writer.response(f"r-{number}")[0]["outcome"] == "accepted"


def _read_all(sock: socket.socket) -> list[dict[str, object]]:
    """Every line the watcher is sent until the host has nothing more for it."""
    sock.settimeout(2)
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return [json.loads(raw) for raw in data.split(b"\n") if raw]


def test_a_stalled_watcher_is_published_what_changed_once_it_reads(hosted: Hosted) -> None:
    watcher = _watcher(hosted.server.paths.socket)
    try:
        with hosted.client() as writer:
            _start(writer, range(RUNS))
            [(unsent, backed_up, closed)] = _buffered(hosted)
            assert backed_up
            assert not closed
            assert unsent <= BACKLOG + PUSH
            lines = _read_all(watcher)
        events = [found for found in lines if found.get("type") == "event"]
        revisions = [int(str(event["revision"])) for event in events]
        assert revisions == list(range(1, len(events) + 1))
        assert len(events) < RUNS  # the stalled time's changes came as fewer pushes
        last = events[-1]["payload"]
        assert isinstance(last, dict)
        assert last["total"] == RUNS
        [(unsent, backed_up, closed)] = _buffered(hosted)
        assert (unsent, backed_up, closed) == (0, False, False)
    finally:
        watcher.close()


def test_a_caught_up_watcher_is_pushed_each_change_again(hosted: Hosted) -> None:
    watcher = _watcher(hosted.server.paths.socket)
    try:
        with hosted.client() as writer:
            _start(writer, range(RUNS))
            seen = _read_all(watcher)
            revision = max(int(str(e["revision"])) for e in seen if e.get("type") == "event")
            _start(writer, range(RUNS, RUNS + 1))
            after = [e for e in _read_all(watcher) if e.get("type") == "event"]
        assert [int(str(e["revision"])) for e in after] == [revision + 1]
        payload = after[0]["payload"]
        assert isinstance(payload, dict)
        assert payload["total"] == RUNS + 1
    finally:
        watcher.close()


def test_requests_of_a_backed_up_connection_wait_in_its_socket(hosted: Hosted) -> None:
    """A client that sends and never reads holds at most the backlog and its bound's answers."""
    sock = socket.socket(socket.AF_UNIX)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(0.5)
    sock.connect(str(hosted.server.paths.socket))
    try:
        with hosted.client() as writer:
            _start(writer, range(RUNS))
        page = canonical.encode({"cursor": 0, "revision": "?"})
        sent = 0
        for number in range(2000):
            request = line("view.runs.page", json.loads(page), rid=f"p-{number}") + b"\n"
            try:
                sock.sendall(request)
            except TimeoutError:
                break  # the host stopped reading this connection
            sent += 1
        assert sent < 2000

        async def look() -> tuple[int, bool]:
            [connection] = [c for c in hosted.server.connections if c.transport and not c.closed]
            assert connection.transport is not None
            return connection.transport.get_write_buffer_size(), connection.closed

        unsent, closed = hosted.run(look())
        assert not closed
        assert unsent <= BACKLOG + 64 * PUSH
    finally:
        sock.close()
