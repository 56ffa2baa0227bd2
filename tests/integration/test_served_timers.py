"""A served host's timers outlive a failure of the store, and a fault of pwf's stops the host.

ADR 0120.  Before, one heartbeat that found the write lock held past the busy timeout
ended the heartbeat's timer: the host went on answering, its claim ran out,
and from then on it answered every request "Workflow host is stopping" for as
long as it lived, without a line in its log.  A store error in the expiry
pass's claim of a run, or in a publish, ended those timers the same way.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from pwf.server._timers import Timers

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from tests.integration._served import Served, init, line, until
else:
    from _served import Served, init, line, until


def test_a_heartbeat_the_store_failed_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write lock held past the busy timeout fails a renewal; the next one keeps the claim."""
    db = tmp_path / "s.db"
    init(db)
    monkeypatch.setenv("PWF_BUSY_TIMEOUT_MS", "200")
    served = Served(db, "--lease-ms", "3000", "--heartbeat-ms", "500")
    try:
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        until(lambda: "host claim renewal failed" in served.stderr(), 20, "a failed renewal")
        holder.execute("ROLLBACK")
        holder.close()
        time.sleep(4)  # past the 3 s lease: only the renewals after the lock kept the claim
        with served.client() as client:
            answer = client.request(line("run.status", None, rid="after", run_id="run-x"))
        assert (answer["outcome"], answer["error"]) == ("notFound", "Workflow run not found: run-x")
        assert served.process.poll() is None
    finally:
        assert served.terminate() == 0
    assert "tried again next heartbeat: " in served.stderr()
    assert "Traceback" not in served.stderr()


def test_a_timer_that_fails_otherwise_stops_the_host() -> None:
    """A fault of pwf's in a timer is logged, and the host stops with exit 3, not silently."""
    stopped: list[bool] = []
    hub: Any = SimpleNamespace(exit_code=0, request_stop=lambda: stopped.append(True))
    timers = Timers(hub)

    async def broken() -> None:
        raise RuntimeError("a fault")

    async def quiet() -> None:
        await asyncio.sleep(60)

    async def run() -> None:
        failed = asyncio.create_task(broken())
        cancelled = asyncio.create_task(quiet())
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(failed, cancelled, return_exceptions=True)
        timers._ended(cancelled)
        assert (hub.exit_code, stopped) == (0, [])
        timers._ended(failed)

    asyncio.run(run())
    assert (hub.exit_code, stopped) == (3, [True])
