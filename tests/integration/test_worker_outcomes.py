"""A worker message is recorded with an outcome a worker response carries (DOMAIN §14).

Every worker handler answers accepted, adopted, rejected or claimLost; a
handler that answered another outcome would leave an event the log's own
schema refuses, so the host rejects the message instead and keeps nothing the
handler staged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf.commands import Result
from pwf.commands.workers import WORKER_OPERATIONS
from pwf.events import RunResumed, WorkerMessageRecorded

if TYPE_CHECKING:
    import pytest

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import Fixture, run_worker, start_run

    from pwf.commands import Context
    from pwf.protocol.worker import WorkerMessage
else:
    from _harness import Fixture, run_worker, start_run


def _not_found(ctx: Context, message: WorkerMessage) -> Result:
    ctx.emit(RunResumed(run_id=message.run_id, detail="staged by the handler"))
    return Result(outcome="notFound", error="Workflow run not found")


def test_an_outcome_no_worker_response_carries_is_rejected(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler's events are dropped and the message is recorded ``rejected``, naming why."""
    start_run(fx, "run-2", at=1100)
    fx.launch(run_id="run-2", at=1100)
    run_worker(fx, "run-2", "worker.ready", {}, rev=0)
    monkeypatch.setitem(WORKER_OPERATIONS, "store.readRun", _not_found)
    before = fx.event_types()

    response = fx.send(fx.message("store.readRun", {}, run_id="run-2"), at=1200)

    expected = ("rejected", "A worker message cannot be answered notFound")
    assert expected == (response.outcome, response.error)
    appended = list(fx.store.entries(len(before) + 1))
    assert ["worker.message_recorded"] == [entry.type for entry in appended]
    recorded = appended[0].event
    assert isinstance(recorded, WorkerMessageRecorded)
    assert expected == (recorded.outcome, recorded.error)
    fx.assert_rebuild_equals_live()
