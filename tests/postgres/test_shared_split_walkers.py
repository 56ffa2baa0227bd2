"""The whole-log walkers on a mirrored served log, either side of every split.

The served host claims the shared log, answers and releases: its host events
make ``host_state``, the table a read model makes on its first event.  Each
host's local projection file is then verified, rebuilt and replayed with
every split threshold below the log's length and above it (ADR 0074).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import pwf.fold.parallel
import pwf.store.chainwalk
from pwf.cli import cli
from pwf.client import HostClient
from pwf.server import Options, Server

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.postgres.conftest import Hosts

AT = 1_800_000_000_000


def _serve(hosts: Hosts, client_line: Callable[..., bytes], numbers: range) -> None:
    """A served host in this process answers ``run.start`` for ``numbers``, then stops."""
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
            answers = [client.request(client_line(n).strip()) for n in numbers]
        assert {"accepted"} == {answer["outcome"] for answer in answers}
    finally:
        if not server.stopped.is_set():
            run(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


@pytest.mark.parametrize("split", [False, True])
def test_walkers_of_a_mirrored_served_log(
    hosts: Hosts,
    client_line: Callable[..., bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    split: bool,
) -> None:
    """``verify``, ``rebuild`` and ``replay`` of each host's file agree, split or not."""
    _serve(hosts, client_line, range(1, 4))
    assert hosts("a", "request", stdin=client_line(10)).exit_code == 0
    _serve(hosts, client_line, range(20, 23))
    monkeypatch.setattr(pwf.fold.parallel, "SPLIT_FROM", 1 if split else 10**9)
    monkeypatch.setattr(pwf.fold.parallel, "processors", lambda: 2)
    monkeypatch.setattr(pwf.store.chainwalk, "PARALLEL_FROM", 2 if split else 10**9)
    monkeypatch.setattr(pwf.store.chainwalk, "DEEP_PARALLEL_FROM", 2 if split else 10**9)
    digests = set()
    for name in ("served", "a", "b"):
        checked = hosts(name, "verify", "--json")
        assert checked.exit_code == 0, checked.output
        assert json.loads(checked.output)["ok"] is True
        rebuilt = hosts(name, "rebuild")
        assert rebuilt.exit_code == 0, rebuilt.output
        out = tmp_path / f"replay-{name}.db"
        head = json.loads(hosts(name, "log", "head", "--json").output)["seq"]
        replayed = hosts(name, "replay", "--until", str(head), "--out", str(out))
        assert replayed.exit_code == 0, replayed.output
        digested = CliRunner().invoke(cli, ["digest", str(hosts.db(name)), "--json"])
        digests.add(json.loads(digested.output)["all"])
    assert len(digests) == 1
