"""``process.register`` / ``process.unregister`` from a real worker under ``pwf serve`` (HOST §7.7).

The worker starts two children in sessions of their own, sends one message
after another and writes every answer to a file.  The host answers with
the original's texts, keeps a registered child in ``host.children.json``,
and kills it when the worker's epoch ends.
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

REGISTRAR = """
import base64, json, os, subprocess, sys, time
raw = os.environ["PI_WORKFLOWS_WORKER_LAUNCH"]
env = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
numbers = iter(range(1, 100))
def send(operation, payload, kind="worker.progress"):
    message = {"expectedRevision": 0, "generation": env["generation"], "kind": kind,
        "launchSchema": "pi-workflows.worker-launch.v1", "messageId": f"m-{next(numbers)}",
        "operation": operation, "payload": payload, "runId": env["runId"],
        "schema": "pi-workflows.worker-message.v1", "workerEpoch": env["workerEpoch"]}
    sys.stdout.write(json.dumps(message, separators=(",", ":"), sort_keys=True) + "\\n")
    sys.stdout.flush()
    return json.loads(sys.stdin.readline())
send("worker.ready", {}, "worker.ready")
kept = subprocess.Popen(["sleep", "600"], start_new_session=True)
dropped = subprocess.Popen(["sleep", "600"], start_new_session=True)
answers = [
    send("process.register", {"pid": kept.pid}),
    send("process.register", {"pid": kept.pid}),
    send("process.register", {"pid": 0}),
    send("process.register", {"pid": -1}),
    send("process.register", "seven"),
    send("process.register", {"pid": os.getppid()}),
    send("process.unregister", {"pid": dropped.pid}),
    send("process.register", {"pid": dropped.pid}),
    send("process.unregister", {"pid": dropped.pid}),
    send("process.unregister", {"pid": dropped.pid}),
]
with open("answers.json.tmp", "w") as out:
    json.dump({"answers": answers, "kept": kept.pid, "dropped": dropped.pid}, out)
os.rename("answers.json.tmp", "answers.json")
time.sleep(600)
"""


@pytest.fixture
def place() -> Iterator[Path]:
    with short_dir() as path:
        init(path / "s.db")
        yield path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:  # noqa: PTH123 - a zombie is not alive
            return handle.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _shown(answer: dict[str, Any]) -> tuple[Any, ...]:
    return (answer["outcome"], answer.get("result"), answer.get("error"))


def test_a_worker_registers_and_unregisters_its_children(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = place / "registrar.py"
    script.write_text(REGISTRAR)
    monkeypatch.setenv("PWF_WORKER_COMMAND", f"{sys.executable} {script}")
    served = Served(place / "s.db")
    found: dict[str, Any] = {}
    try:
        payload = {
            "definitionDigest": "d1", "definitionSnapshot": {}, "input": {},
            "originSessionId": "s-1", "projectPath": str(place), "workflowName": "echo",
            "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
            "workflowSourceRef": "builtin:echo",
        }  # fmt: skip
        with served.client() as client:
            assert (
                client.request(line("run.start", payload, rid="s", run_id="run-1"))["outcome"]
                == "accepted"
            )
        answers_file = place / "answers.json"
        until(answers_file.exists, 60, "the worker's answers")
        found = json.loads(answers_file.read_text())
        kept, dropped = found["kept"], found["dropped"]
        assert [_shown(answer) for answer in found["answers"]] == [
            ("accepted", {"pid": kept}, None),
            ("accepted", {"pid": kept}, None),
            ("rejected", None, "Worker process PID must be positive"),
            ("rejected", None, "pid must be a non-negative integer"),
            ("rejected", None, "worker process payload must be an object"),
            ("rejected", None, "Worker process is not a direct child of the active worker"),
            ("rejected", None, "Worker process is not registered to this worker epoch"),
            ("accepted", {"pid": dropped}, None),
            ("accepted", {"pid": dropped}, None),
            ("rejected", None, "Worker process is not registered to this worker epoch"),
        ]
        registry = json.loads((place / "host" / "host.children.json").read_text())
        pids = {item["pid"] for item in registry["processes"]}
        assert kept in pids
        assert dropped not in pids
        recorded = rows(
            served.db,
            "SELECT operation, outcome FROM worker_messages WHERE operation LIKE 'process.%'"
            " ORDER BY created_at, message_id",
        )
        assert len(recorded) == 10
        assert {outcome for _, outcome in recorded} == {"accepted", "rejected"}
        with served.client() as client:
            cancel = client.request(line("run.cancel", rid="c", run_id="run-1"))
        assert cancel["outcome"] == "accepted"
        # The epoch ended: its registered child goes with it, the unregistered one stays.
        until(lambda: not _alive(kept), 10, f"the registered child killed {served.stderr()}")
        assert _alive(dropped)
        until(
            lambda: (
                json.loads((place / "host" / "host.children.json").read_text())["processes"] == []
            ),
            10,
            "the registry emptied",
        )
    finally:
        served.close()
        for pid in (found.get("kept"), found.get("dropped")):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
