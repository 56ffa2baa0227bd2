"""A served host on the shared log, in this process, and ``pwf call`` to it.

:func:`served` runs ``pwf serve``'s :class:`~pwf.server.Server` for host
``served`` of a :class:`Hosts` on an event loop of its own thread, started
and stopped around the block; :func:`call` sends request lines to it as an
operator does, by ``pwf call`` in another process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pwf.server import Options, Server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.postgres.conftest import Hosts

__all__ = ["call", "served"]


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
