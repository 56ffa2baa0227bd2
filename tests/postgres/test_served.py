"""``pwf serve`` on a shared PostgreSQL log: its decisions land there; direct hosts see them."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any

import psycopg

from pwf.client import HostClient
from pwf.server import Options, Server

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.postgres.conftest import Hosts

AT = 1_800_000_000_000


def test_a_served_host_writes_the_shared_log(
    hosts: Hosts, client_line: Callable[..., bytes]
) -> None:
    """Requests through the socket land in PostgreSQL, and another host folds them."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(120)

    options = Options(
        db=hosts.db("served"),
        store_url=hosts.url,
        clock=lambda: AT,
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
        with HostClient.connect(server.paths.socket, timeout=30) as client:
            answers = [client.request(client_line(n).strip()) for n in (1, 2, 1)]
        assert ["accepted", "accepted", "adopted"] == [a["outcome"] for a in answers]
    finally:
        if not server.stopped.is_set():
            run(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()
    with psycopg.connect(hosts.url) as connection:
        recorded = connection.execute(
            "SELECT count(*) FROM events WHERE type = 'command.recorded'"
        ).fetchone()
    assert (2,) == recorded
    listed = hosts("b", "query", "runs", "--json")
    assert ["run-1", "run-2"] == sorted(row["run_id"] for row in json.loads(listed.output))
    verified = hosts("b", "log", "verify", "--json")
    assert json.loads(verified.output)["ok"]
