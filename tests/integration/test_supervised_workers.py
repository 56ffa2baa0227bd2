"""Supervised worker processes (HOST §7), driven by a host called directly.

Real processes: ``pwf worker run`` and small shell and Python workers that
crash, hang at start, or exit without ``worker.exiting``.  The supervisor
reaches the host only through ``submit``, as under ``pwf serve``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pwf.commands import supervision
from pwf.errors import StoreBusyError
from pwf.server.supervision import Registry, Supervisor

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration._harness import START, Fixture, idle, text_blob
else:
    from _harness import START, Fixture, idle, text_blob

PWF_WORKER = [sys.executable, "-m", "pwf", "worker", "run"]
READY_THEN = """
import json, os, sys, base64, time
raw = os.environ["PI_WORKFLOWS_WORKER_LAUNCH"]
env = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
message = {{"expectedRevision": 0, "generation": env["generation"], "kind": "worker.ready",
    "launchSchema": "pi-workflows.worker-launch.v1", "messageId": "m-1",
    "operation": "worker.ready", "payload": {{}}, "runId": env["runId"],
    "schema": "pi-workflows.worker-message.v1", "workerEpoch": env["workerEpoch"]}}
sys.stdout.write(json.dumps(message, separators=(",", ":"), sort_keys=True) + "\\n")
sys.stdout.flush()
sys.stdin.readline()
{then}
"""


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    fixture = Fixture(tmp_path / "s.db")
    yield fixture
    fixture.close()


def _start(fx: Fixture, tmp_path: Path, ref: str = "builtin:echo", given: object = None) -> None:
    payload: dict[str, object] = {**START, "projectPath": str(tmp_path), "workflowSourceRef": ref}
    if given is not None:
        payload["input"] = given
    assert fx.request("run.start", payload, run_id="run-1").outcome == "accepted"


def _supervisor(fx: Fixture, tmp_path: Path, command: list[str], **options: Any) -> Supervisor:
    async def submit(decide: Any) -> Any:
        return decide(fx.host)

    return Supervisor(
        submit,
        command,
        Registry(tmp_path / "host.children.json"),
        clock=lambda: time.time_ns() // 1_000_000,
        host_epoch=1,
        **options,
    )


def _drive(supervisor: Supervisor, *, stop_after: float | None = None) -> None:
    async def go() -> None:
        await supervisor.claim()
        if stop_after is not None:
            await asyncio.sleep(stop_after)
            await supervisor.stop()
        await asyncio.wait_for(idle(supervisor), 30)

    asyncio.run(go())


def _workers(fx: Fixture) -> list[dict[str, Any]]:
    return fx.rows("run_workers", run_id="run-1")


def test_an_echo_run_completes_through_the_reference_worker(fx: Fixture, tmp_path: Path) -> None:
    _start(fx, tmp_path, given={"n": 1})
    _drive(_supervisor(fx, tmp_path, PWF_WORKER))
    run = fx.existing("runs", run_id="run-1")
    assert run["status"] == "completed"
    assert fx.blob(run["final_output_hash"]) == {"n": 1}
    [worker] = _workers(fx)
    assert (worker["status"], worker["host_epoch"]) == ("exited", 1)
    assert worker["pid"] is not None
    assert worker["process_start_identity"].startswith("linux-proc-start:")
    registry = json.loads((tmp_path / "host.children.json").read_text())
    assert registry == {"processes": [], "schema": "pi-workflows.process-registry.v1"}


def test_a_crash_before_ready_is_crashed_and_the_run_parked(fx: Fixture, tmp_path: Path) -> None:
    _start(fx, tmp_path)
    _drive(_supervisor(fx, tmp_path, ["sh", "-c", "echo boom >&2; exit 3"]))
    [worker] = _workers(fx)
    assert (worker["status"], worker["exit_code"]) == ("crashed", 3)
    assert text_blob(fx, worker["diagnostic_hash"]) == "boom"
    assert fx.existing("run_queue", run_id="run-1")["status"] == "parked"


def test_a_hang_at_start_times_out_and_is_recorded_crashed(fx: Fixture, tmp_path: Path) -> None:
    """§7.6: the startup deadline stops it (SIGTERM to its group) and the row says crashed."""
    _start(fx, tmp_path)
    started = time.monotonic()
    _drive(_supervisor(fx, tmp_path, ["sleep", "60"], startup_seconds=0.5))
    assert time.monotonic() - started < 10
    [worker] = _workers(fx)
    assert (worker["status"], worker["signal"]) == ("crashed", "SIGTERM")
    assert text_blob(fx, worker["diagnostic_hash"]) == "Workflow worker startup timed out"


def test_exit_0_without_worker_exiting_is_crashed(fx: Fixture, tmp_path: Path) -> None:
    _start(fx, tmp_path)
    _drive(_supervisor(fx, tmp_path, [sys.executable, "-c", READY_THEN.format(then="")]))
    [worker] = _workers(fx)
    assert (worker["status"], worker["exit_code"]) == ("crashed", 0)
    assert worker["ready_at"] is not None
    assert fx.existing("run_queue", run_id="run-1")["status"] == "parked"


def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace(
    fx: Fixture, tmp_path: Path
) -> None:
    """Host stop: SIGTERM to the group, SIGKILL 2 s later; the row is orphaned, the run parked."""
    _start(fx, tmp_path)
    then = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)"
    command = [sys.executable, "-c", READY_THEN.format(then=then)]
    started = time.monotonic()
    _drive(_supervisor(fx, tmp_path, command), stop_after=1.5)
    assert time.monotonic() - started < 10
    [worker] = _workers(fx)
    assert (worker["status"], worker["signal"]) == ("orphaned", "SIGKILL")
    assert fx.existing("run_queue", run_id="run-1")["status"] == "parked"


def test_a_project_path_that_does_not_exist_is_a_crash(fx: Fixture, tmp_path: Path) -> None:
    _start(fx, tmp_path / "missing")
    _drive(_supervisor(fx, tmp_path, PWF_WORKER))
    [worker] = _workers(fx)
    assert worker["status"] == "crashed"
    diagnostic = str(text_blob(fx, worker["diagnostic_hash"]))
    assert diagnostic.startswith("Workflow worker could not start:")


def test_a_worker_the_store_failed_to_attach_is_stopped_and_its_end_recorded(
    fx: Fixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write lock held past the busy timeout as the worker is attached: ADR 0120.

    Before, the failure ended the worker's supervision with the run still
    among the supervisor's active ones, so it was never claimed again while
    the host lived, and its process was killed but never waited for.
    """
    _start(fx, tmp_path)

    def busy(*_args: object) -> None:
        raise StoreBusyError("the database is locked by another writer")

    monkeypatch.setattr(supervision, "attach_process", busy)
    then = "time.sleep(600)\n"
    supervisor = _supervisor(fx, tmp_path, [sys.executable, "-c", READY_THEN.format(then=then)])
    started = time.monotonic()
    _drive(supervisor)
    assert time.monotonic() - started < 20
    assert supervisor.active == {}
    [worker] = _workers(fx)
    assert worker["status"] == "crashed"
    diagnostic = str(text_blob(fx, worker["diagnostic_hash"]))
    assert diagnostic.startswith("Workflow worker could not be attached: the database is locked")
    assert fx.existing("run_queue", run_id="run-1")["status"] == "parked"


def test_a_worker_whose_child_keeps_its_pipes_open_still_ends(fx: Fixture, tmp_path: Path) -> None:
    """The exit is seen at once although a child still holds stdout; the group is then killed."""
    _start(fx, tmp_path)
    then = (
        "import subprocess\n"
        "child = subprocess.Popen(['sleep', '600'])\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
    )
    started = time.monotonic()
    _drive(_supervisor(fx, tmp_path, [sys.executable, "-c", READY_THEN.format(then=then)]))
    assert time.monotonic() - started < 20
    [worker] = _workers(fx)
    assert (worker["status"], worker["exit_code"]) == ("crashed", 0)
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and _state(child) != "Z":
        assert time.monotonic() < deadline, "the worker's child outlived its group"
        time.sleep(0.02)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return "Z"
