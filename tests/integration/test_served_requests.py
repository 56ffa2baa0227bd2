"""Requests a served host answers differently from direct mode (DOMAIN §7.3, §8; HOST §1.12, §1.20).

In-process hosts with a fixed clock; the worker side of a submission is
driven through a direct-mode fixture on the same database, as a worker
process would record it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests._tally import tally
    from tests.integration._harness import ATTEMPT, NODE, REQUEST, Fixture
    from tests.integration._hosted import AT, Hosted
    from tests.integration._served import line, rows, short_dir, until
else:
    from _harness import ATTEMPT, NODE, REQUEST, Fixture
    from _hosted import AT, Hosted
    from _served import line, rows, short_dir, until

    from _tally import tally

pytestmark = pytest.mark.slow


@pytest.fixture
def fixture() -> Iterator[Fixture]:
    """run-1 parked on its interaction, built at the hosts' fixed clock."""
    with short_dir() as directory:
        fx = Fixture(directory / "state.db")
        fx.start(at=AT)
        fx.launch(at=AT)
        fx.ready(at=AT)
        fx.ok("node.started", {"nodeId": NODE, "timeoutMs": 600_000}, attempt=ATTEMPT)
        fx.request_interaction(at=AT)
        yield fx
        fx.close()


def _db(fx: Fixture) -> Path:
    return fx.store.projections_file.path


def _submit(rid: str = "submit-1") -> bytes:
    payload = {
        "attempt": ATTEMPT,
        "requestId": REQUEST,
        "step": NODE,
        "submissionId": "sub-1",
        "value": {"reply": "hi"},
    }
    return line("interaction.submit", payload, rid=rid, run_id="run-1", revision=1)


def test_submit_waits_for_the_verdict_and_does_not_block_the_connection(fx: Fixture) -> None:
    """A waiting submit lets host.status on the same connection answer first (HOST §1.12)."""
    hosted = Hosted(_db(fx))
    try:
        client = hosted.client()
        client.send(_submit())
        until(lambda: rows(_db(fx), "SELECT 1 FROM interactive_submissions"), what="submission")
        status = client.request(line("host.status", rid="status-1"))
        assert "accepted" == status["outcome"]
        time.sleep(0.2)
        assert "submit-1" not in client._responses
        fx.validate(at=AT)
        fx.ok("interaction.accept", {})
        answer, _ = client.response("submit-1")
        assert "accepted" == answer["outcome"], answer
        client.close()
    finally:
        hosted.close()


def test_the_verdict_poll_reads_committed_state_and_joins_no_write_group(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiting submit looks for its verdict outside the writer's transactions (ADR 0011).

    Every look runs with no write transaction open, and while the submit
    only waits the writer commits nothing: a poll is neither decided in a
    group nor makes one of its own.
    """
    hosted = Hosted(_db(fx))
    try:
        writer = hosted.server.writer
        assert writer is not None
        counts = tally(writer)
        host = writer.host
        assert host is not None
        looks: list[object] = []
        verdict = host.verdict

        def look(*args: Any) -> Any:
            looks.append(host.shared)
            return verdict(*args)

        monkeypatch.setattr(host, "verdict", look)
        with hosted.client() as client:
            client.send(_submit())
            until(lambda: len(looks) >= 3, what="the verdict polls")
            groups, seen = counts["group"], len(looks)
            time.sleep(0.3)
            until(lambda: len(looks) >= seen + 3, what="more verdict polls")
            assert groups == counts["group"]
            fx.validate(at=AT)
            fx.ok("interaction.accept", {})
            answer, _ = client.response("submit-1")
        assert "accepted" == answer["outcome"], answer
        assert [None] * len(looks) == looks
    finally:
        hosted.close()


def test_a_rejected_verdict_is_the_answer(fx: Fixture) -> None:
    """The worker's rejection becomes the submit's answer, with its receipt's error."""
    hosted = Hosted(_db(fx))
    try:
        with hosted.client() as client:
            client.send(_submit())
            until(lambda: rows(_db(fx), "SELECT 1 FROM interactive_submissions"), what="submit")
            fx.validate(at=AT)
            fx.ok("interaction.reject", {"error": "reply must be longer"})
            answer, _ = client.response("submit-1")
        assert ("rejected", "reply must be longer") == (answer["outcome"], answer["error"])
    finally:
        hosted.close()


def test_stopping_ends_the_wait_unavailable(fx: Fixture) -> None:
    """A submit still waiting when the host stops answers unavailable (DOMAIN §7.3)."""
    hosted = Hosted(_db(fx))
    try:
        client = hosted.client()
        client.send(_submit())
        until(lambda: rows(_db(fx), "SELECT 1 FROM interactive_submissions"), what="submit")
        future = hosted.loop.call_soon_threadsafe(hosted.server.request_stop)
        del future
        answer, _ = client.response("submit-1")
        assert ("unavailable", "Workflow host stopped while validating the submission") == (
            answer["outcome"],
            answer["error"],
        )
        client.close()
    finally:
        hosted.close()


def test_b18_unavailable_is_not_stored(fx: Fixture) -> None:
    """Scenario B.18: while stopping, run.status u-1 is unavailable; a new host executes it."""
    db = _db(fx)
    hosted = Hosted(db)
    try:
        with hosted.client() as client:
            assert hosted.server.writer is not None
            host = hosted.server.writer.host
            assert host is not None
            host.stopping = True
            answer = client.request(line("run.status", rid="u-1", run_id="run-1"))
            assert {
                "error": "Workflow host is stopping",
                "outcome": "unavailable",
                "requestId": "u-1",
                "schema": "pi-workflows.client.v1",
                "type": "response",
            } == answer
            assert [] == rows(db, "SELECT 1 FROM host_commands WHERE request_id = 'u-1'")
    finally:
        hosted.close()
    again = Hosted(db)
    try:
        with again.client() as client:
            answer = client.request(line("run.status", rid="u-1", run_id="run-1"))
        assert "accepted" == answer["outcome"]
        assert [("accepted",)] == rows(
            db, "SELECT outcome FROM host_commands WHERE request_id = 'u-1'"
        )
    finally:
        again.close()


def test_maintenance_replays_before_the_stopping_check(fx: Fixture, tmp_path: Path) -> None:
    """A stored maintenance answer is still returned while stopping; a new one is unavailable."""
    db = _db(fx)
    hosted = Hosted(db)
    try:
        with hosted.client() as client:
            backup = line("state.backup", {"destination": "relative"}, rid="b-1")
            first = client.request(backup)
            assert "rejected" == first["outcome"]
            host = hosted.server.writer.host if hosted.server.writer else None
            assert host is not None
            host.stopping = True
            assert "rejected" == client.request(backup)["outcome"]
            fresh = line("state.backup", {"destination": str(tmp_path / "b.db")}, rid="b-2")
            assert "unavailable" == client.request(fresh)["outcome"]
    finally:
        hosted.close()


def test_heartbeat_renews_and_a_lost_claim_stops_the_host(fx: Fixture) -> None:
    """A heartbeat appends host.renewed; one after the lease ran out stops the host, exit 3."""
    db = _db(fx)
    now = [AT]
    hosted = Hosted(db, clock=lambda: now[0])
    try:
        now[0] = AT + 10_000
        hosted.run(hosted.server.timers.heartbeat())
        assert [(AT + 10_000, AT + 40_000)] == rows(
            db, "SELECT heartbeat_at, expires_at FROM host_state"
        )
        now[0] = AT + 40_000
        hosted.run(hosted.server.timers.heartbeat())
        hosted.run(hosted.server.stopped.wait())
        assert 3 == hosted.server.exit_code
        assert not hosted.server.paths.socket.exists()
        assert not hosted.server.paths.lock.exists()
    finally:
        hosted.close()


def _watch_and_turn(client: Any, db: Path) -> None:
    """Attach ``client`` as s-1's coordinator, report the step message, start a turn."""
    [(step,)] = rows(db, "SELECT workflow_message_id FROM workflow_messages WHERE kind = 'step'")
    watch = {"subscriptionId": "sub-1", "sessionId": "s-1", "coordinator": True}
    watched = client.request(line("view.session.watch", watch, rid="watch-1"))
    epoch = watched["receipt"]["coordinatorEpoch"]
    session = {"targetSessionId": "s-1", "coordinatorEpoch": epoch}
    entries = [{"workflowMessageId": step, "piSessionEntryId": "entry-1"}]
    report = {**session, "entries": entries, "isIdle": False, "hasPendingMessages": False}
    assert (
        "accepted"
        == client.request(line("workflowMessage.reportBranch", report, rid="b-1"))["outcome"]
    )
    started = {**session, "workflowMessageId": step, "workflowTurnId": "t-1", "runId": "run-1"}
    started["state"] = "started"
    assert "accepted" == client.request(line("workflowTurn.report", started, rid="t-1"))["outcome"]


def test_the_poller_begins_the_timeout_of_an_expired_interaction(fx: Fixture) -> None:
    """The 2 s poll runs the expiry of DOMAIN §10.7 once the deadline has passed."""
    db = _db(fx)
    now = [AT]
    hosted = Hosted(db, clock=lambda: now[0])
    try:
        with hosted.client() as client:
            _watch_and_turn(client, db)
            hosted.run(hosted.server.timers.poll())
            assert [] == rows(db, "SELECT 1 FROM events WHERE type = ?", _TIMEOUT)
            [(deadline,)] = rows(db, "SELECT deadline_at FROM node_attempts")
            now[0] = deadline
            hosted.run(hosted.server.timers.poll())
            assert [(1,)] == rows(db, "SELECT count(*) FROM events WHERE type = ?", _TIMEOUT)
            assert [("cancelled",)] == rows(db, "SELECT status FROM interactive_requests")
    finally:
        hosted.close()


_TIMEOUT = "run.interaction_timeout_started"
