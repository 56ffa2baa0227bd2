"""Supervised workers through ``pwf serve`` and its socket (HOST §1.9, §7.6-§7.8, §7.11).

Real host and worker processes: a worker that crashes, one that hangs at
start, one that exits 0 without ``worker.exiting``, and one that stays
ready while the heartbeat renews its run's claim.  The host's timers are
the spec's (15 s startup deadline, 10 s heartbeat, 30 s lease), so these
tests take that long.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._served import Served, init, line, rows, short_dir, until
else:
    from _served import Served, init, line, rows, short_dir, until

pytestmark = pytest.mark.slow

READY = """
import base64, json, os, sys, time
raw = os.environ["PI_WORKFLOWS_WORKER_LAUNCH"]
env = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
message = {"expectedRevision": 0, "generation": env["generation"], "kind": "worker.ready",
    "launchSchema": "pi-workflows.worker-launch.v1", "messageId": "m-1",
    "operation": "worker.ready", "payload": {}, "runId": env["runId"],
    "schema": "pi-workflows.worker-message.v1", "workerEpoch": env["workerEpoch"]}
sys.stdout.write(json.dumps(message, separators=(",", ":"), sort_keys=True) + "\\n")
sys.stdout.flush()
sys.stdin.readline()
"""


@pytest.fixture
def place() -> Iterator[Path]:
    with short_dir() as path:
        init(path / "s.db")
        yield path


def _serve(place: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> Served:
    monkeypatch.setenv("PWF_WORKER_COMMAND", command)
    return Served(place / "s.db")


def _script(place: Path, name: str, text: str) -> str:
    path = place / name
    path.write_text(text)
    return f"{sys.executable} {path}"


def _start(served: Served, place: Path) -> None:
    payload = {
        "definitionDigest": "d1", "definitionSnapshot": {}, "input": {},
        "originSessionId": "s-1", "projectPath": str(place), "workflowName": "echo",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "workflowSourceRef": "builtin:echo",
    }  # fmt: skip
    with served.client() as client:
        answer = client.request(line("run.start", payload, rid="start-1", run_id="run-1"))
    assert answer["outcome"] == "accepted", answer


def _first_worker(db: Path) -> dict[str, Any] | None:
    found = rows(
        db,
        "SELECT w.status, w.exit_code, w.signal, w.ready_at, w.started_at, w.finished_at,"
        " b.content FROM run_workers w LEFT JOIN blobs b ON b.blob_hash = w.diagnostic_hash"
        " WHERE w.run_id = 'run-1' ORDER BY w.generation LIMIT 1",
    )
    if not found or found[0][0] in ("starting", "running"):
        return None
    names = ("status", "exitCode", "signal", "readyAt", "startedAt", "finishedAt", "diagnostic")
    worker = dict(zip(names, found[0], strict=True))
    worker["diagnostic"] = None if worker["diagnostic"] is None else bytes(worker["diagnostic"])
    return worker


def test_a_worker_that_crashes_is_crashed_and_its_run_parked(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = _serve(place, monkeypatch, "sh -c 'echo boom >&2; exit 3'")
    try:
        _start(served, place)
        worker = until(lambda: _first_worker(served.db), 60, "the first worker's end")
        assert (worker["status"], worker["exitCode"], worker["signal"]) == ("crashed", 3, None)
        assert worker["diagnostic"] == b"boom"
        assert worker["readyAt"] is None
        # Exit recovery parked the run; the poll claims it again for a new epoch (§7.11 step 5).
        until(lambda: len(rows(served.db, "SELECT 1 FROM run_workers")) >= 2, 60, "a new epoch")
        assert "run run-1 parked after worker crashed" in served.stderr()
    finally:
        served.close()


def test_a_worker_that_hangs_at_start_is_stopped_after_15_s_and_recorded_crashed(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = _serve(place, monkeypatch, "sleep 600")
    try:
        _start(served, place)
        worker = until(lambda: _first_worker(served.db), 90, "the startup deadline")
        assert (worker["status"], worker["signal"]) == ("crashed", "SIGTERM")
        assert worker["diagnostic"] == b"Workflow worker startup timed out"
        waited = worker["finishedAt"] - worker["startedAt"]
        assert 15_000 <= waited < 45_000, waited
    finally:
        served.close()


def test_a_worker_that_exits_without_worker_exiting_is_crashed(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = _serve(place, monkeypatch, _script(place, "ready.py", READY))
    try:
        _start(served, place)
        worker = until(lambda: _first_worker(served.db), 60, "the worker's end")
        assert (worker["status"], worker["exitCode"], worker["signal"]) == ("crashed", 0, None)
        assert worker["readyAt"] is not None
        assert worker["diagnostic"] is None
    finally:
        served.close()


def _renewals(db: Path) -> list[tuple[int, bytes]]:
    return [
        (at, bytes(body))
        for at, body in rows(
            db, "SELECT at, body FROM events WHERE type = 'run.lease_renewed' ORDER BY seq"
        )
    ]


def test_the_heartbeat_renews_a_live_workers_claim(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every 10 s the host renews the run's claim for 30 s (HOST §1.9); the worker sends nothing."""
    sleeper = _script(place, "sleeper.py", READY + "time.sleep(600)\n")
    served = _serve(place, monkeypatch, sleeper)
    try:
        _start(served, place)
        until(
            lambda: rows(served.db, "SELECT status FROM run_queue") == [("running",)], 60, "ready"
        )
        [(claimed,)] = rows(served.db, "SELECT lease_expires_at FROM run_queue")
        renewals = until(lambda: len(_renewals(served.db)) >= 2 and _renewals(served.db), 60)
        (first_at, first), (second_at, _) = renewals[:2]
        data = json.loads(first)["data"]
        assert data["leaseExpiresAt"] == first_at + 30_000
        assert data["leaseExpiresAt"] > claimed
        assert 5_000 <= second_at - first_at <= 20_000
        [(lease,)] = rows(served.db, "SELECT lease_expires_at FROM run_queue")
        assert lease >= data["leaseExpiresAt"]
        with served.client() as client:
            status = client.request(line("host.status", rid="status-1"))
        receipt: Any = status["receipt"]
        assert (receipt["activeWorkers"], receipt["expiredClaims"]) == (1, 0)
    finally:
        served.close()
        for (pid,) in rows(place / "s.db", "SELECT pid FROM run_workers WHERE pid IS NOT NULL"):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
