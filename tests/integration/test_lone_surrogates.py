"""Lone surrogates end to end (DOMAIN §3.1, issue item 1, ADR 0027).

A JavaScript client that cuts text inside an emoji sends ``"\\ud83c"``: the
original accepts it in every value, keeps it, and answers with it.  This test
drives a whole interaction with a lone surrogate in every user value and
checks that each path carries it byte for byte: the log, projections, blobs,
receipts, replay, rebuild, JSONL export and import, diff, digest and explain.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

from pwf import canonical
from pwf.cli import cli
from pwf.protocol.client import ClientRequest, parse_request

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import ATTEMPT, REQUEST, START, Fixture, coordinate
else:
    from _harness import ATTEMPT, REQUEST, START, Fixture, coordinate

CUT = "Release notes \ud83c"
"""Text cut after the high half of an emoji, as a JavaScript client sends it."""
INPUT = {"text": CUT, "\udc00": ["x\udfffy", {"k": "\ud800"}]}
SNAPSHOT = {"nodes": ["draft\ud83d"]}
CONTRACT = {"prompt": "Summarise \ud83d", "schema": {"title": "\ude00"}}
VALUE = {"reply": "done \udbff"}
OUTPUT = {"reply": "final \udc01"}
PROMPT = "Also the changelog \ud83c"
REJECTED = "Try again \ud800"


def _pwf(*args: str, stdin: bytes | None = None) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout_bytes, result.stderr


def _drive(db: Path) -> tuple[Fixture, dict[str, Any]]:
    """Start, request, reject, resubmit, accept, finish, follow up: every value cut."""
    fx = Fixture(db)
    seen: dict[str, Any] = {}
    start = fx.request(
        "run.start", {**START, "input": INPUT, "definitionSnapshot": SNAPSHOT}, run_id="run-1"
    )
    assert "accepted" == start.outcome, start
    fx.launch(at=1000)
    fx.ready()
    fx.ok("node.started", {"nodeId": "ask", "timeoutMs": 60000}, attempt=ATTEMPT)
    fx.request_interaction(at=1000, contract=CONTRACT)
    seen["status"] = fx.request("run.status", None, run_id="run-1")
    epoch = coordinate(fx, at=1500)
    seen["followUp"] = fx.request(
        "followUp.queue",
        {"targetSessionId": "s-1", "coordinatorEpoch": epoch, "prompt": PROMPT},
        run_id="run-1",
        key="fu-1",
        at=1500,
    )
    first = fx.submit(VALUE, key="tool-1", submission="sub-1", at=2000)
    assert "unavailable" == first.outcome, first
    fx.validate(at=2000)
    rejected = fx.worker("interaction.reject", {"error": REJECTED})
    assert "accepted" == rejected.outcome, rejected
    seen["retry"] = fx.submit(VALUE, key="tool-1", submission="sub-x", at=2500)
    second = fx.submit(VALUE, key="tool-2", submission="sub-2", rev=1, at=3000)
    assert "unavailable" == second.outcome, second
    fx.validate(at=3000)
    seen["accept"] = fx.ok("interaction.accept", {})
    fx.ok("node.finished", {"output": OUTPUT}, attempt=ATTEMPT)
    fx.ok("run.finished", {"status": "completed", "finalOutput": OUTPUT})
    seen["final"] = fx.request("run.status", None, run_id="run-1")
    return fx, seen


def test_requests_holding_lone_surrogates_parse_as_the_original_writes_them() -> None:
    """A request line with lone surrogate escapes is canonical and keeps them in ``str``."""
    request = ClientRequest(
        request_id="r-1",
        client_id="cli-A",
        operation="run.start",
        idempotency_key="k-\ud800",
        run_id="run-1",
        payload={**START, "input": INPUT},
    )
    line = canonical.encode(
        {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": "r-1",
            "clientId": "cli-A",
            "operation": "run.start",
            "idempotencyKey": "k-\ud800",
            "runId": "run-1",
            "payload": {**START, "input": INPUT},
        }
    )
    assert b'"k-\\ud800"' in line
    parsed = parse_request(line)
    assert (INPUT, "k-\ud800") == (parsed.payload["input"], parsed.idempotency_key)  # type: ignore[index]
    assert request.fingerprint == parsed.fingerprint


def test_a_whole_interaction_carries_lone_surrogates_byte_for_byte(tmp_path: Path) -> None:  # noqa: PLR0915 - one interaction, every path checked
    """Every answer, row, blob and tool returns the values exactly as they were sent."""
    db = tmp_path / "s.db"
    fx, seen = _drive(db)

    # Receipts answer with the values as sent.
    status = seen["status"].receipt
    assert INPUT == status["input"]
    assert ("rejected", {"error": REJECTED, "status": "rejected"}, REJECTED) == (
        seen["retry"].outcome,
        seen["retry"].receipt,
        seen["retry"].error,
    )
    assert OUTPUT == seen["final"].receipt["finalOutput"]

    # The log keeps the escapes; every event reads back with the surrogates in str.
    bodies = [stored.body for stored in fx.store.read()]
    assert any(b"\\ud83c" in body for body in bodies)
    assert all(body.isascii() or b"\\ud" not in body for body in bodies)
    reserved = next(e.event for e in fx.store.entries() if e.type == "run.reserved")
    assert INPUT == canonical.decode(bytes(reserved.input))  # type: ignore[attr-defined]
    rejected = next(e.event for e in fx.store.entries() if e.type == "submission.finished")
    assert {"error": REJECTED, "status": "rejected"} == canonical.decode(bytes(rejected.receipt))  # type: ignore[attr-defined]

    # JSON blobs hold the canonical bytes (escapes); their hashes are Node's.
    run = fx.existing("runs", run_id="run-1")
    assert canonical.encode(INPUT) == bytes(
        fx.existing("blobs", blob_hash=run["input_hash"])["content"]
    )
    assert hashlib.sha256(canonical.encode(INPUT)).digest() == bytes(run["input_hash"])
    request = fx.existing("interactive_requests", request_id=REQUEST)
    contract = bytes(fx.existing("blobs", blob_hash=request["contract_hash"])["content"])
    assert CONTRACT == canonical.decode(contract)
    fx.assert_rebuild_equals_live()

    # A follow-up prompt is a text blob: UTF-8 as Node writes it, U+FFFD for the half.
    queued = seen["followUp"]
    assert "accepted" == queued.outcome, queued
    follow = fx.existing("workflow_follow_ups", follow_up_id=queued.receipt["followUpId"])
    text = bytes(fx.existing("blobs", blob_hash=follow["prompt_hash"])["content"])
    assert "Also the changelog \ufffd".encode() == text
    fx.close()

    # The chain verifies, rebuild equals live, replay reaches the head.
    assert 0 == _pwf("log", "verify", "--db", str(db))[0]
    code, out, err = _pwf("verify", "--db", str(db))
    assert (0, "") == (code, err), out
    live_digest = _pwf("digest", str(db))[1]
    replayed = tmp_path / "replay.db"
    assert 0 == _pwf("replay", "--db", str(db), "--until", "100000", "--out", str(replayed))[0]
    assert live_digest.split(b"\n")[-2:] == _pwf("digest", str(replayed))[1].split(b"\n")[-2:]
    code, out, _ = _pwf("diff", str(db), str(replayed))
    assert 0 == code, out
    assert 0 == _pwf("rebuild", "--db", str(db))[0]
    assert live_digest == _pwf("digest", str(db))[1]

    # JSONL export and import round-trip the stored bytes.
    code, exported, _ = _pwf("log", "export", "--db", str(db))
    assert 0 == code
    assert b"\\ud83c" in exported
    copy = tmp_path / "copy.db"
    code, _, err = _pwf("log", "import", "--db", str(copy), stdin=exported)
    assert (0, "") == (code, err)
    assert exported == _pwf("log", "export", "--db", str(copy))[1]
    assert live_digest == _pwf("digest", str(copy))[1]
    assert 0 == _pwf("diff", str(db), str(copy))[0]

    # explain reads the same log and says what happened, surrogates and all.
    code, out, err = _pwf("explain", "run", "run-1", "--db", str(db), "--json")
    assert (0, "") == (code, err)
    assert json.loads(out)
    code, out, err = _pwf("explain", "interaction", REQUEST, "--db", str(db))
    assert (0, "") == (code, err)
    code, out, err = _pwf("log", "show", "--db", str(db))
    assert (0, "") == (code, err)


def test_text_columns_hold_the_code_units_sent(tmp_path: Path) -> None:
    """A lone surrogate in a text column is stored as its WTF-8 and reads back (ADR 0071).

    ADR 0027 bound it as U+FFFD, as better-sqlite3 does; text without one
    keeps its UTF-8 bytes.
    """
    fx = Fixture(tmp_path / "s.db")
    start = {**START, "workflowName": "echo\ud800"}
    assert "accepted" == fx.request("run.start", start, run_id="run-1").outcome
    connection = sqlite3.connect(tmp_path / "s.db")
    try:
        found = connection.execute("SELECT hex(workflow_name), project_path FROM runs").fetchone()
    finally:
        connection.close()
    assert (b"echo".hex().upper() + "EDA080", "/p") == found
    assert "echo\ud800" == fx.existing("runs", run_id="run-1")["workflow_name"]
    fx.assert_rebuild_equals_live()
    fx.close()
