"""Conformance scenarios G (continuation, terminal message) and J (bad input, worker protocol).

Scenarios 49-51 need ``run.restart`` and turn reports (not built yet); only the
terminal message scenario 49 starts from is checked here.  Of scenario 61 only
``run.status`` without runId applies; the others are branch and turn reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pwf.protocol.worker import WorkerResponse

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import ATTEMPT, RUN, Fixture
else:
    from _harness import ATTEMPT, RUN, Fixture

TERMINAL_49 = "workflow-message-21fc3503db23d2995a9f7d36502465d90b8a1200307e9813372b3a0913069e0f"
FINGERPRINT_49 = "96eeb2504de7d6d9f3b48c7fb61a8db885d657d807eb63a3b5a2c47f069ac4b9"
DECISION = {"prompt": "Ship it?", "options": ["yes", "no"]}


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Fixture]:
    """``run-1`` with worker ``w-1`` active and ``attempt-1`` running, closed after the test."""
    fixture = Fixture.running(tmp_path / "s.db")
    yield fixture
    fixture.close()


def _run(fx: Fixture, run_id: str) -> dict[str, Any]:
    row = fx.row("runs", run_id=run_id)
    assert row is not None
    return row


def _queue(fx: Fixture, run_id: str) -> str:
    row = fx.row("run_queue", run_id=run_id)
    assert row is not None
    return str(row["status"])


def _lineage(fx: Fixture, run_id: str) -> tuple[object, ...]:
    run = _run(fx, run_id)
    return (
        run["parent_run_id"],
        run["root_run_id"],
        run["lineage_kind"],
        run["restart_number"],
        run["parent_terminal_fingerprint"],
        run["origin_session_id"],
    )


# ------------------------------------------------------------------ G


def test_g49_terminal_message_of_a_failed_run(tmp_path: Path) -> None:
    """A failed interactive run posts the terminal message scenario 49 restarts from."""
    fx = Fixture.f(tmp_path / "s.db")
    fx.submit({"reply": "x"})
    fx.validate(at=2000)
    fx.ok("interaction.accept", {})
    fx.ok("node.finished", {"output": {"reply": "x"}}, attempt=ATTEMPT)

    finished = fx.worker("run.finished", {"status": "failed", "error": "boom"}, at=3000)

    assert ("accepted", {"runId": RUN, "status": "failed"}) == (
        finished.outcome,
        finished.result,
    )
    message = fx.row("workflow_messages", workflow_message_id=TERMINAL_49)
    assert message is not None
    assert ("terminal", "terminal:run-1", "s-1", "pending") == (
        message["kind"],
        message["source_id"],
        message["target_session_id"],
        message["status"],
    )
    details = fx.blob(message["content_hash"])["details"]
    assert FINGERPRINT_49 == details["terminalFingerprint"]
    terminal = details["terminal"]
    assert {
        "error": "boom",
        "finalOutput": None,
        "input": {},
        "reason": None,
        "status": "failed",
        "workflowRef": "builtin:echo",
        "restartNumber": 0,
        "runId": RUN,
        "earlierOutcomes": [],
        "schema": "pi-workflows.terminal-result.v1",
        "workflowName": "echo",
    } == terminal
    assert ("failed", "failed") == (_run(fx, RUN)["status"], _queue(fx, RUN))
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g52_decision_continuation(running: Fixture) -> None:
    """Answering a parked decision settles it and reserves continuation-abc; parent queue done."""
    fx = running
    created = fx.ok(
        "store.createHumanDecisionRequest",
        {"decisionId": "decision-abc", "contract": DECISION},
        attempt=ATTEMPT,
    )
    assert {"requestId": "decision-abc", "revision": 1, "status": "pending"} == created.result
    request = fx.row("interactive_requests", request_id="decision-abc")
    assert request is not None
    assert ("decision", 1, "pending") == (request["kind"], request["revision"], request["status"])
    queue = fx.row("run_queue", run_id=RUN)
    assert queue is not None
    assert ("parked", None) == (queue["status"], queue["owner_worker_epoch"])
    assert [("decision", "pending")] == [
        (row["kind"], row["status"]) for row in fx.rows("workflow_messages")
    ]

    stale = fx.request(
        "decision.answer",
        {"requestId": "decision-abc", "response": {"choice": "no"}, "submissionId": "d-sub-0"},
        rid="d-0",
        key="decide-0",
        rev=2,
        at=1500,
    )
    assert ("rejected", "Interactive request revision conflict") == (stale.outcome, stale.error)
    assert fx.row("host_commands", request_id="d-0") is None

    answer = fx.request(
        "decision.answer",
        {"requestId": "decision-abc", "response": {"choice": "yes"}, "submissionId": "d-sub-1"},
        rid="d-1",
        key="decide-1",
        rev=1,
        at=2000,
    )

    assert (
        "accepted",
        {
            "decision": {"choice": "yes"},
            "parentRunId": RUN,
            "requestId": "decision-abc",
            "runId": "continuation-abc",
        },
    ) == (answer.outcome, answer.receipt)
    request = fx.row("interactive_requests", request_id="decision-abc")
    assert request is not None
    assert ("settled", 2, "d-sub-1") == (
        request["status"],
        request["revision"],
        request["accepted_submission_id"],
    )
    assert [("decision", "cancelled")] == [
        (row["kind"], row["status"]) for row in fx.rows("workflow_messages")
    ]
    assert (RUN, RUN, "continuation", 0, None, "s-1") == _lineage(fx, "continuation-abc")
    assert ("queued", "done") == (_queue(fx, "continuation-abc"), _queue(fx, RUN))
    assert 1 == fx.events("run.queue_done_for_continuation")

    replay = fx.request(
        "decision.answer",
        {"requestId": "decision-abc", "response": {"choice": "yes"}, "submissionId": "d-sub-1"},
        rid="d-2",
        key="decide-1",
        rev=1,
        at=3000,
    )
    assert ("adopted", answer.receipt) == (replay.outcome, replay.receipt)
    fx.assert_rebuild_equals_live()


def test_g_checkpoint_continuation(running: Fixture) -> None:
    """Answering a run parked at a checkpoint reserves the named continuation run."""
    fx = running
    parked = fx.ok("run.park", {"checkpoint": "review"})
    assert {"checkpoint": "review", "runId": RUN} == parked.result
    assert ("waiting", "parked") == (_run(fx, RUN)["status"], _queue(fx, RUN))

    answer = fx.request(
        "checkpoint.answer",
        {"continuationRunId": "cont-1", "input": {"approved": True}},
        RUN,
        key="cp-1",
        at=2000,
    )

    assert ("accepted", {"parentRunId": RUN, "runId": "cont-1", "status": "queued"}) == (
        answer.outcome,
        answer.receipt,
    )
    assert (RUN, RUN, "continuation", 0, None, "s-1") == _lineage(fx, "cont-1")
    assert {"approved": True} == fx.blob(_run(fx, "cont-1")["input_hash"])
    assert ("queued", "done") == (_queue(fx, "cont-1"), _queue(fx, RUN))
    checkpoint = fx.row("run_checkpoints", run_id=RUN)
    assert checkpoint is not None
    assert ("review", "cont-1") == (checkpoint["node_id"], checkpoint["continuation_run_id"])
    assert 1 == fx.events("run.queue_done_for_continuation")

    again = fx.request(
        "checkpoint.answer",
        {"continuationRunId": "cont-1", "input": {"approved": True}},
        RUN,
        key="cp-2",
        at=3000,
    )
    assert (
        "adopted",
        {
            "alreadyAnswered": True,
            "detail": "Checkpoint already answered",
            "parentRunId": RUN,
            "runId": "cont-1",
        },
    ) == (again.outcome, again.receipt)
    assert 2 == fx.events("run.reserved")
    fx.assert_rebuild_equals_live()


# ------------------------------------------------------------------ J


def test_j61_run_status_without_run_id(running: Fixture) -> None:
    """run.status without runId is rejected and not recorded."""
    fx = running
    events = fx.events()

    response = fx.request("run.status", {}, rid="bad-status", key="bad-status")

    assert ("rejected", "run.status requires runId") == (response.outcome, response.error)
    assert fx.row("host_commands", request_id="bad-status") is None
    assert events == fx.events()
    fx.assert_rebuild_equals_live()


def test_j62_worker_message_replay(tmp_path: Path) -> None:
    """Worker messages replay by id, refuse a reused id, ignore stale epochs and check revisions."""
    fx = Fixture.f(tmp_path / "s.db")  # worker w-1 (generation 1) has ended by parking
    fx.submit({"reply": "x"})
    fx.validate(at=2000)  # worker w-2, generation 2, is active
    assert ("w-2", 2) == (fx.epoch, fx.generation)
    current = fx.revision()
    line = fx.message("store.readRun", {}, message_id="m-1", rev=current)
    first = fx.send(line)
    assert ("accepted", current) == (first.outcome, first.revision)
    stored = fx.count("worker_messages")
    events = fx.events()

    replay = fx.send(line, at=2500)
    reused = fx.worker("store.readRun", {"other": True}, message_id="m-1", rev=current)
    stale_epoch = fx.worker("store.readRun", {}, epoch="w-1", gen=1, message_id="m-9", rev=current)

    assert first == replay
    assert (
        WorkerResponse(
            message_id="m-1",
            outcome="rejected",
            error="Worker message ID was reused with another payload",
        )
        == reused
    )
    assert (
        WorkerResponse(message_id="m-9", outcome="claimLost", error="Worker epoch is stale")
        == stale_epoch
    )
    assert (stored, events) == (fx.count("worker_messages"), fx.events())
    assert fx.row("worker_messages", worker_epoch="w-1", message_id="m-9") is None

    conflict = fx.worker("store.readRun", {}, message_id="m-2", rev=current - 1)

    assert (
        WorkerResponse(
            message_id="m-2",
            outcome="rejected",
            revision=current,
            error=f"Workflow run revision conflict: expected {current - 1}, got {current}",
        )
        == conflict
    )
    row = fx.row("worker_messages", worker_epoch="w-2", message_id="m-2")
    assert row is not None
    assert ("rejected", current) == (row["outcome"], row["accepted_revision"])
    assert fx.send(fx.message("store.readRun", {}, message_id="m-2", rev=current - 1)) == conflict
    fx.assert_rebuild_equals_live()
    fx.close()
