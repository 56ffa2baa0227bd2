"""``pwf worker run`` against ``pwf worker`` by pipes: the reference worker in direct mode.

The two processes are cross-connected: the worker's stdout is the host's
stdin and the host's stdout the worker's stdin, so every message is answered
before the next is sent, as a supervising host answers it (HOST §7.4).
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from pwf import canonical
from pwf.cli import cli
from pwf.refworker import contract_error

if TYPE_CHECKING:
    from pathlib import Path

AT = 1_785_700_000_000
PWF = [sys.executable, "-m", "pwf"]
ASK_INPUT = {
    "answer": {"required": ["notes"], "type": "object"},
    "prompt": "Draft the release notes",
}


def _pwf(*args: str, stdin: bytes = b"", check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run ``pwf ARGS`` in this process: the set-up around the two piped processes (ADR 0064)."""
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    done = subprocess.CompletedProcess(
        ["pwf", *args], result.exit_code, result.stdout_bytes, result.stderr_bytes
    )
    if check:
        assert done.returncode == 0, done.stderr.decode()
    return done


def _request(db: Path, op: str, payload: object, key: str, **more: object) -> dict[str, Any]:
    line = {
        "clientId": "client-1",
        "idempotencyKey": key,
        "operation": op,
        "payload": payload,
        "requestId": f"req-{key}",
        "schema": "pi-workflows.client.v1",
        "type": "request",
        **more,
    }
    done = _pwf("request", "--db", str(db), "--at", str(AT), stdin=canonical.encode(line) + b"\n")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _start(db: Path, ref: str, given: object) -> None:
    payload = {
        "definitionDigest": "d1", "definitionSnapshot": {}, "input": given,
        "originSessionId": "s-1", "projectPath": "/p", "workflowName": ref.split(":")[1],
        "workflowSource": {"id": ref.split(":")[1], "kind": "builtin", "revision": "test"},
        "workflowSourceRef": ref,
    }  # fmt: skip
    assert _request(db, "run.start", payload, "start", runId="run-1")["outcome"] == "accepted"


def _activate(db: Path) -> subprocess.CompletedProcess[bytes]:
    """Launch the run and let ``pwf worker run`` serve it through ``pwf worker``."""
    envelope = _pwf("worker", "launch", "run-1", "--db", str(db), "--at", str(AT)).stdout.strip()
    encoded = base64.urlsafe_b64encode(envelope).decode().rstrip("=")
    to_host_r, to_host_w = os.pipe()
    to_worker_r, to_worker_w = os.pipe()
    host = subprocess.Popen(
        [*PWF, "worker", "--db", str(db), "--at", str(AT)], stdin=to_host_r, stdout=to_worker_w
    )
    worker = subprocess.Popen(
        [*PWF, "worker", "run"],
        stdin=to_worker_r,
        stdout=to_host_w,
        stderr=subprocess.PIPE,
        env={**os.environ, "PI_WORKFLOWS_WORKER_LAUNCH": encoded},
    )
    for end in (to_host_r, to_host_w, to_worker_r, to_worker_w):
        os.close(end)
    _, stderr = worker.communicate(timeout=60)
    assert host.wait(timeout=60) == 0
    return subprocess.CompletedProcess(worker.args, worker.returncode, b"", stderr)


def _run(db: Path) -> sqlite3.Row:
    connection = sqlite3.connect(db)
    connection.row_factory = sqlite3.Row
    try:
        row = connection.execute(
            "SELECT r.status, q.status AS queue, b.content AS output FROM runs r"
            " JOIN run_queue q USING (run_id)"
            " LEFT JOIN blobs b ON b.blob_hash = r.final_output_hash"
            " WHERE r.run_id = 'run-1'"
        ).fetchone()
    finally:
        connection.close()
    return row  # type: ignore[no-any-return]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    _pwf("init", "--db", str(path))
    return path


def test_echo_finishes_with_its_input(db: Path) -> None:
    _start(db, "builtin:echo", {"version": "2.1.0"})
    worker = _activate(db)
    assert worker.returncode == 0, worker.stderr.decode()
    row = _run(db)
    assert (row["status"], row["queue"]) == ("completed", "done")
    assert json.loads(row["output"]) == {"version": "2.1.0"}


def test_ask_waits_then_finishes_with_the_accepted_answer(db: Path) -> None:
    _start(db, "builtin:ask", ASK_INPUT)
    assert _activate(db).returncode == 0
    assert _run(db)["status"] == "waiting"
    request_id = "interaction-run-1-attempt-run-1-ask"
    submit = {
        "attempt": "attempt-run-1-ask", "requestId": request_id, "step": "ask",
        "submissionId": "sub-1", "value": {"notes": "- Fixes the parser"},
    }  # fmt: skip
    first = _request(
        db, "interaction.submit", submit, "submit-1", runId="run-1", expectedRevision=1
    )
    assert first["outcome"] == "unavailable", first  # its verdict comes from the worker
    worker = _activate(db)
    assert worker.returncode == 0, worker.stderr.decode()
    row = _run(db)
    assert (row["status"], json.loads(row["output"])) == (
        "completed",
        {"notes": "- Fixes the parser"},
    )
    retry = _request(
        db, "interaction.submit", submit, "submit-1", runId="run-1", expectedRevision=1
    )
    assert (retry["outcome"], retry["receipt"]["status"]) == ("adopted", "accepted")


def test_ask_rejects_an_answer_outside_its_contract(db: Path) -> None:
    _start(db, "builtin:ask", ASK_INPUT)
    _activate(db)
    submit = {
        "attempt": "attempt-run-1-ask", "requestId": "interaction-run-1-attempt-run-1-ask",
        "step": "ask", "submissionId": "sub-1", "value": {"text": "no notes"},
    }  # fmt: skip
    _request(db, "interaction.submit", submit, "submit-1", runId="run-1", expectedRevision=1)
    _activate(db)
    retry = _request(
        db, "interaction.submit", submit, "submit-1", runId="run-1", expectedRevision=1
    )
    assert (retry["outcome"], retry["error"]) == ("rejected", "The answer is missing notes")
    assert _run(db)["status"] == "waiting"


def test_without_an_envelope_it_says_so_in_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PI_WORKFLOWS_WORKER_LAUNCH"}
    done = subprocess.run(
        [*PWF, "worker", "run"], capture_output=True, env=env, check=False, timeout=60
    )
    assert done.returncode == 3
    assert done.stderr.decode() == "pwf worker run: PI_WORKFLOWS_WORKER_LAUNCH is not set\n"


@pytest.mark.parametrize(
    ("contract", "value", "error"),
    [
        ({"answer": {"type": "string"}}, "ok", None),
        ({"answer": {"type": "string"}}, 5, "The answer must be a string"),
        (
            {"answer": {"type": "object", "required": ["a", "b"]}},
            {"a": 1},
            "The answer is missing b",
        ),
        ({"answer": {"type": "number"}}, True, "The answer must be a number"),
        ({"answer": {"type": "array"}}, {}, "The answer must be an array"),
        (
            {"answer": {"type": "date"}},
            "x",
            "The interaction contract names an unknown answer type: date",
        ),
        ({}, "text", None),
    ],
)
def test_contract_checks(contract: object, value: object, error: str | None) -> None:
    assert contract_error(contract, value) == error
