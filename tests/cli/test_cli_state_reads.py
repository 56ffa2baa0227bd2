"""``state.status`` and ``state.verify`` through ``pwf request`` (HOST §2.16, §2.17, ADR 0040)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

from pwf import canonical

if TYPE_CHECKING:
    from pathlib import Path

Run = Callable[..., Result]
AT = 1_764_403_200_000


@pytest.fixture
def db(run: Run, tmp_path: Path) -> Path:
    """A database with one started run."""
    path = tmp_path / "state.db"
    assert run("init", "--db", str(path)).exit_code == 0
    start = {
        "definitionDigest": "d1", "definitionSnapshot": {}, "input": {}, "originSessionId": "s-1",
        "projectPath": "/p", "workflowName": "echo",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "workflowSourceRef": "builtin:echo",
    }  # fmt: skip
    line = _line("start", "run.start", start, runId="run-1")
    assert run("request", "--db", str(path), "--at", str(AT), stdin=line).exit_code == 0
    return path


def _line(request_id: str, operation: str, payload: object, **more: str) -> bytes:
    request = {
        **more,
        "clientId": "client-1",
        "idempotencyKey": f"key-{request_id}",
        "operation": operation,
        "payload": payload,
        "requestId": request_id,
        "schema": "pi-workflows.client.v1",
        "type": "request",
    }
    return canonical.encode(request) + b"\n"


def test_state_status_carries_the_operators_overview(run: Run, db: Path) -> None:
    """``{sizeBytes, counts, overview}``; the overview is ``pwf status --json``'s."""
    result = run(
        "request", "--db", str(db), "--at", str(AT), stdin=_line("r-1", "state.status", None)
    )
    assert (0, "") == (result.exit_code, result.stderr)
    response = json.loads(result.stdout)
    assert response["outcome"] == "accepted"
    receipt = response["receipt"]
    assert set(receipt) == {"counts", "overview", "sizeBytes"}
    assert receipt["sizeBytes"] == db.stat().st_size
    assert receipt["overview"]["counts"]["lifecycleContradictions"] == 0
    status = run("status", "--db", str(db), "--now", str(AT), "--json")
    assert json.loads(status.stdout)["counts"] == receipt["overview"]["counts"]


def test_state_verify_is_valid_and_appends_nothing(run: Run, db: Path) -> None:
    result = run("request", "--db", str(db), "--at", str(AT), stdin=_line("r-1", "state.verify", 7))
    assert (0, "") == (result.exit_code, result.stderr)
    response = json.loads(result.stdout)
    assert (response["outcome"], response["receipt"]) == ("accepted", {"valid": True})
    tail = run("log", "tail", "--db", str(db), "-n", "1", "--json")
    assert json.loads(tail.stdout)["type"] == "command.recorded"
    assert json.loads(tail.stdout)["cause"]["operation"] == "run.start"


class TestStateVerbs:
    """``pwf state status`` and ``pwf state verify``: the original's spellings of the two reads."""

    def test_state_status_is_the_receipt_of_state_status(self, run: Run, db: Path) -> None:
        line = _line("r-1", "state.status", None)
        answered = run("request", "--db", str(db), "--at", str(AT), stdin=line)
        receipt = json.loads(answered.stdout)["receipt"]
        before = run("log", "show", "--db", str(db), "--json").stdout
        shown = run("state", "status", "--db", str(db), "--at", str(AT), "--json")
        assert (0, "") == (shown.exit_code, shown.stderr)
        assert {k: v for k, v in receipt.items() if k != "overview"} == json.loads(shown.stdout)
        human = run("state", "status", "--db", str(db), "--at", str(AT)).stdout.splitlines()
        assert f"size {receipt['sizeBytes']} bytes" == human[0]
        assert "  runs 1, settingsScopes 0, unsettledEffects 0" in human
        assert before == run("log", "show", "--db", str(db), "--json").stdout

    def test_state_verify_is_valid_then_names_the_failure(self, run: Run, db: Path) -> None:
        good = run("state", "verify", "--db", str(db))
        assert (0, "valid: SQLite integrity, hash chain and projections\n") == (
            good.exit_code,
            good.stdout,
        )
        assert (
            '{"error":null,"valid":true}\n'
            == run("state", "verify", "--db", str(db), "--json").stdout
        )
        connection = sqlite3.connect(db)
        connection.execute("UPDATE runs SET workflow_name = 'other'")
        connection.commit()
        connection.close()
        bad = run("state", "verify", "--db", str(db))
        assert 1 == bad.exit_code
        assert bad.stderr.startswith("invalid: ")
        assert "runs" in bad.stderr
        as_json = json.loads(run("state", "verify", "--db", str(db), "--json").stdout)
        assert False is as_json["valid"]
