"""A served host on the shared log, in this process, and ``pwf call`` to it.

:func:`served` runs ``pwf serve``'s :class:`~pwf.server.Server` for host
``served`` of a :class:`Hosts` on an event loop of its own thread, started
and stopped around the block; :func:`call` sends request lines to it as an
operator does, by ``pwf call`` in another process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pwf.client import HostClient, socket_path, wait_for_host
from pwf.server import Options, Server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.postgres.conftest import Hosts

__all__ = ["call", "served", "served_log", "short_lease_host", "started"]


@contextmanager
def served(hosts: Hosts, at: int) -> Iterator[Server]:
    """Host ``served`` serving on the shared log, its clock standing at ``at``, for the block."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(120)

    options = Options(
        db=hosts.db("served"),
        store_url=hosts.url,
        clock=lambda: at,
        token="token-of-the-test",  # noqa: S106 - a test claim token
        heartbeat_ms=10**9,
        poll_ms=10**9,
        signals=False,
    )

    async def make() -> Server:
        return Server(options)

    server = run(make())
    try:
        run(server.start())
        yield server
    finally:
        if not server.stopped.is_set():
            run(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


def call(db: Path, *lines: bytes) -> list[dict[str, Any]]:
    """The answers ``pwf call --db DB`` prints to ``lines``; it must exit 0 and say nothing else."""
    called = subprocess.run(
        [str(Path(sys.executable).with_name("pwf")), "call", "--db", str(db)],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert (0, b"") == (called.returncode, called.stderr)
    return [json.loads(text) for text in called.stdout.splitlines()]


@contextmanager
def short_lease_host(hosts: Hosts, busy_ms: int) -> Iterator[subprocess.Popen[bytes]]:
    """``pwf serve`` as host ``served`` with a 3 s lease renewed every 0.5 s (log: ``served.err``).

    Its busy timeout is ``busy_ms``; its log is :func:`served_log`.
    Ready when the block begins; asked to stop after it, and must then exit 0.
    """
    db, log = hosts.db("served"), served_log(hosts)
    with log.open("wb") as err:
        host = subprocess.Popen(
            [sys.executable, "-m", "pwf", "serve", "--db", str(db), "--store", hosts.url,
             "--lease-ms", "3000", "--heartbeat-ms", "500"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PWF_BUSY_TIMEOUT_MS": str(busy_ms)},
        )  # fmt: skip
    try:
        wait_for_host(socket_path(db), timeout=60).close()
        yield host
    finally:
        host.terminate()
        assert host.wait(60) == 0, log.read_text()


def served_log(hosts: Hosts) -> Path:
    """Where :func:`short_lease_host` logs."""
    return hosts.folder / "served.err"


def started(db: Path, line: bytes) -> None:
    """The served host of ``db`` accepts ``line``, the ``run.start`` of request ``r-1``."""
    with HostClient.connect(socket_path(db), timeout=60) as client:
        client.send(line)
        answer = client.response("r-1")[0]
    assert answer["outcome"] == "accepted", answer
