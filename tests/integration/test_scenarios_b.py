"""Conformance scenarios B: command idempotency (SCENARIOS.md B, DOMAIN §7).

Scenario 13 lives with the other restarts in ``test_scenarios_g_restart.py``
and 17 with the backups in ``test_state_backup.py``.  Scenario 18 (a served
host that stops) needs ``pwf serve``, which is not built, and is not written.
"""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING

import pytest

from pwf import canonical
from pwf.commands import Context, Result, runcontrol, runs
from pwf.commands.catalogue import CLIENT_OPERATIONS, Operation, Route

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import CLIENT, RUN, START, Fixture, race_run_start

    from pwf.protocol.client import ClientRequest
else:
    from _harness import CLIENT, RUN, START, Fixture, race_run_start


@pytest.fixture
def live_status(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``host.status`` answered ``{"live": true}`` by a counting handler; its calls."""
    calls: list[str] = []

    def handler(_ctx: Context, request: ClientRequest) -> Result:
        calls.append(request.request_id)
        return Result(receipt={"live": True})

    monkeypatch.setitem(CLIENT_OPERATIONS, "host.status", Operation(Route.EXECUTED, handler))
    return calls


def _counting(
    monkeypatch: pytest.MonkeyPatch, name: str, handler: Callable[[Context, ClientRequest], Result]
) -> list[str]:
    """Wrap the real handler of ``name`` so its calls are counted (by requestId)."""
    calls: list[str] = []
    route = CLIENT_OPERATIONS[name].route

    def counted(ctx: Context, request: ClientRequest) -> Result:
        calls.append(request.request_id)
        return handler(ctx, request)

    monkeypatch.setitem(CLIENT_OPERATIONS, name, Operation(route, counted))
    return calls


def _scenario_8(fx: Fixture) -> None:
    first = fx.request("host.status", {}, rid="r-1", key="k-1")
    assert ("accepted", {"live": True}) == (first.outcome, first.receipt)


def test_b08_replay_by_request_id(fx: Fixture, live_status: list[str]) -> None:
    """A request replayed by requestId is adopted with the stored receipt; the handler ran once."""
    _scenario_8(fx)
    events = fx.events()

    again = fx.request("host.status", {}, rid="r-1", key="k-1")

    assert ("r-1", "adopted", {"live": True}, None) == (
        again.request_id,
        again.outcome,
        again.receipt,
        again.error,
    )
    assert ["r-1"] == live_status
    assert [("r-1", "accepted")] == [
        (row["request_id"], row["outcome"])
        for row in fx.rows("host_commands")
        if row["operation"] == "host.status"
    ]
    assert events == fx.events()
    fx.assert_rebuild_equals_live()


def test_b09_adoption_by_idempotency_key(fx: Fixture, live_status: list[str]) -> None:
    """A new requestId with the same client, key and payload is adopted without storing a row."""
    _scenario_8(fx)
    rows = fx.count("host_commands")

    adopted = fx.request("host.status", {}, rid="r-2", key="k-1")

    assert ("r-2", "adopted", {"live": True}) == (
        adopted.request_id,
        adopted.outcome,
        adopted.receipt,
    )
    assert ["r-1"] == live_status
    assert rows == fx.count("host_commands")
    assert fx.row("host_commands", request_id="r-2") is None
    fx.assert_rebuild_equals_live()


def test_b10_request_id_reuse_with_another_payload(fx: Fixture, live_status: list[str]) -> None:
    """Reusing a requestId with another payload is a conflict; nothing is stored or run."""
    _scenario_8(fx)
    events = fx.events()

    reused = fx.request("host.status", {"changed": True}, rid="r-1", key="k-1")

    assert ("r-1", "conflict", "Request ID was reused with another payload") == (
        reused.request_id,
        reused.outcome,
        reused.error,
    )
    assert canonical.MISSING is reused.receipt
    assert ["r-1"] == live_status
    assert events == fx.events()
    fx.assert_rebuild_equals_live()


def test_b11_key_reuse_with_another_payload(fx: Fixture, live_status: list[str]) -> None:
    """Reusing a key with another payload is a conflict that stores nothing."""
    _scenario_8(fx)
    events = fx.events()

    reused = fx.request("host.status", {"changed": True}, rid="r-3", key="k-1")

    assert ("r-3", "conflict", "Idempotency key was reused with another payload") == (
        reused.request_id,
        reused.outcome,
        reused.error,
    )
    assert ["r-1"] == live_status
    assert events == fx.events()
    assert fx.row("host_commands", request_id="r-3") is None
    fx.assert_rebuild_equals_live()


def test_b12_a_returned_rejection_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rejection the handler returns is recorded and replayed unchanged under the same key."""
    fx = Fixture(tmp_path / "s.db")
    fx.start()  # queued, with no worker and nothing to answer: not pausable
    calls = _counting(monkeypatch, "run.pause", runcontrol.run_pause)

    first = fx.request("run.pause", {}, RUN, rid="rej-1", key="rejected")
    second = fx.request("run.pause", {}, RUN, rid="rej-2", key="rejected")

    assert ("rej-1", "rejected", "Run is not pausable") == (
        first.request_id,
        first.outcome,
        first.error,
    )
    assert ("rej-2", "rejected", "Run is not pausable") == (
        second.request_id,
        second.outcome,
        second.error,
    )
    assert ["rej-1"] == calls
    stored = fx.row("host_commands", idempotency_key="rejected")
    assert stored is not None
    assert ("rej-1", "rejected") == (stored["request_id"], stored["outcome"])
    assert 1 == fx.count("host_commands", idempotency_key="rejected")
    fx.assert_rebuild_equals_live()
    fx.close()


def test_b12_a_raised_refusal_is_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal the handler raises records nothing, so a retry of the request executes again."""
    fx = Fixture(tmp_path / "s.db")
    calls = _counting(monkeypatch, "run.start", runs.run_start)

    first = fx.request("run.start", START, rid="bad-1", key="bad")
    again = fx.request("run.start", START, rid="bad-1", key="bad")

    assert ("rejected", "run.start requires runId") == (first.outcome, first.error)
    assert ("rejected", "run.start requires runId") == (again.outcome, again.error)
    assert ["bad-1", "bad-1"] == calls
    assert 0 == fx.count("host_commands")
    assert 0 == fx.events()
    fx.assert_rebuild_equals_live()
    fx.close()


def test_b14_keys_are_scoped_per_client(fx: Fixture) -> None:
    """The same key from another client executes independently and stores a second row."""
    first = fx.request("run.list", {}, rid="l-1", key="k-1", client=CLIENT)
    other = fx.request("run.list", {}, rid="l-2", key="k-1", client="cli-B")

    assert ("accepted", "accepted") == (first.outcome, other.outcome)
    assert [("cli-A", "l-1", "accepted"), ("cli-B", "l-2", "accepted")] == sorted(
        (row["client_id"], row["request_id"], row["outcome"])
        for row in fx.rows("host_commands", idempotency_key="k-1")
    )
    fx.assert_rebuild_equals_live()


def test_b15_not_found_is_replayed_as_not_found(tmp_path: Path) -> None:
    """A recorded notFound stays notFound for the same key even after the run appears."""
    fx = Fixture(tmp_path / "s.db", run_id="run-77")

    first = fx.request("run.status", {}, "run-77", rid="s-1r", key="st-77")
    fx.start()
    second = fx.request("run.status", {}, "run-77", rid="s-2r", key="st-77")

    assert ("s-1r", "notFound", "Workflow run not found: run-77") == (
        first.request_id,
        first.outcome,
        first.error,
    )
    assert ("s-2r", "notFound", "Workflow run not found: run-77") == (
        second.request_id,
        second.outcome,
        second.error,
    )
    assert 1 == fx.count("host_commands", idempotency_key="st-77")
    fx.assert_rebuild_equals_live()
    fx.close()


def test_b16_stored_receipts_are_not_recomputed(fx: Fixture) -> None:
    """A replayed run.status returns the receipt recorded while the run was waiting."""
    recorded = fx.request("run.status", {}, RUN, rid="st-1", key="status-1")
    assert isinstance(recorded.receipt, dict)
    assert "waiting" == recorded.receipt["status"]
    fx.submit({"reply": "x"})
    fx.validate(at=2000)
    fx.ok("interaction.accept", {})
    fx.ok("node.finished", {"output": {"reply": "x"}}, attempt="attempt-1")
    fx.ok("run.finished", {"status": "completed", "finalOutput": {"reply": "x"}})
    run = fx.row("runs", run_id=RUN)
    assert run is not None
    assert "completed" == run["status"]

    replay = fx.request("run.status", {}, RUN, rid="st-1", key="status-1", at=3000)

    assert ("adopted", recorded.receipt, recorded.revision) == (
        replay.outcome,
        replay.receipt,
        replay.revision,
    )
    fx.assert_rebuild_equals_live()


@pytest.mark.slow
def test_b_racing_processes_get_one_accepted_and_one_adopted(tmp_path: Path) -> None:
    """Two processes sending run.start with one (client, key) at once: one accepted, one adopted."""
    db = tmp_path / "s.db"
    fx = Fixture(db)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    processes = [
        context.Process(target=race_run_start, args=(str(db), rid, barrier, results))
        for rid in ("race-1", "race-2")
    ]
    for process in processes:
        process.start()
    outcomes = sorted(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)

    assert [0, 0] == [process.exitcode for process in processes]
    assert ["accepted", "adopted"] == outcomes
    assert 1 == fx.events("run.reserved")
    assert 1 == fx.count("host_commands", idempotency_key="start-race")
    fx.assert_rebuild_equals_live()
    fx.close()


def test_b_a_recorded_command_keeps_its_run_and_its_batch_names_its_request(fx: Fixture) -> None:
    """DOMAIN §7.2: the record of a run command keeps the run; its batch's cause is the request.

    ``run.pause`` names its run on the request and answers without one, so the
    record's run is the request's.
    """
    paused = fx.request("run.pause", None, RUN, rid="p-1", key="pause-1")
    assert "accepted" == paused.outcome

    assert RUN == fx.existing("host_commands", request_id="start-1")["run_id"]
    assert RUN == fx.existing("host_commands", request_id="p-1")["run_id"]
    batch = [
        entry for entry in fx.store.entries() if entry.cause and entry.cause.request_id == "p-1"
    ]
    assert batch
    assert {("run.pause", "p-1", CLIENT, "pause-1")} == {
        (e.cause.operation, e.cause.request_id, e.cause.client_id, e.cause.idempotency_key)
        for e in batch
        if e.cause is not None
    }
    assert all(e.cause is not None and e.cause.fingerprint for e in batch)
    fx.assert_rebuild_equals_live()


def test_b12_a_refused_recorded_command_is_recorded_with_its_text(fx: Fixture) -> None:
    """DOMAIN §7.2 and the ``run.resume`` row: "Run is not resumable" is recorded and replayed."""
    first = fx.request("run.resume", None, "run-none", rid="res-1", key="resume-1")
    assert ("rejected", "Run is not resumable") == (first.outcome, first.error)
    row = fx.existing("host_commands", request_id="res-1")
    assert ("rejected", "run-none") == (row["outcome"], row["run_id"])

    again = fx.request("run.resume", None, "run-none", rid="res-1", key="resume-1", at=9000)

    assert ("rejected", "Run is not resumable") == (again.outcome, again.error)
    assert 1 == sum(1 for r in fx.rows("host_commands") if r["request_id"] == "res-1")
    fx.assert_rebuild_equals_live()
