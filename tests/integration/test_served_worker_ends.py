"""Supervised workers through ``pwf serve`` and its socket (HOST §1.9, §7.6-§7.8, §7.11).

Real host and worker processes: a worker that crashes, one that hangs at
start, one that exits 0 without ``worker.exiting``, and one that stays
ready while the heartbeat renews its run's claim.  The tests that wait on a
timer set it shorter through ``pwf serve``'s settings (``PWF_WORKER_STARTUP_MS``,
``PWF_HEARTBEAT_MS``), so they take seconds; the spec's values (15 s startup
deadline, 10 s heartbeat, 30 s lease) stay the defaults, which the first test
pins, and the others run the host with them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.server import Options

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


TIMERS = ("PWF_LEASE_MS", "PWF_HEARTBEAT_MS", "PWF_WORKER_STARTUP_MS")


def test_the_spec_timers_are_the_defaults(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset, ``pwf serve`` runs a 30 s lease, a 10 s heartbeat and a 15 s startup deadline.

    DOMAIN §5.1 and HOST §7.6 give these defaults; the host is started with
    what the command line passes it, and ``--help`` shows them.
    """
    for name in TIMERS:
        monkeypatch.delenv(name, raising=False)
    given: list[Options] = []

    def serve(options: Options) -> int:
        given.append(options)
        return 0

    monkeypatch.setattr("pwf.server.serve", serve)
    done = CliRunner().invoke(cli, ["serve", "--db", str(place / "s.db")])
    assert (done.exit_code, done.output) == (0, "")
    [options] = given
    assert (options.lease_ms, options.heartbeat_ms, options.startup_seconds) == (30_000, 10_000, 15)
    spec = Options(db=place / "s.db")  # the host's own defaults agree
    assert (spec.lease_ms, spec.heartbeat_ms, spec.startup_seconds) == (30_000, 10_000, 15)
    shown = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
    for option, default in (("lease", 30000), ("heartbeat", 10000), ("worker-startup", 15000)):
        assert re.search(rf"--{option}-ms MS .*?\[default: {default};", shown), option
    refused = CliRunner().invoke(
        cli, ["serve", "--db", str(place / "s.db")], env={"PWF_HEARTBEAT_MS": "30000"}
    )
    assert refused.exit_code == 2
    assert "--heartbeat-ms (30000) must be less than --lease-ms (30000)" in refused.output


def test_a_worker_that_crashes_is_crashed_and_its_run_parked(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the default timers: the served host's claim lasts 30 s from its last heartbeat."""
    for name in TIMERS:
        monkeypatch.delenv(name, raising=False)
    served = _serve(place, monkeypatch, "sh -c 'echo boom >&2; exit 3'")
    try:
        [(lease,)] = rows(served.db, "SELECT expires_at - heartbeat_at FROM host_state")
        assert lease == 30_000
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


STARTUP_MS = 2_000
"""The startup deadline the hanging worker meets (``PWF_WORKER_STARTUP_MS``; default 15 s)."""


def test_a_worker_that_hangs_at_start_is_stopped_at_its_startup_deadline_and_recorded_crashed(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PWF_WORKER_STARTUP_MS", str(STARTUP_MS))
    served = _serve(place, monkeypatch, "sleep 600")
    try:
        _start(served, place)
        worker = until(lambda: _first_worker(served.db), 90, "the startup deadline")
        assert (worker["status"], worker["signal"]) == ("crashed", "SIGTERM")
        assert worker["diagnostic"] == b"Workflow worker startup timed out"
        waited = worker["finishedAt"] - worker["startedAt"]
        assert STARTUP_MS <= waited < STARTUP_MS + 10_000, waited
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


def _stopped(served: Served, place: Path) -> None:
    """The host and every worker process group it started are gone."""
    served.close()
    for (pid,) in rows(place / "s.db", "SELECT pid FROM run_workers WHERE pid IS NOT NULL"):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def _renewals(db: Path) -> list[tuple[int, bytes]]:
    return [
        (at, bytes(body))
        for at, body in rows(
            db, "SELECT at, body FROM events WHERE type = 'run.leases_renewed' ORDER BY seq"
        )
    ]


HEARTBEAT_MS = 2_500


def test_the_heartbeat_renews_a_live_workers_claim(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every heartbeat the host renews the run's claim for its lease; the worker sends nothing.

    The heartbeat is 2.5 s here (``PWF_HEARTBEAT_MS``; the default 10 s is
    pinned above), the lease the default 30 s (HOST §1 Timers).
    """
    monkeypatch.delenv("PWF_LEASE_MS", raising=False)
    monkeypatch.setenv("PWF_HEARTBEAT_MS", str(HEARTBEAT_MS))
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
        [(run_id, worker_epoch)] = data["claims"]  # one worker: one claim in the heartbeat's event
        assert rows(served.db, "SELECT run_id, owner_worker_epoch FROM run_queue") == [
            (run_id, worker_epoch)
        ]
        assert data["leaseExpiresAt"] == first_at + 30_000
        assert data["leaseExpiresAt"] > claimed
        assert HEARTBEAT_MS / 2 <= second_at - first_at <= HEARTBEAT_MS * 2
        [(lease,)] = rows(served.db, "SELECT lease_expires_at FROM run_queue")
        assert lease >= data["leaseExpiresAt"]
        with served.client() as client:
            status = client.request(line("host.status", rid="status-1"))
        receipt: Any = status["receipt"]
        assert (receipt["activeWorkers"], receipt["expiredClaims"]) == (1, 0)
    finally:
        _stopped(served, place)


FLOOD = READY + 'lines = (b"x" * 79 + b"\\n") * 800\nwhile True:\n    os.write(2, lines)\n'


def test_a_worker_that_floods_its_stderr_is_logged_within_a_budget(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the host logged every line: 11.7 MB a second here, and a whole processor (ADR 0122).

    Its lines are logged at 8 KiB a second after a 64 KiB burst, the others
    counted; the host answers beside it.
    """
    served = _serve(place, monkeypatch, _script(place, "flood.py", FLOOD))
    try:
        _start(served, place)
        until(lambda: ": xxxxxxxx" in served.stderr(), 60, "the worker's first lines")
        time.sleep(0.5)  # its burst is spent
        size = served.log.stat().st_size
        time.sleep(2)
        grown = served.log.stat().st_size - size
        assert grown < 64 * 1024, grown  # 2 s at 8 KiB a second, with the log's own prefixes
        assert "lines of stderr not logged (over 8 KiB a second)" in served.stderr()
        with served.client() as client:
            status = client.request(line("host.status", rid="status-1"))
        assert status["outcome"] == "accepted", status
        assert served.process.poll() is None
    finally:
        _stopped(served, place)


def test_a_worker_that_always_crashes_is_started_again_less_and_less_often(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its run is claimed again at once after the first crash, then after 1, 2, 4 s (ADR 0126).

    Before, a claim followed every answer to a client, so beside a client
    asking 50 times a second the worker was started again about 15 times a
    second, six events each.
    """
    served = _serve(place, monkeypatch, _script(place, "ready.py", READY))
    try:
        _start(served, place)
        began = time.monotonic()
        with served.client() as client:
            number = 0
            while time.monotonic() - began < 5:
                number += 1
                client.request(line("host.status", rid=f"status-{number}"))
                time.sleep(0.02)
        [(epochs,)] = rows(served.db, "SELECT count(*) FROM run_workers")
        assert 3 <= epochs <= 6, epochs  # at about 0, 0, 1, 3 s; then 7 s
    finally:
        _stopped(served, place)
