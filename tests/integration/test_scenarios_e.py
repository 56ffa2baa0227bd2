"""Conformance scenarios E: model turns (SCENARIOS.md E and the turn/branch parts of J61).

DOMAIN §5.7, §9.6, §11.2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf.commands.ids import message_id, terminal_source_id

if TYPE_CHECKING:
    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import (
        ATTEMPT,
        M1,
        REQUEST,
        RUN,
        Fixture,
        branch,
        coordinate,
        run_worker,
        start_run,
        turn,
    )
else:
    from _harness import (
        ATTEMPT,
        M1,
        REQUEST,
        RUN,
        Fixture,
        branch,
        coordinate,
        run_worker,
        start_run,
        turn,
    )

M2 = message_id("step", REQUEST, "2:reminder")
M3_REMINDER = message_id("step", REQUEST, "3:reminder")
UNPRODUCTIVE = "Workflow step ended three times without a valid submission"


def _clock(fx: Fixture) -> tuple[int, int]:
    """(started_at, deadline_at) of the fixture's attempt."""
    attempt = fx.existing("node_attempts", attempt_id=ATTEMPT)
    return attempt["started_at"], attempt["deadline_at"]


def _counters(fx: Fixture) -> tuple[int, int, str]:
    """(unproductive count, revision, status) of the fixture's request."""
    request = fx.existing("interactive_requests", request_id=REQUEST)
    return request["unproductive_turn_ends"], request["revision"], request["status"]


def test_e33_a_manual_turn_binds_to_the_open_step_and_supersedes_reminders(fx: Fixture) -> None:
    """t-2 starts on M1, cancels the pending reminder and credits 6 s; a repeat adds nothing."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=5000)
    turn(fx, epoch, M1, "t-1", stop="completed", response="e-7", at=20000)
    assert "pending" == fx.existing("workflow_messages", workflow_message_id=M2)["status"]
    assert 65000 == fx.existing("node_attempts", attempt_id=ATTEMPT)["deadline_at"]

    started = turn(fx, epoch, M1, "t-2", at=26000)

    assert "accepted" == started.outcome
    assert isinstance(started.receipt, dict)
    assert ("t-2", "started", 26000) == (
        started.receipt["workflowTurnId"],
        started.receipt["state"],
        started.receipt["startedAt"],
    )
    assert "cancelled" == fx.existing("workflow_messages", workflow_message_id=M2)["status"]
    assert 71000 == fx.existing("node_attempts", attempt_id=ATTEMPT)["deadline_at"]
    events = fx.events()

    again = turn(fx, epoch, M1, "t-2", at=27000)

    assert ("accepted", started.receipt) == (again.outcome, again.receipt)
    assert events == fx.events()
    assert 2 == fx.count("workflow_turns")
    assert 71000 == fx.existing("node_attempts", attempt_id=ATTEMPT)["deadline_at"]
    fx.assert_rebuild_equals_live()


def test_e34_only_the_open_message_can_start_a_turn(fx: Fixture) -> None:
    """A newer sent decision message never opens a turn; the step M1 stays the open message."""
    start_run(fx, "run-2", at=1100)
    fx.launch(run_id="run-2", at=1100)
    run_worker(fx, "run-2", "worker.ready", {}, rev=0)
    run_worker(fx, "run-2", "node.started", {"nodeId": "decide"}, attempt="attempt-run-2")
    run_worker(
        fx,
        "run-2",
        "store.createHumanDecisionRequest",
        {"decisionId": "decision-d", "contract": {"prompt": "Ship it?", "options": ["yes"]}},
        attempt="attempt-run-2",
    )
    decision = fx.existing("workflow_messages", source_id="decision-d")["workflow_message_id"]
    epoch = coordinate(fx, {M1: "e-1", decision: "e-2"}, at=2000)
    assert fx.existing("workflow_messages", workflow_message_id=decision)["order_number"] > 1

    refused = turn(fx, epoch, decision, "t-d", run_id="run-2", at=3000)

    assert ("rejected", "Workflow turn start does not match the open workflow message") == (
        refused.outcome,
        refused.error,
    )
    assert 0 == fx.count("workflow_turns")
    assert "accepted" == turn(fx, epoch, M1, "t-1", at=4000).outcome
    fx.assert_rebuild_equals_live()


def test_e35_no_new_turns_on_a_paused_run(fx: Fixture) -> None:
    """A start report for a new turn id on a paused run is refused."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    assert "accepted" == fx.request("run.pause", None, run_id=RUN, at=3000).outcome

    refused = turn(fx, epoch, M1, "t-1", at=4000)

    assert ("rejected", "A paused workflow cannot start a model turn") == (
        refused.outcome,
        refused.error,
    )
    assert 0 == fx.count("workflow_turns")
    fx.assert_rebuild_equals_live()


def test_e36_three_unproductive_ends_fail_the_run(fx: Fixture) -> None:
    """Each unproductive end counts and reminds; the third cancels the request and fails the run.

    Fixture F's attempt starts at 1 000 with deadline 61 000.  Each turn start
    credits the wait since the latest ended step turn of the request, else since
    the attempt start (DOMAIN §10.2): 3 000 - 1 000, 6 000 - 4 000 and
    9 000 - 7 000, 2 000 ms each.
    """
    assert (1000, 61000) == _clock(fx)
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=3000)
    assert (3000, 63000) == _clock(fx)
    turn(fx, epoch, M1, "t-1", stop="completed", response="e-2", at=4000)
    assert (1, 2, "pending") == _counters(fx)
    assert "pending" == fx.existing("workflow_messages", workflow_message_id=M2)["status"]

    branch(fx, epoch, {M1: "e-1", M2: "e-3"}, at=5000)
    turn(fx, epoch, M2, "t-2", at=6000)
    assert (5000, 65000) == _clock(fx)
    turn(fx, epoch, M2, "t-2", stop="error", at=7000)
    assert (2, 3, "pending") == _counters(fx)
    assert M3_REMINDER.startswith("workflow-message-6217f211")
    assert "pending" == fx.existing("workflow_messages", workflow_message_id=M3_REMINDER)["status"]

    branch(fx, epoch, {M1: "e-1", M2: "e-3", M3_REMINDER: "e-4"}, at=8000)
    turn(fx, epoch, M3_REMINDER, "t-3", at=9000)
    # From the latest end (7 000), not the earliest (4 000, which would give 70 000).
    assert (7000, 67000) == _clock(fx)
    ended = turn(fx, epoch, M3_REMINDER, "t-3", stop="completed", response="e-5", at=10000)

    assert "accepted" == ended.outcome
    assert (3, 5, "cancelled") == _counters(fx)
    run = fx.existing("runs", run_id=RUN)
    assert ("failed", "unproductiveTurns") == (run["status"], run["error_code"])
    assert UNPRODUCTIVE == fx.blob(run["error_hash"])
    terminal = fx.rows("workflow_messages", source_id=terminal_source_id(RUN))
    assert [("terminal", "pending", "s-1")] == [
        (row["kind"], row["status"], row["target_session_id"]) for row in terminal
    ]
    details = fx.blob(terminal[0]["content_hash"])["details"]["terminal"]
    assert ("failed", UNPRODUCTIVE) == (details["status"], details["error"])
    assert [] == fx.rows("workflow_messages", source_id=REQUEST, status="pending")
    fx.assert_rebuild_equals_live()


def test_e37_an_aborted_turn_pauses(fx: Fixture) -> None:
    """Ending t-1 aborted pauses the parked run at 25 000 without counting or reminding."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=5000)
    queue = fx.existing("run_queue", run_id=RUN)
    assert ("parked", None) == (queue["status"], queue["owner_worker_epoch"])

    ended = turn(fx, epoch, M1, "t-1", stop="aborted", at=25000)

    assert "accepted" == ended.outcome
    run = fx.existing("runs", run_id=RUN)
    assert (1, "paused", 25000, "waiting") == (
        run["paused"],
        run["status_detail"],
        run["updated_at"],
        run["status"],
    )
    assert [] == fx.rows("workflow_messages", source_id=REQUEST, kind="step", status="pending")
    assert [M1] == [row["workflow_message_id"] for row in fx.rows("workflow_messages")]
    assert (0, 1, "pending") == _counters(fx)
    fx.assert_rebuild_equals_live()


def test_e38_end_reports_are_idempotent(fx: Fixture) -> None:
    """The same end returns the saved turn; another stop reason conflicts."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=5000)
    first = turn(fx, epoch, M1, "t-1", stop="completed", response="e-7", at=20000)
    counters = _counters(fx)
    events = fx.events()

    same = turn(fx, epoch, M1, "t-1", stop="completed", response="e-7", at=21000)
    other = turn(fx, epoch, M1, "t-1", stop="error", response="e-7", at=22000)

    assert ("accepted", first.receipt) == (same.outcome, same.receipt)
    assert isinstance(same.receipt, dict)
    assert {
        "workflowTurnId": "t-1",
        "workflowMessageId": M1,
        "runId": "run-1",
        "targetSessionId": "s-1",
        "state": "ended",
        "startedAt": 5000,
        "endedAt": 20000,
        "stopReason": "completed",
        "responseSessionEntryId": "e-7",
    } == same.receipt
    assert ("rejected", "Workflow turn end report conflicts with its saved result") == (
        other.outcome,
        other.error,
    )
    assert (counters, events) == (_counters(fx), fx.events())
    assert (1, 2, "pending") == counters
    fx.assert_rebuild_equals_live()


def test_e39_no_counting_during_validation(fx: Fixture) -> None:
    """A turn ending while a submission validates neither counts nor reminds."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=5000)
    fx.submit({"reply": "x"}, at=6000)
    assert "validating" == fx.existing("interactive_submissions", submission_id="sub-1")["outcome"]

    ended = turn(fx, epoch, M1, "t-1", stop="completed", response="e-7", at=7000)

    assert "accepted" == ended.outcome
    assert (0, 1, "pending") == _counters(fx)
    assert [M1] == [row["workflow_message_id"] for row in fx.rows("workflow_messages")]
    fx.assert_rebuild_equals_live()


def test_j61_malformed_turn_and_branch_reports(fx: Fixture) -> None:
    """Bad stop reasons, states, response entries and entry lists are refused; nothing is kept."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=3000)
    base = {
        "targetSessionId": "s-1",
        "coordinatorEpoch": epoch,
        "workflowMessageId": M1,
        "workflowTurnId": "t-1",
        "runId": RUN,
    }
    ended = {**base, "state": "ended", "stopReason": "completed", "responseSessionEntryId": "e-2"}
    events = fx.events()
    recorded = fx.count("host_commands")

    answers = [
        fx.request("workflowTurn.report", {**ended, "stopReason": "timeout"}, at=4000),
        fx.request("workflowTurn.report", {**base, "state": "paused"}, at=4000),
        fx.request("workflowTurn.report", {**ended, "responseSessionEntryId": 5}, at=4000),
        fx.request(
            "workflowMessage.reportBranch",
            {
                "targetSessionId": "s-1",
                "coordinatorEpoch": epoch,
                "entries": {},
                "isIdle": False,
                "hasPendingMessages": False,
            },
            at=4000,
        ),
    ]

    assert [
        ("rejected", "Workflow turn stopReason is invalid"),
        ("rejected", "Workflow turn state must be started or ended"),
        ("rejected", "Workflow turn responseSessionEntryId must be text or null"),
        ("rejected", "Workflow branch entries must be an array"),
    ] == [(answer.outcome, answer.error) for answer in answers]
    assert events == fx.events()
    assert recorded == fx.count("host_commands")
    assert "started" == fx.existing("workflow_turns", workflow_turn_id="t-1")["state"]
    fx.assert_rebuild_equals_live()
