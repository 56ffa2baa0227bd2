"""A flood of pipelined requests slows the flooders, not the host or its other clients (ADR 0074).

Eight connections pipeline ``run.list`` requests as fast as their sockets
take them, four reading their answers and four never reading, for the whole
test, beside one polite client that sends one ``host.status`` at a time.
The host runs with a 3 s lease renewed every second.  Before ADR 0074 every
frame went straight to the writer's queue and the lease renewal waited
behind tens of thousands of them: the host lost its claim and exited 3.  Now
each connection holds at most :data:`~pwf.server._connections.MAX_UNANSWERED`
unanswered requests (the rest wait in its socket), and the host's duties go
before client work: the claim holds, the polite client gets every answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Final

import pytest

from pwf import canonical
from pwf.client import HostClient
from pwf.server._connections import MAX_UNANSWERED
from pwf.server._held import MOST_HELD_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration._hosted import Hosted
    from tests.integration._served import Served, init, line, rows, short_dir

    from pwf.protocol.client import ClientRequest
    from pwf.server._connections import Connection
else:
    from _hosted import Hosted
    from _served import Served, init, line, rows, short_dir

pytestmark = pytest.mark.slow

FLOOD_SECONDS: Final = float(os.environ.get("PWF_TEST_FLOOD_SECONDS", "60"))
"""How long the flood lasts: 60 s, as the issue that found the fault asks."""
FLOODERS: Final = 8
LEASE_MS: Final = 3000
BATCH: Final = 256


def _run_list(connection: int, number: int) -> bytes:
    return canonical.encode(
        {
            "clientId": f"flood-{connection}",
            "idempotencyKey": f"f-{connection}-{number}",
            "operation": "run.list",
            "payload": {},
            "requestId": f"f-{connection}-{number}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


class Flooder(threading.Thread):
    """One connection that pipelines requests until the deadline; it reads answers or not."""

    def __init__(self, path: Path, number: int, deadline: float, *, reads: bool) -> None:
        super().__init__(daemon=True)
        self.path, self.number, self.deadline, self.reads = path, number, deadline, reads
        self.sent = 0
        self.received = 0

    def run(self) -> None:
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(1.0)
            sock.connect(str(self.path))
            if self.reads:
                reader = threading.Thread(target=self._read, args=(sock,), daemon=True)
                reader.start()
            while time.monotonic() < self.deadline:
                chunk = b"".join(
                    _run_list(self.number, self.sent + i) + b"\n" for i in range(BATCH)
                )
                view = memoryview(chunk)
                while view and time.monotonic() < self.deadline:
                    try:
                        view = view[sock.send(view) :]
                    except TimeoutError:
                        continue  # the host stopped reading this connection: the bound holds
                self.sent += BATCH

    def _read(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while time.monotonic() < self.deadline + 1:
                try:
                    data = sock.recv(1 << 16)
                except TimeoutError:
                    continue
                if not data:
                    return
                self.received += data.count(b"\n")


def test_eight_flooding_connections_cost_the_host_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host keeps its claim through the flood; the polite client gets every answer."""
    monkeypatch.setenv("PWF_LEASE_MS", str(LEASE_MS))
    monkeypatch.setenv("PWF_HEARTBEAT_MS", "1000")
    with short_dir() as folder:
        db = folder / "state.db"
        init(db)
        served = Served(db)
        try:
            deadline = time.monotonic() + FLOOD_SECONDS
            flooders = [
                Flooder(served.socket, number, deadline, reads=number % 2 == 0)
                for number in range(FLOODERS)
            ]
            for flooder in flooders:
                flooder.start()
            answered, slowest = 0, 0.0
            with HostClient.connect(served.socket, timeout=30) as polite:
                while time.monotonic() < deadline:
                    started = time.monotonic()
                    answer = polite.request(line("host.status", rid=f"polite-{answered}"))
                    slowest = max(slowest, time.monotonic() - started)
                    assert answer["outcome"] == "accepted", answer
                    assert answer["receipt"]["state"] == "running", answer  # type: ignore[index]
                    answered += 1
                    time.sleep(0.05)
            for flooder in flooders:
                flooder.join(30)
            assert served.process.poll() is None, served.stderr()
            with HostClient.connect(served.socket, timeout=30) as after:
                final = after.request(line("host.status", rid="polite-after"))
            assert final["outcome"] == "accepted"
            assert served.terminate() == 0, served.stderr()
        finally:
            served.close()
        assert "claim lost" not in served.stderr()
        assert answered >= FLOOD_SECONDS * 2, f"{answered} polite answers, slowest {slowest:.2f} s"
        assert slowest < LEASE_MS / 1000, f"the slowest polite answer took {slowest:.2f} s"
        assert sum(flooder.received for flooder in flooders if flooder.reads) > 0
        renewed = [
            at
            for (at,) in rows(db, "SELECT at FROM events WHERE type = 'host.renewed' ORDER BY seq")
        ]
        assert len(renewed) >= FLOOD_SECONDS / 2
        gaps = [later - earlier for earlier, later in itertools.pairwise(renewed)]
        assert max(gaps) < LEASE_MS, f"renewals {max(gaps)} ms apart with a {LEASE_MS} ms lease"


def test_a_connection_holds_at_most_its_bound_of_unanswered_requests(tmp_path: Path) -> None:
    """1 000 frames in one write: never more than the bound in flight, every one answered."""
    init(tmp_path / "state.db")
    hosted = Hosted(tmp_path / "state.db")
    seen: list[int] = []
    dispatch = hosted.server.dispatch

    def counting(connection: Connection, request: ClientRequest) -> None:
        seen.append(connection.inflight)
        dispatch(connection, request)

    hosted.server.dispatch = counting  # type: ignore[method-assign]
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(str(hosted.server.paths.socket))
            sock.sendall(b"".join(_run_list(0, n) + b"\n" for n in range(1000)))
            received = b""
            while received.count(b"\n") < 1001:  # the hello, then one answer each
                data = sock.recv(1 << 16)
                assert data, "the host closed the connection"
                received += data
    finally:
        hosted.close()
    assert len(seen) == 1000
    assert max(seen) == MAX_UNANSWERED
    answers = received.split(b"\n")[1:1001]
    assert all(b'"outcome":"accepted"' in answer for answer in answers)


def _big_start() -> bytes:
    """A ``run.start`` line of about 1 MiB (a long list as its input), sent again and again."""
    payload = {
        "definitionDigest": "d1", "definitionSnapshot": {}, "input": [0] * 520_000,
        "originSessionId": "s-big", "projectPath": "/project", "workflowName": "echo",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "workflowSourceRef": "builtin:echo",
    }  # fmt: skip
    return canonical.encode(
        {
            "clientId": "big", "idempotencyKey": "big", "operation": "run.start",
            "payload": payload, "requestId": "big", "runId": "run-big",
            "schema": "pi-workflows.client.v1", "type": "request",
        }
    )  # fmt: skip


async def _writer_held(hosted: Hosted, gate: threading.Event) -> None:
    """Keep the host's writer busy until ``gate`` is set: nothing read is answered meanwhile."""
    writer = hosted.server.writer
    assert writer is not None
    await writer.submit(lambda _host: gate.wait(120), duty=True)


def _settled(count: Callable[[], int], quiet: float = 1.5) -> int:
    """``count()`` once it has not changed for ``quiet`` seconds."""
    last, since = count(), time.monotonic()
    while time.monotonic() - since < quiet:
        time.sleep(0.1)
        if count() != last:
            last, since = count(), time.monotonic()
    return last


def test_the_host_holds_a_bounded_number_of_bytes_of_requests_read(tmp_path: Path) -> None:
    """Four connections of one process pipeline 64 lines of 1 MiB each: it holds half the bound.

    The writer is kept busy meanwhile, so whatever the host reads waits in
    it.  Before (ADR 0123), all 256 were read and held, parsed, many times
    their size: eight such connections took the host to 2.3 GB.  A client
    of another process is still read, and everything is answered.
    """
    init(tmp_path / "state.db")
    hosted = Hosted(tmp_path / "state.db")
    big = _big_start() + b"\n"
    dispatch = hosted.server.dispatch
    read: list[ClientRequest] = []

    def counting(connection: Connection, request: ClientRequest) -> None:
        read.append(request)
        dispatch(connection, request)

    hosted.server.dispatch = counting  # type: ignore[method-assign]

    def pipeline() -> None:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(120)
            sock.connect(str(hosted.server.paths.socket))
            sock.sendall(big * 64)
            received = 0
            while received < 65:  # the hello, then one answer each
                data = sock.recv(1 << 16)
                assert data, "the host closed the connection"
                received += data.count(b"\n")

    gate = threading.Event()
    busy = asyncio.run_coroutine_threadsafe(_writer_held(hosted, gate), hosted.loop)
    rude = [threading.Thread(target=pipeline) for _ in range(4)]
    try:
        for thread in rude:
            thread.start()
        held = _settled(lambda: len(read))
        polite = subprocess.Popen(
            [sys.executable, "-m", "pwf", "call", "--db", str(tmp_path / "state.db")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert polite.stdin is not None
        polite.stdin.write(line("host.status", rid="polite") + b"\n")
        polite.stdin.close()
        read_polite = _settled(lambda: len(read))
        gate.set()
        busy.result(60)
        for thread in rude:
            thread.join(300)
        assert not any(thread.is_alive() for thread in rude)
        assert polite.stdout is not None
        with polite.stdout:
            out = polite.stdout.read()
        assert polite.wait(120) == 0
    finally:
        gate.set()
        hosted.close()
    assert held * len(big) <= MOST_HELD_BYTES // 2 < (held + 1) * len(big), held
    assert read_polite == held + 1  # the other process's request was read, held beside them
    assert b'"outcome":"accepted"' in out, out
    assert len(read) == 257
