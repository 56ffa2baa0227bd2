"""Conformance scenarios D: workflow messages and their order (DOMAIN §5.6, §11.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pwf.commands.ids import message_id

if TYPE_CHECKING:
    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import (
        M1,
        REQUEST,
        RUN,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        run_worker,
        start_run,
        turn,
    )
else:
    from _harness import (
        M1,
        REQUEST,
        RUN,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        run_worker,
        start_run,
        turn,
    )

REMINDER_2 = message_id("step", REQUEST, "2:reminder")
RESUMED_2 = "workflow-message-3d314f2a86be8d39cd38f0654cf44c419acf1333e1fd469f4b8bbcd1c1366e59"


def _message(fx: Fixture, workflow_message_id: str) -> dict[str, Any]:
    row = fx.row("workflow_messages", workflow_message_id=workflow_message_id)
    assert row is not None
    return row


def _orders(fx: Fixture, session: str) -> list[tuple[str, str, int, str]]:
    """(run, kind, order, status) of every message of the session, by order."""
    rows = sorted(
        fx.rows("workflow_messages", target_session_id=session),
        key=lambda row: row["order_number"],
    )
    return [(row["run_id"], row["kind"], row["order_number"], row["status"]) for row in rows]


def _notify(fx: Fixture, run_id: str, index: int, *, at: int | None = None) -> str:
    """A progress notification of ``run_id``'s running attempt; its message id."""
    notified = run_worker(
        fx,
        run_id,
        "notification.request",
        {
            "notificationIndex": index,
            "kind": "progress",
            "provenance": {"runId": run_id},
            "text": f"progress {index}",
        },
        attempt=f"attempt-{run_id}",
        at=at,
    )
    assert isinstance(notified.result, dict)
    return str(notified.result["workflowMessageId"])


def _running(fx: Fixture, run_id: str, session: str, *, at: int | None = None) -> None:
    """Start ``run_id`` for ``session`` with a worker and a running attempt."""
    start_run(fx, run_id, session=session, at=at)
    fx.launch(run_id=run_id, at=at)
    run_worker(fx, run_id, "worker.ready", {}, rev=0)
    run_worker(fx, run_id, "node.started", {"nodeId": "work"}, attempt=f"attempt-{run_id}")


def _next(fx: Fixture, epoch: str, *, at: int | None = None) -> object:
    upcoming: Any = fx.host.session_view("s-1", fx.now if at is None else at, epoch)["nextMessage"]
    return None if upcoming is None else upcoming["workflowMessageId"]


def test_d28_order_numbers_are_per_target_session(fx: Fixture) -> None:
    """Orders count per session over every status; a cancellation keeps its number."""
    _running(fx, "run-2", "s-1", at=1100)
    _notify(fx, "run-2", 1, at=1200)
    run_worker(fx, "run-2", "run.park", {"checkpoint": "review"})
    finish_fixture_run(fx, at=1300)
    _running(fx, "run-3", "s-2", at=1400)
    _notify(fx, "run-3", 1, at=1500)

    assert [
        (RUN, "step", 1, "cancelled"),
        ("run-2", "notification", 2, "pending"),
        (RUN, "terminal", 3, "pending"),
    ] == _orders(fx, "s-1")
    assert [("run-3", "notification", 1, "pending")] == _orders(fx, "s-2")
    assert (1, "cancelled") == (_message(fx, M1)["order_number"], _message(fx, M1)["status"])

    _running(fx, "run-4", "s-1", at=1600)
    later = _notify(fx, "run-4", 1, at=1700)

    assert (4, "s-1") == (
        _message(fx, later)["order_number"],
        _message(fx, later)["target_session_id"],
    )
    assert [1] == [order for _, _, order, _ in _orders(fx, "s-2")]
    fx.assert_rebuild_equals_live()


def test_d29_ineligible_messages_do_not_block(fx: Fixture) -> None:
    """A paused run's step is skipped; after resume its re-presented step waits behind N."""
    _running(fx, "run-2", "s-1", at=1100)
    notification = _notify(fx, "run-2", 1, at=1200)
    paused = fx.request("run.pause", None, run_id=RUN, at=1300)
    assert "accepted" == paused.outcome
    epoch = coordinate(fx, at=1400)

    assert (1, 2) == (_message(fx, M1)["order_number"], _message(fx, notification)["order_number"])
    assert notification == _next(fx, epoch, at=1500)

    resumed = fx.request("run.resume", None, run_id=RUN, at=1600)

    assert "accepted" == resumed.outcome
    assert "cancelled" == _message(fx, M1)["status"]
    m3 = _message(fx, RESUMED_2)
    assert ("step", 3, "pending") == (m3["kind"], m3["order_number"], m3["status"])
    assert notification == _next(fx, epoch, at=1700)

    assert "accepted" == branch(fx, epoch, {notification: "e-1"}, at=1800).outcome

    assert "sent" == _message(fx, notification)["status"]
    assert RESUMED_2 == _next(fx, epoch, at=1900)
    fx.assert_rebuild_equals_live()


def test_d30_branch_evidence_beats_cancellation(fx: Fixture) -> None:
    """A cancelled step message that shows up on the branch becomes sent with that entry."""
    epoch = coordinate(fx, at=2000)
    fx.request("run.pause", None, run_id=RUN, at=30000)
    fx.request("run.resume", None, run_id=RUN, at=40000)
    cancelled = _message(fx, M1)
    assert ("cancelled", 40000) == (cancelled["status"], cancelled["updated_at"])

    reported = branch(fx, epoch, {M1: "e-9"}, at=41000)

    assert "accepted" == reported.outcome
    sent = _message(fx, M1)
    assert ("sent", "e-9") == (sent["status"], sent["pi_session_entry_id"])
    fx.assert_rebuild_equals_live()


def test_d31_bad_branch_reports(fx: Fixture) -> None:
    """Duplicates, unknown ids and conflicting entries are refused and change nothing."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    unknown = "workflow-message-" + "0" * 64
    _running(fx, "run-3", "s-2", at=2100)
    elsewhere = _notify(fx, "run-3", 1, at=2200)
    events = fx.events()

    twice = fx.request(
        "workflowMessage.reportBranch",
        {
            "targetSessionId": "s-1",
            "coordinatorEpoch": epoch,
            "entries": [
                {"workflowMessageId": M1, "piSessionEntryId": "e-1"},
                {"workflowMessageId": M1, "piSessionEntryId": "e-1"},
            ],
            "isIdle": False,
            "hasPendingMessages": False,
        },
        at=3100,
    )
    missing = branch(fx, epoch, {unknown: "e-3"}, at=3200)
    foreign = branch(fx, epoch, {elsewhere: "e-4"}, at=3300)
    conflicting = branch(fx, epoch, {M1: "e-2"}, at=3400)

    assert [
        ("rejected", "Workflow branch report has duplicate messages"),
        ("rejected", f"Workflow branch report contains an unknown message: {unknown}"),
        ("rejected", f"Workflow branch report contains an unknown message: {elsewhere}"),
        ("rejected", "Workflow message has conflicting Pi session entry evidence"),
    ] == [(r.outcome, r.error) for r in (twice, missing, foreign, conflicting)]
    assert events == fx.events()
    assert ("sent", "e-1") == (_message(fx, M1)["status"], _message(fx, M1)["pi_session_entry_id"])
    assert "pending" == _message(fx, elsewhere)["status"]
    assert 0 == fx.count("host_commands", operation="workflowMessage.reportBranch")
    fx.assert_rebuild_equals_live()


def _snapshot(fx: Fixture) -> tuple[object, ...]:
    return (
        fx.rows("workflow_turns"),
        fx.rows("workflow_messages"),
        fx.rows("interactive_requests"),
        fx.rows("node_attempts"),
    )


def test_d32_idle_report_proves_a_lost_turn_and_re_presents(fx: Fixture) -> None:
    """An idle branch without M1 ends t-1 lost, counts it, and re-presents the request."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    assert "accepted" == turn(fx, epoch, M1, "t-1", at=5000).outcome
    before = _snapshot(fx)

    busy = branch(fx, epoch, {}, idle=False, pending=False, at=6000)

    assert "accepted" == busy.outcome
    assert before == _snapshot(fx)

    idle = branch(fx, epoch, {}, idle=True, pending=False, at=7000)

    assert "accepted" == idle.outcome
    lost = fx.row("workflow_turns", workflow_turn_id="t-1")
    assert lost is not None
    assert ("ended", "lost", None, 7000) == (
        lost["state"],
        lost["stop_reason"],
        lost["response_session_entry_id"],
        lost["ended_at"],
    )
    request = fx.row("interactive_requests", request_id=REQUEST)
    assert request is not None
    assert (1, 2, "pending") == (
        request["unproductive_turn_ends"],
        request["revision"],
        request["status"],
    )
    assert REMINDER_2.startswith("workflow-message-731ca8c7")
    assert "cancelled" == _message(fx, REMINDER_2)["status"]
    resumed = _message(fx, RESUMED_2)
    assert ("step", "pending", REQUEST) == (
        resumed["kind"],
        resumed["status"],
        resumed["source_id"],
    )
    assert [(M1, "sent"), (REMINDER_2, "cancelled"), (RESUMED_2, "pending")] == [
        (row["workflow_message_id"], row["status"])
        for row in sorted(fx.rows("workflow_messages"), key=lambda row: row["order_number"])
    ]
    fx.assert_rebuild_equals_live()
