"""A replaced coordinator is fenced by its connection, not only its epoch (DOMAIN §5.13).

Two real connections to an in-process host with a fixed clock: C1 attaches
as the coordinator of s-1 and reports its branch, C2 takes over.  Every
session watcher is shown the live epoch, so C1 can name C2's epoch; the
original's ``requireSessionCoordinator`` still refuses it, because the
coordinator is C2's connection.  Direct mode has no connection: there the
epoch alone is checked (ADR 0072).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._harness import ATTEMPT, NODE, SESSION, Fixture, branch, turn, watch
    from tests.integration._hosted import AT, Hosted
    from tests.integration._served import line, rows, short_dir

    from pwf.client import HostClient
else:
    from _harness import ATTEMPT, NODE, SESSION, Fixture, branch, turn, watch
    from _hosted import AT, Hosted
    from _served import line, rows, short_dir

pytestmark = pytest.mark.slow

REPLACED: Final = "Workflow session coordinator was replaced"
SESSION_COMMANDS: Final = (
    "followUp.queue",
    "followUp.remove",
    "sessionView.clearTerminal",
    "run.restart",
)
"""The executed commands that require the session's coordinator (beside the two reports)."""
_FLUSHES: Final = itertools.count(1)


@pytest.fixture
def fx() -> Iterator[Fixture]:
    """run-1 (origin s-1) parked on its interaction, built at the hosts' fixed clock."""
    with short_dir() as directory:
        fixture = Fixture(directory / "state.db")
        fixture.start(at=AT)
        fixture.launch(at=AT)
        fixture.ready(at=AT)
        fixture.ok("node.started", {"nodeId": NODE, "timeoutMs": 600_000}, attempt=ATTEMPT)
        fixture.request_interaction(at=AT)
        yield fixture
        fixture.close()


def _step(db: Path) -> str:
    [(message,)] = rows(db, "SELECT workflow_message_id FROM workflow_messages WHERE kind = 'step'")
    return str(message)


def _count(db: Path) -> int:
    [(count,)] = rows(db, "SELECT count(*) FROM events")
    return int(count)


def _watch(client: HostClient, subscription: str) -> str:
    """``view.session.watch`` as s-1's coordinator on ``client``; the epoch it answers."""
    payload = {"subscriptionId": subscription, "sessionId": SESSION, "coordinator": True}
    watched = client.request(line("view.session.watch", payload, rid=f"watch-{subscription}"))
    assert "accepted" == watched["outcome"], watched
    return str(watched["receipt"]["coordinatorEpoch"])  # type: ignore[index]


def _report_branch(client: HostClient, epoch: str, rid: str, step: str) -> dict[str, Any]:
    entries = [{"workflowMessageId": step, "piSessionEntryId": "entry-1"}]
    payload = {
        "targetSessionId": SESSION,
        "coordinatorEpoch": epoch,
        "entries": entries,
        "isIdle": False,
        "hasPendingMessages": False,
    }
    return client.request(line("workflowMessage.reportBranch", payload, rid=rid))


def _start_turn(client: HostClient, epoch: str, rid: str, step: str) -> dict[str, Any]:
    payload = {
        "targetSessionId": SESSION,
        "coordinatorEpoch": epoch,
        "workflowMessageId": step,
        "workflowTurnId": f"turn-{rid}",
        "runId": "run-1",
        "state": "started",
    }
    return client.request(line("workflowTurn.report", payload, rid=rid))


def _session_command(client: HostClient, operation: str, epoch: str, rid: str) -> dict[str, Any]:
    """``operation`` for s-1 at ``epoch``, with members each command would read next."""
    payload: dict[str, object] = {"targetSessionId": SESSION, "coordinatorEpoch": epoch}
    extra = {
        "followUp.queue": {"prompt": "and then?"},
        "followUp.remove": {"followUpId": "follow-up-missing"},
        "run.restart": {"workflowMessageId": "message-missing"},
    }
    payload.update(extra.get(operation, {}))
    run_id = None if operation == "sessionView.clearTerminal" else "run-1"
    return client.request(line(operation, payload, rid=rid, run_id=run_id))


def _latest_snapshot(client: HostClient, subscription: str) -> dict[str, Any]:
    """The last session snapshot ``client`` was sent for ``subscription``, after one more answer.

    The host publishes a connection's subscriptions after each of its
    answers (HOST §1.14), so ``host.status`` flushes any change first.
    """
    client.request(line("host.status", rid=f"flush-{next(_FLUSHES)}"))
    latest: dict[str, Any] | None = None
    for event in client.events(timeout=1.0):
        if event.get("subscriptionId") == subscription and event["event"] == "session_snapshot":
            latest = event
    assert latest is not None, "no session snapshot was sent"
    payload = latest["payload"]
    assert isinstance(payload, dict)
    return payload


def _refused(answer: dict[str, Any]) -> tuple[object, object]:
    return answer["outcome"], answer.get("error")


class TestServed:
    """C1 names C2's live epoch on C1's connection: refused, and nothing is written."""

    def test_reports_and_session_commands_on_the_fenced_connection_are_refused(
        self, fx: Fixture
    ) -> None:
        db = fx.store.projections_file.path
        step = _step(db)
        hosted = Hosted(db)
        try:
            with hosted.client() as first, hosted.client() as second:
                old = _watch(first, "sub-1")
                assert "accepted" == _report_branch(first, old, "branch-1", step)["outcome"]
                new = _watch(second, "sub-2")
                assert old != new
                before = _count(db)
                assert (
                    "rejected",
                    REPLACED,
                ) == _refused(_report_branch(first, new, "branch-stolen", step))
                assert ("rejected", REPLACED) == _refused(
                    _start_turn(first, new, "turn-stolen", step)
                )
                for number, operation in enumerate(SESSION_COMMANDS):
                    answer = _session_command(first, operation, new, f"stolen-{number}")
                    assert ("rejected", REPLACED) == _refused(answer), operation
                assert before == _count(db)
                assert [(0,)] == rows(db, "SELECT branch_reported FROM session_coordinators")
                view = _latest_snapshot(second, "sub-2")
                assert (view["coordinatorEpoch"], view["coordinatorActive"]) == (new, True)
                assert view["branchReportRequired"] is True
        finally:
            hosted.close()
        fx.assert_rebuild_equals_live()

    def test_the_new_coordinator_reports_on_its_own_connection(self, fx: Fixture) -> None:
        """C2's own reports are accepted; C1 stays fenced after C2 reported, too."""
        db = fx.store.projections_file.path
        step = _step(db)
        hosted = Hosted(db)
        try:
            with hosted.client() as first, hosted.client() as second:
                old = _watch(first, "sub-1")
                assert "accepted" == _report_branch(first, old, "branch-1", step)["outcome"]
                new = _watch(second, "sub-2")
                reported = _report_branch(second, new, "branch-2", step)
                assert ("accepted", {"coordinatorEpoch": new, "recorded": True}) == (
                    reported["outcome"],
                    reported["receipt"],
                )
                view = _latest_snapshot(second, "sub-2")
                assert (view["coordinatorActive"], view["branchReportRequired"]) == (True, False)
                started = _start_turn(second, new, "turn-2", step)
                assert ("accepted", "started") == (started["outcome"], started["receipt"]["state"])
                cleared = _session_command(second, "sessionView.clearTerminal", new, "clear-2")
                assert ("adopted", {"cleared": False}) == (cleared["outcome"], cleared["receipt"])
                before = _count(db)
                for number, operation in enumerate(SESSION_COMMANDS):
                    answer = _session_command(first, operation, new, f"late-{number}")
                    assert ("rejected", REPLACED) == _refused(answer), operation
                ended = {
                    "targetSessionId": SESSION,
                    "coordinatorEpoch": new,
                    "workflowMessageId": step,
                    "workflowTurnId": "turn-turn-2",
                    "runId": "run-1",
                    "state": "ended",
                    "stopReason": "completed",
                    "responseSessionEntryId": None,
                }
                answer = first.request(line("workflowTurn.report", ended, rid="end-stolen"))
                assert ("rejected", REPLACED) == _refused(answer)
                assert before == _count(db)
                assert [("started",)] == rows(db, "SELECT state FROM workflow_turns")
                ended_on_second = second.request(line("workflowTurn.report", ended, rid="end-2"))
                assert "accepted" == ended_on_second["outcome"], ended_on_second
        finally:
            hosted.close()
        fx.assert_rebuild_equals_live()


class TestDirect:
    """Direct mode has no connection: the epoch is the whole credential (ADR 0014 D6, ADR 0072)."""

    def test_the_live_epoch_is_accepted_from_any_client(self, fx: Fixture) -> None:
        old = watch(fx, connection="C1", at=AT)
        new = watch(fx, connection="C2", at=AT)
        stale = branch(fx, old, at=AT)
        assert ("rejected", REPLACED) == (stale.outcome, stale.error)
        live = branch(fx, new, {_step(fx.store.projections_file.path): "entry-1"}, at=AT)
        assert "accepted" == live.outcome, live
        started = turn(fx, new, _step(fx.store.projections_file.path), "turn-1", at=AT)
        assert "accepted" == started.outcome, started
        fx.assert_rebuild_equals_live()
