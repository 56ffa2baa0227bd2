"""Conformance scenarios C: the interaction lifecycle (SCENARIOS.md C, DOMAIN §5.4, §5.5, §9)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from pwf.cli._options import open_store
from pwf.commands.ids import message_id
from pwf.host import Host
from pwf.protocol.client import ClientRequest, ClientResponse

if TYPE_CHECKING:
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import ATTEMPT, M1, REQUEST, RUN, Fixture
else:
    from _harness import ATTEMPT, M1, REQUEST, RUN, Fixture

M2_RESUMED = message_id("step", REQUEST, "2:resumed")
M3 = "workflow-message-3346315143ce97ffec29073767b298a8b20d19bdecf61bc91c7f534f646adb12"


def _request(fx: Fixture) -> dict[str, Any]:
    row = fx.row("interactive_requests", request_id=REQUEST)
    assert row is not None
    return row


def _messages(fx: Fixture) -> list[tuple[str, str, int, str]]:
    """(id, kind, order, status) of every message of the request, by order."""
    return [
        (row["workflow_message_id"], row["kind"], row["order_number"], row["status"])
        for row in sorted(fx.rows("workflow_messages"), key=lambda row: row["order_number"])
    ]


def _status(fx: Fixture) -> tuple[str, str, str, str]:
    """(attempt status, run status, run detail, queue status)."""
    attempt = fx.row("node_attempts", attempt_id=ATTEMPT)
    run = fx.row("runs", run_id=RUN)
    queue = fx.row("run_queue", run_id=RUN)
    assert attempt is not None
    assert run is not None
    assert queue is not None
    return attempt["status"], run["status"], run["status_detail"], queue["status"]


def _submission(fx: Fixture, submission_id: str = "sub-1") -> dict[str, Any]:
    row = fx.row("interactive_submissions", submission_id=submission_id)
    assert row is not None
    return row


def _validating(fx: Fixture, value: object = None) -> ClientResponse:
    """Submit ``sub-1`` (key ``tool-1``, revision 1); direct mode answers ``unavailable``."""
    response = fx.submit({"reply": "x"} if value is None else value)
    assert ("unavailable", "validating") == (response.outcome, _submission(fx)["outcome"])
    assert response.error is not None
    assert "sub-1" in response.error
    return response


def test_c19_creating_an_interaction(tmp_path: Path) -> None:
    """interaction.request creates the pending request with M1 and parks the run waiting."""
    fx = Fixture.running(tmp_path / "s.db")

    response = fx.request_interaction(at=10000)

    assert ("accepted", {"requestId": REQUEST, "revision": 1, "status": "pending"}) == (
        response.outcome,
        response.result,
    )
    request = _request(fx)
    assert ("agent", 1, "pending", 0, "s-1", 10000) == (
        request["kind"],
        request["revision"],
        request["status"],
        request["unproductive_turn_ends"],
        request["target_session_id"],
        request["created_at"],
    )
    assert [(M1, "step", 1, "pending")] == _messages(fx)
    message = fx.row("workflow_messages", workflow_message_id=M1)
    assert message is not None
    content = fx.blob(message["content_hash"])
    assert (True, "initial", 1) == (
        content["triggerTurn"],
        content["details"]["reason"],
        content["details"]["revision"],
    )
    assert ("waiting", "waiting", "waiting for origin Pi session", "parked") == _status(fx)
    run = fx.row("runs", run_id=RUN)
    assert run is not None
    assert 10000 == run["finished_at"]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_c20_re_requesting(fx: Fixture) -> None:
    """Re-requesting the same interaction adds nothing; another contract conflicts."""
    _validating(fx)  # a validating submission gives the run a worker again
    fx.validate(at=2000)
    before = _request(fx)

    same = fx.request_interaction()

    assert "accepted" == same.outcome
    assert [(M1, "step", 1, "pending")] == _messages(fx)
    assert before == {**_request(fx), "updated_at": before["updated_at"]}

    fx.validate(at=3000)
    events = fx.events("interaction.requested")
    other = fx.request_interaction(contract={"prompt": "Say bye"})

    assert ("rejected", "Interactive request conflicts: interaction-run-1-attempt-1") == (
        other.outcome,
        other.error,
    )
    assert events == fx.events("interaction.requested")
    assert [(M1, "step", 1, "pending")] == _messages(fx)
    fx.assert_rebuild_equals_live()


def test_c21_submission_idempotency(fx: Fixture) -> None:
    """A submission key is idempotent, a second validation is refused, a changed value conflicts."""
    _validating(fx)

    second = fx.submit({"reply": "other"}, key="tool-2", submission="sub-2")
    repeat = fx.submit({"reply": "x"}, key="tool-1")
    changed = fx.submit({"reply": "y"}, key="tool-1")

    assert ("rejected", "Interactive submission validation is already active") == (
        second.outcome,
        second.error,
    )
    assert ("adopted", {"requestId": REQUEST, "submissionId": "sub-1"}) == (
        repeat.outcome,
        repeat.receipt,
    )
    assert ("rejected", "Interactive submission idempotency key conflicts") == (
        changed.outcome,
        changed.error,
    )
    assert [("sub-1", "tool-1", 1, "validating")] == [
        (row["submission_id"], row["idempotency_key"], row["request_revision"], row["outcome"])
        for row in fx.rows("interactive_submissions")
    ]
    assert 0 == fx.count("host_commands", operation="interaction.submit")
    fx.assert_rebuild_equals_live()


def test_c22_stale_expected_revision(fx: Fixture) -> None:
    """A submission naming revision 1 of a request now at revision 2 is refused and not stored."""
    paused = fx.request("run.pause", {}, RUN, at=2000)
    resumed = fx.request("run.resume", {}, RUN, at=3000)
    assert ("accepted", "accepted") == (paused.outcome, resumed.outcome)
    assert (2, "pending") == (_request(fx)["revision"], _request(fx)["status"])
    assert [(M1, "step", 1, "cancelled"), (M2_RESUMED, "step", 2, "pending")] == _messages(fx)

    stale = fx.submit({"reply": "x"}, rev=1)

    assert ("rejected", "Interactive request revision conflict") == (stale.outcome, stale.error)
    assert 0 == fx.count("interactive_submissions")
    fx.assert_rebuild_equals_live()


def test_c23_accepting_a_submission(fx: Fixture) -> None:
    """Acceptance settles the request at revision 2, cancels M1; a second finish keeps it."""
    _validating(fx)
    fx.validate(at=2000)

    accepted = fx.worker("interaction.accept", {})

    assert (
        "accepted",
        {"receipt": {"status": "accepted"}, "submissionId": "sub-1"},
    ) == (accepted.outcome, accepted.result)
    request = _request(fx)
    assert ("settled", 2, "sub-1", 2000, None) == (
        request["status"],
        request["revision"],
        request["accepted_submission_id"],
        request["settled_at"],
        request["consumed_at"],
    )
    assert [(M1, "step", 1, "cancelled")] == _messages(fx)
    submission = _submission(fx)
    assert ("accepted", {"status": "accepted"}) == (
        submission["outcome"],
        fx.blob(submission["receipt_hash"]),
    )

    finished = fx.events("submission.finished")
    again = fx.worker("interaction.accept", {"submissionId": "sub-1"})

    assert (
        "accepted",
        {"receipt": {"status": "accepted"}, "submissionId": "sub-1"},
    ) == (again.outcome, again.result)
    assert finished == fx.events("submission.finished")
    assert (2, "settled") == (_request(fx)["revision"], _request(fx)["status"])

    replay = fx.submit({"reply": "x"})
    assert ("adopted", {"status": "accepted"}) == (replay.outcome, replay.receipt)
    fx.assert_rebuild_equals_live()


def _submit_and_wait(db: Path, responses: list[ClientResponse]) -> None:
    """In a thread with its own connection: submit sub-1 and wait up to 5 s for the verdict."""
    store = open_store(str(db))
    try:
        request = ClientRequest(
            request_id="submit-1",
            client_id="cli-A",
            operation="interaction.submit",
            idempotency_key="tool-1",
            payload={
                "requestId": REQUEST,
                "attempt": ATTEMPT,
                "step": "ask",
                "submissionId": "sub-1",
                "value": {"reply": "x"},
            },
            run_id=RUN,
            expected_revision=1,
        )
        responses.append(Host(store).request(request, 2000, wait_ms=5000))
    finally:
        store.close()


def test_c24_rejecting_a_submission(tmp_path: Path) -> None:
    """A rejected validation leaves the request pending and answers the waiting submit rejected."""
    db = tmp_path / "s.db"
    fx = Fixture.f(db)
    responses: list[ClientResponse] = []
    waiter = threading.Thread(target=_submit_and_wait, args=(db, responses))
    waiter.start()
    deadline = time.monotonic() + 5
    while fx.row("interactive_submissions", submission_id="sub-1") is None:
        assert time.monotonic() < deadline, "the submission was never recorded"
        time.sleep(0.01)
    fx.validate(at=2000)

    rejected = fx.worker("interaction.reject", {"error": "Try again"})
    waiter.join(timeout=10)

    receipt = {"error": "Try again", "status": "rejected"}
    assert ("accepted", {"receipt": receipt, "submissionId": "sub-1"}) == (
        rejected.outcome,
        rejected.result,
    )
    assert [("submit-1", "rejected", "Try again", receipt)] == [
        (response.request_id, response.outcome, response.error, response.receipt)
        for response in responses
    ]
    submission = _submission(fx)
    assert ("rejected", receipt) == (submission["outcome"], fx.blob(submission["receipt_hash"]))
    assert ("pending", 1, None) == (
        _request(fx)["status"],
        _request(fx)["revision"],
        _request(fx)["accepted_submission_id"],
    )
    assert ("waiting", "waiting", "Try again", "parked") == _status(fx)

    # HOST.md §6.3: a retry with the same key and value answers rejected, with the
    # stored receipt and its error; nothing is recorded and no submission is added.
    head = fx.store.head().seq
    retry = fx.submit({"reply": "x"}, key="tool-1", submission="sub-retry")
    assert ("rejected", receipt, "Try again") == (retry.outcome, retry.receipt, retry.error)
    assert 1 == fx.count("interactive_submissions")
    assert 0 == fx.count("host_commands", operation="interaction.submit")
    assert head == fx.store.head().seq
    fx.assert_rebuild_equals_live()
    fx.close()


@pytest.mark.sqlite_only("two fresh databases in one test; on a shared log they are one")
def test_c25_paused_run_blocks_answers(tmp_path: Path) -> None:
    """A paused run refuses interaction.submit and decision.answer with a conflict."""
    fx = Fixture.f(tmp_path / "s.db")
    assert "accepted" == fx.request("run.pause", {}, RUN, at=2000).outcome

    submitted = fx.submit({"reply": "x"})
    agent_answer = fx.request(
        "decision.answer",
        {"requestId": REQUEST, "response": {"ok": True}, "submissionId": "d-sub-0"},
        rev=1,
    )

    assert ("conflict", "Workflow run is paused") == (submitted.outcome, submitted.error)
    assert ("notFound", f"Decision request not found: {REQUEST}") == (
        agent_answer.outcome,
        agent_answer.error,
    )
    assert 0 == fx.count("interactive_submissions")
    fx.assert_rebuild_equals_live()
    fx.close()

    fx = Fixture.running(tmp_path / "d.db")
    fx.ok(
        "store.createHumanDecisionRequest",
        {"decisionId": "decision-abc", "contract": {"prompt": "Ship it?"}},
        attempt=ATTEMPT,
    )
    assert "accepted" == fx.request("run.pause", {}, RUN, at=2000).outcome

    answered = fx.request(
        "decision.answer",
        {"requestId": "decision-abc", "response": {"ok": True}, "submissionId": "d-sub-1"},
        rid="d-1",
        rev=1,
    )

    assert ("conflict", "Workflow run is paused") == (answered.outcome, answered.error)
    stored = fx.row("host_commands", request_id="d-1")
    assert stored is not None
    assert "conflict" == stored["outcome"]
    assert 0 == fx.count("interactive_submissions")
    fx.assert_rebuild_equals_live()
    fx.close()


def test_c26_stale_attempt(fx: Fixture) -> None:
    """A submission naming another attempt is a conflict and records nothing."""
    stale = fx.submit({"reply": "x"}, attempt="attempt-0")

    assert ("conflict", "Interactive request attempt is stale") == (stale.outcome, stale.error)
    assert 0 == fx.count("interactive_submissions")
    fx.assert_rebuild_equals_live()


def test_c27_reopening_a_settled_unconsumed_request(fx: Fixture) -> None:
    """Re-requesting a settled unconsumed request reopens it at revision 3; a consumed one stays."""
    _validating(fx)
    fx.validate(at=2000)
    fx.ok("interaction.accept", {})
    assert (2, "settled") == (_request(fx)["revision"], _request(fx)["status"])

    reopened = fx.request_interaction(at=3000)

    assert ("accepted", {"requestId": REQUEST, "revision": 3, "status": "pending"}) == (
        reopened.outcome,
        reopened.result,
    )
    request = _request(fx)
    assert ("pending", 3, None, None, None) == (
        request["status"],
        request["revision"],
        request["accepted_submission_id"],
        request["settled_at"],
        request["consumed_at"],
    )
    assert [(M1, "step", 1, "cancelled"), (M3, "step", 2, "pending")] == _messages(fx)
    message = fx.row("workflow_messages", workflow_message_id=M3)
    assert message is not None
    assert ("resumed", 3) == (
        fx.blob(message["content_hash"])["details"]["reason"],
        fx.blob(message["content_hash"])["details"]["revision"],
    )

    fx.submit({"reply": "z"}, key="tool-2", submission="sub-2", rev=3, at=4000)
    fx.validate(at=4000)
    fx.ok("interaction.accept", {})
    fx.ok("node.finished", {"output": {"reply": "z"}}, attempt=ATTEMPT)
    consumed = _request(fx)
    assert ("settled", 4, 4000) == (
        consumed["status"],
        consumed["revision"],
        consumed["consumed_at"],
    )
    messages = _messages(fx)

    fx.request_interaction(at=5000)

    assert consumed == _request(fx)
    assert messages == _messages(fx)
    fx.assert_rebuild_equals_live()
