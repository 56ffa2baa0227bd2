"""Conformance scenarios for ``run.restart``: B13 and G49-G51 (DOMAIN §7.3, §12.1, §12.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf.commands.ids import restart_run_id

if TYPE_CHECKING:
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import (
        RUN,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        run_worker,
        terminal_message,
        turn,
        watch,
    )

    from pwf.protocol.client import ClientResponse
else:
    from _harness import (
        RUN,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        run_worker,
        terminal_message,
        turn,
        watch,
    )

TERMINAL_49 = "workflow-message-21fc3503db23d2995a9f7d36502465d90b8a1200307e9813372b3a0913069e0f"
FINGERPRINT_49 = "96eeb2504de7d6d9f3b48c7fb61a8db885d657d807eb63a3b5a2c47f069ac4b9"
RESTART_49 = "restart-313587807a0de288a46cb23ec054460202f652d8"
TERMINAL_51 = "workflow-message-fd48b930d6e183a6a51a0ea511c653102e99f84477cacc5adf83f3810a48f0fc"
NOT_REPORTED = "Workflow session branch must be reported before session control"


def _failed(
    tmp_path: Path, *, status: str = "failed", report: bool = True, turns: bool = True
) -> tuple[Fixture, str]:
    """F with ``run-1`` ended (error ``boom``) at 3 000; its terminal sent at 4 000, turn 5-10 s.

    ``report=False`` leaves the terminal message pending; ``turns=False`` starts no turn.
    """
    fx = Fixture.f(tmp_path / "s.db")
    epoch = coordinate(fx, at=2000)
    if status == "cancelled":
        assert "accepted" == fx.request("run.cancel", None, run_id=RUN, at=3000).outcome
    else:
        finish_fixture_run(fx, at=3000)
    terminal = terminal_message(fx)
    if report:
        assert "accepted" == branch(fx, epoch, {terminal: "e-t"}, at=4000).outcome
    if report and turns:
        assert "accepted" == turn(fx, epoch, terminal, "t-1", at=5000).outcome
        ended = turn(fx, epoch, terminal, "t-1", stop="completed", response="e-r", at=10000)
        assert "accepted" == ended.outcome
    return fx, epoch


def _restart(  # noqa: PLR0913 - one keyword per request member a scenario pins
    fx: Fixture,
    epoch: str,
    message: str,
    *,
    run_id: str = RUN,
    session: str = "s-1",
    extra: dict[str, object] | None = None,
    rid: str | None = None,
    key: str | None = None,
    at: int = 20000,
) -> ClientResponse:
    payload = {
        "targetSessionId": session,
        "coordinatorEpoch": epoch,
        "workflowMessageId": message,
        **(extra or {}),
    }
    return fx.request("run.restart", payload, run_id=run_id, rid=rid, key=key, at=at)


def _answer(response: ClientResponse) -> tuple[object, object]:
    return response.outcome, response.error


def test_b13_a_raised_session_refusal_is_not_recorded(tmp_path: Path) -> None:
    """Before the new coordinator's branch report rr-1 is refused unrecorded; after it, it runs."""
    fx, _ = _failed(tmp_path)
    epoch = watch(fx, at=11000)

    refused = _restart(fx, epoch, TERMINAL_49, rid="rr-1", key="restart-1", at=12000)

    assert ("rejected", NOT_REPORTED) == _answer(refused)
    assert fx.row("host_commands", request_id="rr-1") is None
    assert 0 == fx.count("host_commands", idempotency_key="restart-1")

    assert "accepted" == branch(fx, epoch, {TERMINAL_49: "e-t"}, at=13000).outcome
    executed = _restart(fx, epoch, TERMINAL_49, rid="rr-1", key="restart-1", at=14000)

    assert ("accepted", None) == _answer(executed)
    assert isinstance(executed.receipt, dict)
    assert RESTART_49 == executed.receipt["runId"]
    assert "accepted" == fx.existing("host_commands", request_id="rr-1")["outcome"]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g49_accepted_restart(tmp_path: Path) -> None:
    """Restarting the failed run-1 reserves restart-3135... as its first restart in s-1."""
    fx, epoch = _failed(tmp_path)
    assert TERMINAL_49 == terminal_message(fx)
    assert "sent" == fx.existing("workflow_messages", workflow_message_id=TERMINAL_49)["status"]

    restarted = _restart(fx, epoch, TERMINAL_49, at=20000)

    assert ("accepted", None) == _answer(restarted)
    assert {"parentRunId": RUN, "restartNumber": 1, "runId": RESTART_49} == restarted.receipt
    assert restart_run_id(TERMINAL_49) == RESTART_49
    source = fx.existing("runs", run_id=RUN)
    child = fx.existing("runs", run_id=RESTART_49)
    assert (RUN, RUN, "restart", 1, bytes.fromhex(FINGERPRINT_49), "s-1", "interactive") == (
        child["parent_run_id"],
        child["root_run_id"],
        child["lineage_kind"],
        child["restart_number"],
        child["parent_terminal_fingerprint"],
        child["origin_session_id"],
        child["execution_mode"],
    )
    same = (
        "workflow_ref",
        "workflow_name",
        "definition_digest",
        "definition_snapshot_hash",
        "input_hash",
        "launch_options_hash",
        "project_path",
    )
    assert [source[name] for name in same] == [child[name] for name in same]
    assert {} == fx.blob(child["input_hash"])
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g50_restart_of_a_cancelled_run(tmp_path: Path) -> None:
    """A cancelled source cannot be restarted."""
    fx, epoch = _failed(tmp_path, status="cancelled")

    refused = _restart(fx, epoch, terminal_message(fx))

    assert ("rejected", "An explicitly cancelled workflow cannot be restarted") == _answer(refused)
    assert 1 == fx.count("runs")
    fx.assert_rebuild_equals_live()
    fx.close()


def _fail_and_restart(fx: Fixture, epoch: str, run_id: str, error: str, at: int) -> str:
    """Run the queued restart run ``run_id`` to failure with ``error``, then restart it."""
    fx.launch(run_id=run_id, at=at)
    run_worker(fx, run_id, "worker.ready", {}, rev=0)
    run_worker(fx, run_id, "run.finished", {"status": "failed", "error": error})
    terminal = terminal_message(fx, run_id)
    assert "accepted" == branch(fx, epoch, {terminal: f"e-{run_id}"}, at=at + 1000).outcome
    turn(fx, epoch, terminal, f"t-{run_id}", run_id=run_id, at=at + 2000)
    turn(fx, epoch, terminal, f"t-{run_id}", run_id=run_id, stop="completed", at=at + 3000)
    restarted = _restart(fx, epoch, terminal, run_id=run_id, at=at + 4000)
    assert "accepted" == restarted.outcome, restarted
    assert isinstance(restarted.receipt, dict)
    return str(restarted.receipt["runId"])


def test_g50_restart_limit(tmp_path: Path) -> None:
    """A source that is already the third restart cannot be restarted again."""
    fx, epoch = _failed(tmp_path)
    first = _restart(fx, epoch, TERMINAL_49, at=20000)
    assert isinstance(first.receipt, dict)
    second = _fail_and_restart(fx, epoch, str(first.receipt["runId"]), "boom-2", 30000)
    third = _fail_and_restart(fx, epoch, second, "boom-3", 40000)
    assert 3 == fx.existing("runs", run_id=third)["restart_number"]
    fx.launch(run_id=third, at=50000)
    run_worker(fx, third, "worker.ready", {}, rev=0)
    run_worker(fx, third, "run.finished", {"status": "failed", "error": "boom-4"})
    terminal = terminal_message(fx, third)
    branch(fx, epoch, {terminal: "e-last"}, at=51000)
    turn(fx, epoch, terminal, "t-last", run_id=third, at=52000)
    turn(fx, epoch, terminal, "t-last", run_id=third, stop="completed", at=53000)

    refused = _restart(fx, epoch, terminal, run_id=third, at=54000)

    assert ("rejected", "Workflow restart limit reached (3 restarts)") == _answer(refused)
    assert 4 == fx.count("runs")
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g50_restart_from_a_pending_terminal_message(tmp_path: Path) -> None:
    """A terminal message that was never shown is stale for a restart."""
    fx, epoch = _failed(tmp_path, report=False)
    assert "pending" == fx.existing("workflow_messages", workflow_message_id=TERMINAL_49)["status"]

    refused = _restart(fx, epoch, TERMINAL_49)

    assert ("rejected", "Workflow terminal result is stale or was replaced") == _answer(refused)
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g50_restart_without_a_terminal_turn(tmp_path: Path) -> None:
    """A sent terminal message no model turn has read cannot be restarted."""
    fx, epoch = _failed(tmp_path, turns=False)

    refused = _restart(fx, epoch, TERMINAL_49)

    assert ("rejected", "Workflow restart requires a terminal model turn") == _answer(refused)
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g50_restart_naming_another_turn(tmp_path: Path) -> None:
    """A workflowTurnId other than the terminal's latest turn is stale; the latest one passes."""
    fx, epoch = _failed(tmp_path)

    refused = _restart(fx, epoch, TERMINAL_49, extra={"workflowTurnId": "t-9"})
    accepted = _restart(fx, epoch, TERMINAL_49, extra={"workflowTurnId": "t-1"}, at=20001)

    assert ("rejected", "Workflow terminal turn is stale") == _answer(refused)
    assert ("accepted", None) == _answer(accepted)
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g50_restart_from_another_session(tmp_path: Path) -> None:
    """The coordinator of s-2 cannot restart s-1's run; an unknown run is notFound."""
    fx, _ = _failed(tmp_path)
    other = coordinate(fx, session="s-2", connection="C2", at=11000)

    refused = _restart(fx, other, TERMINAL_49, session="s-2")
    missing = _restart(fx, other, TERMINAL_49, session="s-2", run_id="run-77")

    assert ("rejected", "Workflow run belongs to another Pi session") == _answer(refused)
    assert "notFound" == missing.outcome
    assert [("rejected", RUN), ("notFound", "run-77")] == [
        (row["outcome"], row["run_id"])
        for row in sorted(
            fx.rows("host_commands", operation="run.restart"), key=lambda row: row["created_at"]
        )
    ]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_g51_a_repeated_outcome_in_the_chain(tmp_path: Path) -> None:
    """The restart run failing the same way cannot be restarted again."""
    fx, epoch = _failed(tmp_path)
    assert "accepted" == _restart(fx, epoch, TERMINAL_49, at=20000).outcome
    fx.launch(run_id=RESTART_49, at=30000)
    run_worker(fx, RESTART_49, "worker.ready", {}, rev=0)
    run_worker(fx, RESTART_49, "run.finished", {"status": "failed", "error": "boom"})
    assert TERMINAL_51 == terminal_message(fx, RESTART_49)
    terminal = fx.existing("workflow_messages", workflow_message_id=TERMINAL_51)
    assert FINGERPRINT_49 == fx.blob(terminal["content_hash"])["details"]["terminalFingerprint"]
    branch(fx, epoch, {TERMINAL_51: "e-51"}, at=31000)
    turn(fx, epoch, TERMINAL_51, "t-51", run_id=RESTART_49, at=32000)
    turn(fx, epoch, TERMINAL_51, "t-51", run_id=RESTART_49, stop="completed", at=33000)

    refused = _restart(fx, epoch, TERMINAL_51, run_id=RESTART_49, at=34000)

    assert ("rejected", "The same terminal outcome already occurred in this restart chain") == (
        _answer(refused)
    )
    assert 2 == fx.count("runs")
    fx.assert_rebuild_equals_live()
    fx.close()
