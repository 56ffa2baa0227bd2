"""Conformance scenarios I: follow-ups and terminal views (SCENARIOS.md I, DOMAIN §5.8, §5.9)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pwf.commands.ids import session_request_id

if TYPE_CHECKING:
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import (
        ATTEMPT,
        CLIENT,
        RUN,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        terminal_message,
        text_blob,
        turn,
    )

    from pwf.protocol.client import ClientResponse
else:
    from _harness import (
        ATTEMPT,
        CLIENT,
        RUN,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        terminal_message,
        text_blob,
        turn,
    )

FOLLOW_UP_REQUEST = "session-70f7519c3c2b160b041d21ef1ba353d418a9267dd1cf5608553ebed5c3e3fec7"
PROMPT = "Write the changelog"


def _run_9(db: Path) -> Fixture:
    """Fixture F's shape for ``run-9``: waiting on an agent request, origin ``s-1``."""
    fx = Fixture(db, run_id="run-9")
    fx.start(at=1000)
    fx.launch(at=1000)
    fx.ready()
    fx.ok("node.started", {"nodeId": "ask", "timeoutMs": 60000}, attempt=ATTEMPT)
    fx.request_interaction(at=1000)
    assert "waiting" == fx.existing("runs", run_id="run-9")["status"]
    return fx


def _queue(  # noqa: PLR0913 - one keyword per request member a scenario pins
    fx: Fixture, epoch: str, prompt: object, *, key: str, rid: str | None = None, at: int = 3000
) -> ClientResponse:
    payload = {"targetSessionId": "s-1", "coordinatorEpoch": epoch, "prompt": prompt}
    return fx.request("followUp.queue", payload, run_id="run-9", key=key, rid=rid, at=at)


def _remove(fx: Fixture, epoch: str, follow_up: str, *, key: str, at: int) -> ClientResponse:
    payload = {"targetSessionId": "s-1", "coordinatorEpoch": epoch, "followUpId": follow_up}
    return fx.request("followUp.remove", payload, run_id="run-9", key=key, rid=key, at=at)


def _answer(response: ClientResponse) -> tuple[object, object]:
    return response.outcome, response.error


def test_i58_queueing_follow_ups(tmp_path: Path) -> None:
    """The first queue is accepted, its replay adopted; bad prompts and a finished run refuse."""
    fx = _run_9(tmp_path / "s.db")
    epoch = coordinate(fx, at=2000)

    queued = _queue(fx, epoch, PROMPT, key="fu-1", rid="q-1")

    assert "accepted" == queued.outcome
    assert isinstance(queued.receipt, dict)
    follow_up = queued.receipt["followUpId"]
    assert {"followUpId": follow_up, "order": 1, "runId": "run-9", "state": "queued"} == (
        queued.receipt
    )
    assert FOLLOW_UP_REQUEST == session_request_id(CLIENT, "fu-1")
    row = fx.existing("workflow_follow_ups", follow_up_id=follow_up)
    assert (FOLLOW_UP_REQUEST, "queued", 1, PROMPT) == (
        row["request_id"],
        row["status"],
        row["order_number"],
        text_blob(fx, row["prompt_hash"]),
    )
    assert [("followUp", "pending")] == [
        (message["kind"], message["status"])
        for message in fx.rows("workflow_messages", source_id=follow_up)
    ]

    replay = _queue(fx, epoch, PROMPT, key="fu-1", rid="q-2", at=3100)

    assert ("adopted", queued.receipt) == (replay.outcome, replay.receipt)
    assert 1 == fx.count("workflow_follow_ups")

    too_long = _queue(fx, epoch, "x" * 65537, key="fu-2", at=3200)
    blank = _queue(fx, epoch, "   ", key="fu-3", at=3300)
    submission = {
        "requestId": "interaction-run-9-attempt-1",
        "attempt": ATTEMPT,
        "step": "ask",
        "submissionId": "sub-1",
        "value": {"reply": "x"},
    }
    fx.request("interaction.submit", submission, run_id="run-9", key="tool-1", rev=1, at=4000)
    fx.validate(at=4000)
    fx.ok("interaction.accept", {})
    fx.ok("node.finished", {"output": {"reply": "x"}}, attempt=ATTEMPT)
    fx.ok("run.finished", {"status": "completed", "finalOutput": {"reply": "x"}})
    assert "completed" == fx.existing("runs", run_id="run-9")["status"]
    late = _queue(fx, epoch, "Now the release notes", key="fu-4", at=5000)

    assert [
        ("rejected", "Workflow follow-up prompt cannot exceed 65536 bytes"),
        ("rejected", "Workflow follow-up prompt must be a non-empty string"),
        ("rejected", "Workflow run run-9 does not accept changes with status completed"),
    ] == [_answer(response) for response in (too_long, blank, late)]
    assert 1 == fx.count("workflow_follow_ups")
    fx.assert_rebuild_equals_live()
    fx.close()


def test_i59_removing_follow_ups(tmp_path: Path) -> None:
    """A sent follow-up stays; a pending one is removed once, and removing it again repeats."""
    fx = _run_9(tmp_path / "s.db")
    epoch = coordinate(fx, at=2000)
    first = _queue(fx, epoch, "First", key="fu-1")
    second = _queue(fx, epoch, "Second", key="fu-2", at=3100)
    assert isinstance(first.receipt, dict)
    assert isinstance(second.receipt, dict)
    f1, f2 = str(first.receipt["followUpId"]), str(second.receipt["followUpId"])
    m1 = fx.existing("workflow_messages", source_id=f1)["workflow_message_id"]
    m2 = fx.existing("workflow_messages", source_id=f2)["workflow_message_id"]
    assert "accepted" == branch(fx, epoch, {m1: "e-1"}, at=3500).outcome

    sent = _remove(fx, epoch, f1, key="rm-1", at=4000)
    removed = _remove(fx, epoch, f2, key="rm-2", at=4100)
    again = _remove(fx, epoch, f2, key="rm-3", at=4200)

    assert ("rejected", "A sent workflow follow-up cannot be removed") == _answer(sent)
    assert fx.row("host_commands", request_id="rm-1") is None
    assert "queued" == fx.existing("workflow_follow_ups", follow_up_id=f1)["status"]
    assert ("accepted", {"followUpId": f2, "runId": "run-9", "state": "removed"}) == (
        removed.outcome,
        removed.receipt,
    )
    row = fx.existing("workflow_follow_ups", follow_up_id=f2)
    assert ("removed", "Removed before delivery") == (
        row["status"],
        text_blob(fx, row["reason_hash"]),
    )
    assert "cancelled" == fx.existing("workflow_messages", workflow_message_id=m2)["status"]
    assert ("accepted", removed.receipt) == (again.outcome, again.receipt)
    assert ["accepted", "accepted"] == [
        fx.existing("host_commands", request_id=key)["outcome"] for key in ("rm-2", "rm-3")
    ]
    fx.assert_rebuild_equals_live()
    fx.close()


def _retained(db: Path) -> tuple[Fixture, str]:
    """F with ``run-1`` completed and its terminal sent and read by a turn ending at 100 000."""
    fx = Fixture.f(db)
    epoch = coordinate(fx, at=2000)
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    terminal = terminal_message(fx)
    assert "accepted" == branch(fx, epoch, {terminal: "e-t"}, at=4000).outcome
    assert "accepted" == turn(fx, epoch, terminal, "t-1", at=90000).outcome
    ended = turn(fx, epoch, terminal, "t-1", stop="completed", response="e-r", at=100000)
    assert "accepted" == ended.outcome
    queue = fx.existing("run_queue", run_id=RUN)
    assert ("completed", "done") == (fx.existing("runs", run_id=RUN)["status"], queue["status"])
    return fx, epoch


def _shown(fx: Fixture, epoch: str, at: int) -> object:
    """The run id the session view of ``s-1`` shows at ``at``, or None."""
    run: Any = fx.host.session_view("s-1", at, epoch)["run"]
    return None if run is None else run["runId"]


def _clear(fx: Fixture, epoch: str, *, key: str, at: int, run_id: str | None = None) -> Any:
    payload = {"targetSessionId": "s-1", "coordinatorEpoch": epoch}
    return fx.request("sessionView.clearTerminal", payload, run_id=run_id, key=key, at=at)


def test_i60_a_read_terminal_is_retained_for_a_minute(tmp_path: Path) -> None:
    """The completed run-1 is shown until 60 000 ms after its terminal turn ended."""
    fx, epoch = _retained(tmp_path / "s.db")

    assert (RUN, None) == (_shown(fx, epoch, 159999), _shown(fx, epoch, 160000))
    fx.assert_rebuild_equals_live()
    fx.close()


def test_i60_clearing_the_terminal_view(tmp_path: Path) -> None:
    """The first clear removes run-1 from the view; a second finds nothing to clear."""
    fx, epoch = _retained(tmp_path / "s.db")

    first = _clear(fx, epoch, key="clear-1", at=130000)
    shown = _shown(fx, epoch, 130500)
    second = _clear(fx, epoch, key="clear-2", at=131000)

    assert ("accepted", {"cleared": True, "runId": RUN}) == (first.outcome, first.receipt)
    assert shown is None
    assert ("adopted", {"cleared": False}) == (second.outcome, second.receipt)
    view = fx.existing("session_terminal_views", target_session_id="s-1")
    assert (RUN, 130000) == (view["cleared_run_id"], view["cleared_at"])
    fx.assert_rebuild_equals_live()
    fx.close()


def test_i60_clearing_another_run_is_refused(tmp_path: Path) -> None:
    """A clear naming run-2 does not match the retained run-1 and clears nothing."""
    fx, epoch = _retained(tmp_path / "s.db")

    refused = _clear(fx, epoch, key="clear-1", at=130000, run_id="run-2")

    assert ("rejected", "Retained terminal workflow does not match run run-2") == (
        refused.outcome,
        refused.error,
    )
    assert 0 == fx.count("session_terminal_views")
    assert RUN == _shown(fx, epoch, 130500)
    fx.assert_rebuild_equals_live()
    fx.close()


def test_i58_the_run_view_shows_a_queued_follow_up_prompt(tmp_path: Path) -> None:
    """The follow-up queue of the run view shows the prompt as text; a long one as a text artifact.

    A prompt is stored as text, not JSON: the run view read it as JSON and was
    refused (``JSON blob is missing or has the wrong media type``), which in
    served mode closed every connection watching the run or its session.
    """
    fx = _run_9(tmp_path / "s.db")
    epoch = coordinate(fx, at=2000)
    long = "x" * 40_000
    assert _queue(fx, epoch, PROMPT, key="fu-1").outcome == "accepted"
    assert _queue(fx, epoch, long, key="fu-2", at=3001).outcome == "accepted"
    view = fx.request("view.run.get", None, run_id="run-9")
    assert view.outcome == "accepted", view.error
    assert isinstance(view.receipt, dict)
    items: Any = view.receipt["followUpQueue"]["items"]
    assert items[0]["prompt"] == PROMPT
    artifact = items[1]["prompt"]["$artifact"]
    assert (artifact["mediaType"], artifact["bytes"]) == ("text/plain", 40_000)
    chunk = fx.request("view.content", {"path": artifact["path"], "offset": 0}, run_id="run-9")
    assert chunk.outcome == "accepted", chunk.error
    assert isinstance(chunk.receipt, dict)
    assert chunk.receipt["bytes"] == 40_000
    fx.close()
