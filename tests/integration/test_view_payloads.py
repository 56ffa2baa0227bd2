"""The view payloads over the projections (HOST §2.7-§2.10, §2.13-§2.17), as requests."""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests._tamper import editable
    from tests.integration._harness import Fixture, start_run
else:
    from _harness import Fixture, start_run

    from _tamper import editable

RUN_VIEW_MEMBERS = {
    "schema", "runId", "revision", "display", "manifest", "state", "workflow", "queue",
    "updates", "graphSteps", "graphStepStart", "graphStepTotal", "takenTransitions",
    "graphHistory", "takenTransitionStart", "takenTransitionTotal", "graphCursor",
    "stepStart", "stepTotal", "tracePage", "session", "settingsScopes", "settingsStart",
    "settingsTotal", "followUpQueue", "followUpStart", "followUpTotal", "updateStart",
    "updateTotal", "live", "possiblyInterrupted",
}  # fmt: skip
"""Every member of §2.14."""

SESSION_VIEW_MEMBERS = {
    "schema", "sessionId", "run", "pendingInteractions", "pendingInteractionStart",
    "pendingInteractionTotal", "workflowMessages", "workflowMessageStart",
    "workflowMessageTotal", "workflowMessageWindowComplete", "nextWorkflowMessageId",
    "openWorkflowMessageId", "openWorkflowTurn", "coordinatorEpoch", "coordinatorActive",
    "branchReportRequired",
}  # fmt: skip
"""Every member of §2.13."""


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    fixture = Fixture.f(tmp_path / "s.db")
    yield fixture
    fixture.close()


def _accepted(fx: Fixture, op: str, payload: object = None, run_id: str | None = None) -> Any:
    response = fx.request(op, payload, run_id=run_id)
    assert response.outcome == "accepted", response
    return response.receipt


class TestRunList:
    def test_page_members_order_and_revision(self, fx: Fixture) -> None:
        """Newest queue entry first; the revision names count, revisions and times (§2.8)."""
        start_run(fx, "run-2", session="s-2", at=2000)
        page: Any = fx.request("view.runs.page", {"cursor": 0, "revision": "x"}).receipt
        assert page["schema"] == "pi-workflows.run-list-page.v1"
        assert (page["start"], page["total"]) == (0, 2)
        assert [item["runId"] for item in page["items"]] == ["run-2", "run-1"]
        assert re.fullmatch(r"2:\d+:2000:\d+:\d+", page["revision"])
        item = page["items"][1]
        assert set(item) == {
            "runId", "workflowName", "originSessionId", "createdAt", "updatedAt",
            "display", "manifest", "live", "possiblyInterrupted",
        }  # fmt: skip
        assert item["display"]["status"] == "waiting"
        assert item["display"]["controls"] == ["pause", "cancel", "answer"]
        assert item["live"] is True
        queued = page["items"][0]["display"]
        assert (queued["status"], queued["controls"], queued["reason"]) == (
            "queued", ["cancel"], None
        )  # fmt: skip

    def test_same_revision_is_accepted_and_a_changed_list_conflicts(self, fx: Fixture) -> None:
        """§2.7: the same revision answers the page; after a run.start, conflict and a new page."""
        first = fx.request("view.runs.page", {"cursor": 0, "revision": "?"})
        assert first.outcome == "conflict"
        revision = first.receipt["revision"]  # type: ignore[index]
        again = fx.request("view.runs.page", {"cursor": 0, "revision": revision})
        assert again.outcome == "accepted"
        assert again.receipt == first.receipt
        start_run(fx, "run-2", session="s-2", at=2000)
        changed = fx.request("view.runs.page", {"cursor": 0, "revision": revision})
        assert changed.outcome == "conflict"
        assert changed.error == "Workflow run list changed while paging"
        assert changed.receipt["revision"] != revision  # type: ignore[index]
        assert changed.receipt["total"] == 2  # type: ignore[index]

    def test_cursor_and_limit(self, fx: Fixture) -> None:
        for n in range(2, 5):
            start_run(fx, f"run-{n}", session=f"s-{n}", at=1000 + n)
        page = fx.request("view.runs.page", {"cursor": 1, "limit": 2, "revision": "?"}).receipt
        assert [i["runId"] for i in page["items"]] == ["run-3", "run-2"]  # type: ignore[index]
        assert (page["start"], page["total"]) == (1, 4)  # type: ignore[index]

    @pytest.mark.parametrize(
        ("payload", "error"),
        [
            (None, "view.runs.page payload must be an object"),
            ([], "view.runs.page payload must be an object"),
            ({"cursor": 0}, "revision must be text"),
            ({"cursor": 0, "revision": ""}, "revision must be text"),
            ({"revision": "r"}, "cursor must be a non-negative integer"),
            ({"revision": "r", "cursor": -1}, "cursor must be a non-negative integer"),
            ({"revision": "r", "cursor": 1.5}, "cursor must be a non-negative integer"),
            ({"revision": "r", "cursor": 0, "limit": 0}, "limit must be a positive integer"),
        ],
    )
    def test_refusals(self, fx: Fixture, payload: object, error: str) -> None:
        before = fx.events()
        request = fx.request("view.runs.page", payload if payload is not None else "x")
        assert (request.outcome, request.error) == ("rejected", error)
        assert fx.events() == before


class TestRunView:
    def test_every_member_and_the_response_revision(self, fx: Fixture) -> None:
        response = fx.request("view.run.get", None, run_id="run-1")
        assert response.outcome == "accepted"
        view: Any = response.receipt
        assert set(view) == RUN_VIEW_MEMBERS
        assert view["schema"] == "pi-workflows.run-view.v1"
        assert response.revision == view["revision"] == fx.revision()
        assert view["manifest"]["schema"] == "pi-workflows.run-manifest.v1"
        assert view["manifest"]["traceSchema"] == "pi-workflows.trace-event.v1"
        assert view["manifest"]["paths"] == {"state": "host", "trace": "host", "workflow": "host"}
        assert "finishedAt" in view["manifest"]  # a waiting run has finished_at set
        assert (view["stepStart"], view["stepTotal"]) == (0, 1)
        assert view["state"]["steps"][0]["nodeId"] == "ask"
        assert view["tracePage"] == {"items": [], "start": 0, "total": 0}
        assert view["session"] == {
            "binding": None, "capture": None, "entryPage": {"items": [], "start": 0, "total": 0},
            "eventPage": {"items": [], "start": 0, "total": 0}, "integrity": None,
            "replayCheckpoint": None,
        }  # fmt: skip
        assert (view["settingsScopes"], view["graphSteps"], view["takenTransitions"]) == (
            [], [], []
        )  # fmt: skip
        assert view["queue"]["status"] == "parked"
        assert view["live"] is True
        assert view["possiblyInterrupted"] is True

    def test_missing_run(self, fx: Fixture) -> None:
        response = fx.request("view.run.get", None, run_id="nope")
        assert (response.outcome, response.error) == ("notFound", "Workflow run not found")
        missing = fx.request("view.run.get", None)
        assert (missing.outcome, missing.error) == ("rejected", "view.run.get requires runId")

    def test_paused_run_shows_paused(self, fx: Fixture) -> None:
        fx.request("run.pause", None, run_id="run-1")
        view: Any = fx.request("view.run.get", None, run_id="run-1").receipt
        assert view["display"] == {
            "activity": None,
            "controls": ["resume", "cancel"],
            "reason": "The workflow is durably paused.",
            "status": "paused",
        }
        assert view["possiblyInterrupted"] is False


class TestViewPage:
    @pytest.mark.parametrize(
        ("kind", "members"),
        [
            ("steps", {"start", "total", "items", "graphSteps", "graphCursor", "takenTransitions"}),
            ("trace", {"start", "total", "items"}),
            ("trace_at_step", {"start", "total", "items"}),
            ("session_entries", {"start", "total", "items"}),
            ("session_events", {"start", "total", "items", "replayCheckpoint"}),
            ("settings", {"start", "total", "items"}),
            ("follow_ups", {"start", "total", "items"}),
            ("updates", {"start", "total", "items"}),
        ],
    )
    def test_each_kind(self, fx: Fixture, kind: str, members: set[str]) -> None:
        response = fx.request("view.page", {"cursor": 0, "kind": kind}, run_id="run-1")
        assert response.outcome == "accepted"
        page: Any = response.receipt
        common = {"schema", "runId", "revision", "kind", "cursor"}
        assert set(page) == common | members
        assert page["schema"] == "pi-workflows.run-page.v1"
        assert (page["kind"], page["cursor"], page["runId"]) == (kind, 0, "run-1")
        assert page["revision"] == response.revision == fx.revision()

    def test_steps_page_holds_the_attempt(self, fx: Fixture) -> None:
        page: Any = fx.request("view.page", {"cursor": 0, "kind": "steps"}, run_id="run-1").receipt
        assert (page["start"], page["total"], page["graphCursor"]) == (0, 1, 0)
        assert page["items"][0]["attemptId"] == "attempt-1"

    @pytest.mark.parametrize(
        ("payload", "run_id", "outcome", "error"),
        [
            ("x", "run-1", "rejected", "view.page payload must be an object"),
            ({"cursor": 0}, "run-1", "rejected", "kind must be text"),
            ({"cursor": 0, "kind": "graph"}, "run-1", "rejected", "view.page kind is invalid"),
            ({"cursor": 0, "kind": "steps"}, None, "rejected", "view.page requires runId"),
            ({"kind": "steps"}, "run-1", "rejected", "cursor must be a non-negative integer"),
            ({"cursor": 0, "kind": "steps"}, "nope", "notFound", "Workflow run not found"),
        ],
    )
    def test_refusals_in_order(
        self, fx: Fixture, payload: object, run_id: str | None, outcome: str, error: str
    ) -> None:
        response = fx.request("view.page", payload, run_id=run_id)
        assert (response.outcome, response.error) == (outcome, error)


class TestStatusReads:
    @pytest.mark.parametrize("payload", [None, "anything", 5, []])
    def test_channel_status_ignores_the_payload(self, fx: Fixture, payload: object) -> None:
        request = fx.request("channel.status", payload)
        assert request.outcome == "accepted"
        assert request.receipt == {
            "ambiguous": [], "configured": False, "error": None, "profiles": [],
        }  # fmt: skip

    def test_state_status(self, fx: Fixture, tmp_path: Path) -> None:
        receipt: Any = _accepted(fx, "state.status", "ignored")
        assert receipt["sizeBytes"] == (tmp_path / "s.db").stat().st_size
        assert receipt["counts"] == {
            "activeLeases": 0, "controllers": 0, "decisions": 0, "pendingFollowUps": 0,
            "pendingInteractions": 1, "resources": 1, "runs": 1, "settingsScopes": 0,
            "unsettledEffects": 0,
        }  # fmt: skip

    def test_state_verify_on_a_sound_database(self, fx: Fixture) -> None:
        before = fx.events()
        assert _accepted(fx, "state.verify", None) == {"valid": True}
        assert fx.events() == before

    def test_state_verify_names_a_broken_chain(self, fx: Fixture, tmp_path: Path) -> None:
        fx.close()
        db = editable(sqlite3.connect(tmp_path / "s.db"))
        (body,) = db.execute("SELECT body FROM events WHERE seq = 2").fetchone()
        db.execute("UPDATE events SET body = ? WHERE seq = 2", (body.replace(b"run-1", b"run-9"),))
        db.commit()
        db.close()
        fresh = Fixture(tmp_path / "s.db")
        try:
            response = fresh.request("state.verify", None)
        finally:
            fresh.close()
        assert response.outcome == "rejected"
        assert response.error is not None
        assert response.error.startswith("Pi Workflows event chain is broken at seq ")


class TestSessionView:
    """§2.13: the view a session subscription sends, for a coordinator and for a viewer."""

    def _view(self, fx: Fixture, connection: str | None = None) -> Any:
        from pwf.commands import Context  # noqa: PLC0415 - the read context of the fixture's store
        from pwf.views import session_view  # noqa: PLC0415

        ctx = Context(fx.store.reader(), lambda _events: None, fx.now)
        return session_view(ctx, "s-1", connection=connection)

    def test_without_a_coordinator_the_next_message_is_shown(self, fx: Fixture) -> None:
        view = self._view(fx)
        assert set(view) == SESSION_VIEW_MEMBERS
        assert view["schema"] == "pi-workflows.session-view.v1"
        assert view["run"]["runId"] == "run-1"
        assert view["pendingInteractionTotal"] == 1
        assert view["pendingInteractions"][0]["requestId"] == "interaction-run-1-attempt-1"
        assert view["workflowMessageTotal"] == len(view["workflowMessages"]) == 1
        assert view["nextWorkflowMessageId"] == view["workflowMessages"][0]["workflowMessageId"]
        assert (view["coordinatorEpoch"], view["coordinatorActive"]) == (None, False)

    def test_a_coordinator_sees_the_message_only_after_its_branch_report(self, fx: Fixture) -> None:
        watch = {
            "coordinator": True,
            "sessionId": "s-1",
            "subscriptionId": "w",
            "connectionId": "c1",
        }
        epoch = fx.request("view.session.watch", watch).receipt["coordinatorEpoch"]  # type: ignore[index]
        mine = self._view(fx, connection="c1")
        assert (mine["coordinatorEpoch"], mine["coordinatorActive"]) == (epoch, True)
        assert mine["branchReportRequired"] is True
        assert mine["nextWorkflowMessageId"] is None
        other = self._view(fx, connection="c2")
        assert (other["coordinatorEpoch"], other["coordinatorActive"]) == (epoch, False)
        assert other["nextWorkflowMessageId"] is None
        report = {
            "coordinatorEpoch": epoch, "entries": [], "hasPendingMessages": False,
            "isIdle": False, "targetSessionId": "s-1",
        }  # fmt: skip
        assert fx.request("workflowMessage.reportBranch", report).outcome == "accepted"
        reported = self._view(fx, connection="c1")
        assert reported["branchReportRequired"] is False
        assert reported["nextWorkflowMessageId"] is not None
