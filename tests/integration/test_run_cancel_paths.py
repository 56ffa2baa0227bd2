"""``run.cancel``'s three paths (HOST §4.1), decided by a served host and by direct mode.

Path 1 (a live worker of this host) and path 2 (claimed, not yet spawned)
cancel with the worker's claim; path 3 cancels a run nobody holds, directly
when its queue is ``queued`` or ``starting`` without an owner, otherwise on
the stale path, which the event records as ``staleControl``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import TYPE_CHECKING, Any

import pytest

from pwf.cli._options import open_store
from pwf.host.served import Identity, ServedHost
from pwf.protocol.client import ClientRequest
from pwf.server.supervision import Registry, Supervisor, start_identity

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._harness import START, Fixture, idle
else:
    from _harness import START, Fixture, idle

LIVE_OWNER = "Run has a live owner or is already terminal"


def _finished(fx: Fixture) -> bytes:
    [stored] = fx.store.find(type="run.finished")
    return stored.body


class TestPathThree:
    def test_a_queued_run_is_cancelled_directly(self, tmp_path: Path) -> None:
        fx = Fixture(tmp_path / "s.db")
        fx.start(at=1000)
        answer = fx.request("run.cancel", run_id="run-1", at=2000)
        assert (answer.outcome, answer.receipt) == (
            "accepted",
            {"runId": "run-1", "status": "cancelled"},
        )
        assert b"staleControl" not in _finished(fx)
        fx.close()

    def test_a_parked_run_takes_the_stale_path(self, tmp_path: Path) -> None:
        fx = Fixture.f(tmp_path / "s.db")
        assert fx.existing("run_queue", run_id="run-1")["status"] == "parked"
        answer = fx.request("run.cancel", run_id="run-1", at=2000)
        assert answer.outcome == "accepted"
        assert b'"staleControl":true' in _finished(fx)
        fx.close()

    def test_a_live_lease_of_another_owner_is_refused(self, tmp_path: Path) -> None:
        fx = Fixture.running(tmp_path / "s.db")
        answer = fx.request("run.cancel", run_id="run-1", at=2000)
        assert (answer.outcome, answer.error) == ("rejected", LIVE_OWNER)
        assert fx.events("run.finished") == 0
        fx.close()

    def test_an_expired_lease_takes_the_stale_path(self, tmp_path: Path) -> None:
        fx = Fixture.running(tmp_path / "s.db")
        expires = fx.existing("run_queue", run_id="run-1")["lease_expires_at"]
        answer = fx.request("run.cancel", run_id="run-1", at=expires + 1)
        assert answer.outcome == "accepted"
        assert b'"staleControl":true' in _finished(fx)
        fx.close()

    def test_a_terminal_run_is_refused(self, tmp_path: Path) -> None:
        fx = Fixture(tmp_path / "s.db")
        fx.start(at=1000)
        assert fx.request("run.cancel", run_id="run-1", at=2000).outcome == "accepted"
        again = fx.request("run.cancel", run_id="run-1", at=3000)
        assert (again.outcome, again.error) == ("rejected", LIVE_OWNER)
        fx.close()


# ---------------------------------------------------------------------- a served host


def _now() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def host(tmp_path: Path) -> Iterator[ServedHost]:
    store = open_store(str(tmp_path / "s.db"), create=True)
    numbers = itertools.count(1)
    pid = os.getpid()
    identity = Identity("host-test", pid, start_identity(pid) or "unknown")
    served = ServedHost(store, identity, new_epoch=lambda: f"w-{next(numbers)}")
    served.start("0" * 64, 30_000, _now())
    yield served
    store.close()


def _request(host: ServedHost, operation: str, run_id: str, payload: object = None) -> Any:
    request = ClientRequest(
        request_id=f"{operation}-{run_id}",
        client_id="cli-A",
        operation=operation,
        idempotency_key=f"{operation}-{run_id}",
        payload={} if payload is None else payload,
        run_id=run_id,
    )
    return host.request(request, _now())


def _start(host: ServedHost, tmp_path: Path, run_id: str) -> None:
    payload = {**START, "originSessionId": f"s-{run_id}", "projectPath": str(tmp_path)}
    assert _request(host, "run.start", run_id, payload).outcome == "accepted"


def _supervisor(host: ServedHost, tmp_path: Path, command: list[str]) -> Supervisor:
    async def submit(decide: Any) -> Any:
        return decide(host)

    assert host.host_epoch is not None
    return Supervisor(
        submit,
        command,
        Registry(tmp_path / "host.children.json"),
        clock=_now,
        host_epoch=host.host_epoch,
    )


def _workers(host: ServedHost, run_id: str) -> list[tuple[Any, ...]]:
    return host.store.reader().table(
        "SELECT status, pid FROM run_workers WHERE run_id = ? ORDER BY generation", (run_id,)
    )[1]


def test_path_two_cancels_a_claimed_run_before_its_worker_is_spawned(
    host: ServedHost, tmp_path: Path
) -> None:
    """The claim is the worker's, nothing is spawned, and the row ends ``cancelled``."""
    marker = tmp_path / "spawned"
    supervisor = _supervisor(host, tmp_path, ["sh", "-c", f"touch {marker}; sleep 60"])
    _start(host, tmp_path, "run-1")

    async def go() -> Any:
        await supervisor.claim()  # claimed; its worker's task has not run yet
        assert "run-1" in supervisor.active
        answer = _request(host, "run.cancel", "run-1")
        supervisor.stop_run("run-1", "cancelled")  # what the host does after the commit
        await asyncio.wait_for(idle(supervisor), 30)
        return answer

    answer = asyncio.run(go())
    assert (answer.outcome, answer.receipt) == (
        "accepted",
        {"runId": "run-1", "status": "cancelled"},
    )
    assert _workers(host, "run-1") == [("cancelled", None)]
    assert not marker.exists()
    [(queue,)] = host.store.reader().table("SELECT status FROM run_queue WHERE run_id = 'run-1'")[1]
    assert queue == "cancelled"


def test_claim_one_starts_one_run_per_call(host: ServedHost, tmp_path: Path) -> None:
    """§7.1: three queued runs, two calls, two workers; the third waits for the next call."""
    supervisor = _supervisor(host, tmp_path, ["sleep", "60"])
    for number in (1, 2, 3):
        _start(host, tmp_path, f"run-{number}")

    async def go() -> list[set[str]]:
        seen = []
        await supervisor.claim()
        seen.append(set(supervisor.active))
        await supervisor.claim()
        seen.append(set(supervisor.active))
        await supervisor.stop()
        return seen

    first, second = asyncio.run(go())
    assert first == {"run-1"}
    assert second == {"run-1", "run-2"}
    assert _workers(host, "run-3") == []
