"""Served views and supervised workers, through real sockets and processes (HOST §2, §4, §7).

Each test starts ``pwf serve`` as a process; with ``PWF_WORKER_COMMAND`` set
it supervises a worker process for every run it activates.  Waits poll with
generous deadlines, so a loaded machine only makes them slower.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._served import Served, init, line, rows, short_dir, until

    from pwf.client import HostClient
else:
    from _served import Served, init, line, rows, short_dir, until

SLEEPER = """
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
time.sleep(600)
"""


@pytest.fixture
def place() -> Iterator[Path]:
    with short_dir() as path:
        init(path / "s.db")
        yield path


def _serve(place: Path, monkeypatch: pytest.MonkeyPatch, command: str | None) -> Served:
    if command is None:
        monkeypatch.delenv("PWF_WORKER_COMMAND", raising=False)
    else:
        monkeypatch.setenv("PWF_WORKER_COMMAND", command)
    return Served(place / "s.db")


def _start(
    client: HostClient, place: Path, run_id: str, ref: str = "builtin:echo", given: object = None
) -> dict[str, Any]:
    payload = {
        "definitionDigest": "d1", "definitionSnapshot": {},
        "input": {} if given is None else given, "originSessionId": f"s-{run_id}",
        "projectPath": str(place), "workflowName": ref.split(":")[1],
        "workflowSource": {"id": ref.split(":")[1], "kind": "builtin", "revision": "test"},
        "workflowSourceRef": ref,
    }  # fmt: skip
    return client.request(line("run.start", payload, rid=f"start-{run_id}", run_id=run_id))


def _status(db: Path, run_id: str) -> tuple[str, str] | None:
    found = rows(
        db,
        "SELECT r.status, q.status FROM runs r JOIN run_queue q USING (run_id) WHERE run_id = ?",
        run_id,
    )
    return found[0] if found else None


def _workers(db: Path, run_id: str) -> list[tuple[Any, ...]]:
    return rows(
        db,
        "SELECT status, pid, host_epoch FROM run_workers WHERE run_id = ? ORDER BY generation",
        run_id,
    )


def _sleeper(place: Path) -> str:
    """A worker that says ready and then sleeps, as a command line."""
    script = place / "sleeper.py"
    script.write_text(SLEEPER)
    return f"{sys.executable} {script}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:  # noqa: PTH123 - a zombie is not alive
            return handle.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


class TestSubscriptions:
    def test_runs_revision_1_then_2_after_a_run_start_and_nothing_unchanged(
        self, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        host = _serve(place, monkeypatch, None)
        try:
            with host.client() as client:
                watch = client.request(
                    line("view.runs.watch", {"subscriptionId": "runs"}, rid="w-1")
                )
                assert (watch["outcome"], watch["receipt"]) == ("accepted", {"subscribed": True})
                first = next(client.events(timeout=30))
                assert (first["event"], first["revision"], first["subscriptionId"]) == (
                    "runs",
                    1,
                    "runs",
                )
                assert first["payload"]["total"] == 0  # type: ignore[index]
                assert list(client.events(timeout=1.0)) == []
                assert _start(client, place, "run-1")["outcome"] == "accepted"
                second = next(client.events(timeout=30))
                assert (second["event"], second["revision"]) == ("runs", 2)
                assert second["payload"]["total"] == 1  # type: ignore[index]
                assert list(client.events(timeout=1.0)) == []
                gone = client.request(
                    line("view.run.unwatch", {"subscriptionId": "nope"}, rid="u-1")
                )
                assert (gone["outcome"], gone["receipt"]) == ("accepted", {"subscribed": False})
        finally:
            host.close()

    def test_runs_page_conflicts_with_a_fresh_page(
        self, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        host = _serve(place, monkeypatch, None)
        try:
            with host.client() as client:
                page = client.request(
                    line("view.runs.page", {"cursor": 0, "revision": "?"}, rid="p-1")
                )
                revision = page["receipt"]["revision"]  # type: ignore[index]
                same = client.request(
                    line("view.runs.page", {"cursor": 0, "revision": revision}, rid="p-2")
                )
                assert same["outcome"] == "accepted"
                _start(client, place, "run-1")
                changed = client.request(
                    line("view.runs.page", {"cursor": 0, "revision": revision}, rid="p-3")
                )
                assert (changed["outcome"], changed["error"]) == (
                    "conflict",
                    "Workflow run list changed while paging",
                )
                assert changed["receipt"]["total"] == 1  # type: ignore[index]
                missing = client.request(
                    line("view.run.watch", {"subscriptionId": "r"}, rid="w-2", run_id="nope")
                )
                assert (missing["outcome"], missing["error"]) == (
                    "notFound",
                    "Workflow run not found",
                )
        finally:
            host.close()

    def test_a_session_subscription_sees_the_coordinator_view(
        self, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        host = _serve(place, monkeypatch, None)
        try:
            with host.client() as client:
                watch = {"coordinator": True, "sessionId": "s-1", "subscriptionId": "session"}
                response = client.request(line("view.session.watch", watch, rid="w-1"))
                epoch = response["receipt"]["coordinatorEpoch"]  # type: ignore[index]
                event = until(
                    lambda: next(client.events(timeout=5), None), 30, "a session snapshot"
                )
                assert (event["event"], event["revision"]) == ("session_snapshot", 1)
                view = event["payload"]
                assert view["schema"] == "pi-workflows.session-view.v1"
                assert (view["coordinatorEpoch"], view["coordinatorActive"]) == (epoch, True)
                assert view["branchReportRequired"] is True
                status: Any = client.request(line("host.status", rid="st-1"))["receipt"]
                assert set(status) == {
                    "state", "epoch", "socketAvailable", "startedAt", "heartbeatAt", "expiresAt",
                    "activeWorkers", "connectedClients", "queuedRuns", "runningRuns", "parkedRuns",
                    "waitingRuns", "expiredClaims", "pendingInteractions", "ambiguousEffects",
                    "pendingControllers", "activeControllerWorkers", "lifecycleContradictions",
                }  # fmt: skip
                assert (status["state"], status["socketAvailable"], status["connectedClients"]) == (
                    "running",
                    True,
                    1,
                )
        finally:
            host.close()


WORKER = f"{sys.executable} -m pwf worker run"


class TestSupervised:
    def test_a_run_completes_through_pwf_worker_run(
        self, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        host = _serve(place, monkeypatch, WORKER)
        try:
            with host.client() as client:
                assert _start(client, place, "run-1", given={"n": 1})["outcome"] == "accepted"
            until(lambda: _status(host.db, "run-1") == ("completed", "done"), 60, "completed")
            [(status, pid, epoch)] = _workers(host.db, "run-1")
            assert (status, epoch) == ("exited", 1)
            assert pid is not None
        finally:
            host.close()

    def test_an_interaction_is_answered_through_interaction_submit(
        self, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        host = _serve(place, monkeypatch, WORKER)
        try:
            with host.client() as client:
                ask = {"answer": {"required": ["notes"], "type": "object"}, "prompt": "Notes?"}
                _start(client, place, "run-1", "builtin:ask", ask)
                until(lambda: _status(host.db, "run-1") == ("waiting", "parked"), 60, "waiting")
                submit = {
                    "attempt": "attempt-run-1-ask",
                    "requestId": "interaction-run-1-attempt-run-1-ask",
                    "step": "ask",
                    "submissionId": "sub-1",
                    "value": {"text": "no notes"},
                }
                bad = client.request(
                    line("interaction.submit", submit, rid="sub-1", run_id="run-1", revision=1)
                )
                assert (bad["outcome"], bad["error"]) == ("rejected", "The answer is missing notes")
                good = {**submit, "submissionId": "sub-2", "value": {"notes": "- fixed"}}
                answer = client.request(
                    line("interaction.submit", good, rid="sub-2", run_id="run-1", revision=1)
                )
                assert answer["outcome"] == "accepted", answer
                assert answer["receipt"]["status"] == "accepted"  # type: ignore[index]
            until(lambda: _status(host.db, "run-1") == ("completed", "done"), 60, "completed")
        finally:
            host.close()

    def test_a_cancelled_live_run_loses_its_worker_within_3_s(
        self, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        host = _serve(place, monkeypatch, _sleeper(place))
        try:
            with host.client() as client:
                _start(client, place, "run-1")
                until(lambda: _status(host.db, "run-1") == ("running", "running"), 60, "running")
                [(_, pid, _)] = _workers(host.db, "run-1")
                cancelled = time.monotonic()
                answer = client.request(line("run.cancel", rid="cancel-1", run_id="run-1"))
                assert (answer["outcome"], answer["receipt"]) == (
                    "accepted",
                    {"runId": "run-1", "status": "cancelled"},
                )
                until(lambda: not _alive(pid), 3, "the worker gone")
                assert time.monotonic() - cancelled < 3
                until(lambda: _workers(host.db, "run-1")[0][0] == "cancelled", 10, "row cancelled")
                assert _status(host.db, "run-1") == ("cancelled", "cancelled")
        finally:
            host.close()

    def test_kill_9_then_restart_reaps_orphans_and_claims_again(
        self, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A 6 s lease renewed every second: the restart waits seconds for it, not 30 s."""
        monkeypatch.setenv("PWF_LEASE_MS", "6000")
        monkeypatch.setenv("PWF_HEARTBEAT_MS", "1000")
        command = _sleeper(place)
        host = _serve(place, monkeypatch, command)
        try:
            with host.client() as client:
                _start(client, place, "run-1")
            until(lambda: _status(host.db, "run-1") == ("running", "running"), 60, "running")
            [(_, pid, _)] = _workers(host.db, "run-1")
            host.process.send_signal(signal.SIGKILL)
            host.process.wait(60)
            assert _alive(pid)
        finally:
            host.close()
        [(expires, heartbeat)] = rows(
            place / "s.db", "SELECT expires_at, heartbeat_at FROM host_state"
        )
        assert expires - heartbeat == 6_000, "the lease is not the one set"
        # The dead host's lease still guards the claim (HOST §1.8) until it runs out.
        until(lambda: time.time_ns() // 1_000_000 > expires + 50, 90, "the old lease to expire")
        again = _serve(place, monkeypatch, command)
        try:
            until(lambda: not _alive(pid), 30, "the old worker reaped")
            until(lambda: len(_workers(again.db, "run-1")) == 2, 60, "a new worker")
            old, new = _workers(again.db, "run-1")
            assert old[0] == "orphaned"
            assert new[2] == 2
            until(
                lambda: _workers(again.db, "run-1")[1][0] == "running", 60, "the new worker ready"
            )
        finally:
            again.close()
            for found in _workers(place / "s.db", "run-1"):
                if found[1] is not None and _alive(found[1]):
                    os.killpg(found[1], signal.SIGKILL)
