"""Conformance scenarios F: interaction timeout accounting (SCENARIOS.md F, DOMAIN §10)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.commands import Context, Reader, Row
from pwf.commands.deadlines import begin_turn_shift
from pwf.commands.expiry import candidates
from pwf.commands.ids import message_id
from pwf.commands.interactions import get_request
from pwf.errors import CommandError
from pwf.events import DeadlineShifted, Event, InteractionTimeoutStarted
from pwf.fold.bulk import rebuild_into

if TYPE_CHECKING:
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import (
        ATTEMPT,
        M1,
        REQUEST,
        RUN,
        Fixture,
        branch,
        coordinate,
        fixture_with_budget,
        interactive_run,
        turn,
        watch,
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
        fixture_with_budget,
        interactive_run,
        turn,
        watch,
    )

RESUMED_2 = message_id("step", REQUEST, "2:resumed")
EXPIRED = "Workflow node model-turn deadline expired"


def _attempt(fx: Fixture, attempt_id: str = ATTEMPT) -> tuple[object, ...]:
    """(started_at, deadline_at, status, updated_at) of the attempt."""
    row = fx.existing("node_attempts", attempt_id=attempt_id)
    return row["started_at"], row["deadline_at"], row["status"], row["updated_at"]


def _counters(fx: Fixture) -> tuple[int, int]:
    request = fx.existing("interactive_requests", request_id=REQUEST)
    return request["unproductive_turn_ends"], request["revision"]


class _Rows:
    """A reader over one SQLite connection, rows by column name."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def one(self, sql: str, params: tuple[object, ...] = ()) -> Row | None:
        cursor = self.connection.execute(sql, params)
        cursor.row_factory = sqlite3.Row
        found: Row | None = cursor.fetchone()
        return found

    def all(self, sql: str, params: tuple[object, ...] = ()) -> list[Row]:
        cursor = self.connection.execute(sql, params)
        cursor.row_factory = sqlite3.Row
        return list(cursor.fetchall())


def _reading(rows: Reader, now: int) -> tuple[Context, list[Event]]:
    """A context that reads ``rows`` at ``now`` and only collects what it would stage."""
    staged: list[Event] = []
    return Context(rows, staged.extend, now), staged


def test_f40_the_first_turn_credits_the_wait_before_it(fx: Fixture) -> None:
    """A turn at 5 000 moves start and deadline by the 4 000 ms waited since 1 000."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)

    started = turn(fx, epoch, M1, "t-1", at=5000)

    assert "accepted" == started.outcome
    assert (5000, 65000, "waiting", 5000) == _attempt(fx)
    shifts = [entry.event for entry in fx.store.entries() if entry.type == DeadlineShifted.TAG]
    assert [
        DeadlineShifted(
            run_id=RUN,
            attempt_id=ATTEMPT,
            idle_ms=4000,
            from_deadline=61000,
            to_deadline=65000,
            from_started_at=1000,
            to_started_at=5000,
            cause="turn.start",
        )
    ] == shifts
    fx.assert_rebuild_equals_live()


def test_f40_a_single_millisecond_of_wait_is_credited(fx: Fixture) -> None:
    """SHIFT is a no-op only when idleMs is 0 (DOMAIN §10.1): 1 ms of wait moves both by 1 ms."""
    epoch = coordinate(fx, {M1: "e-1"}, at=1000)

    turn(fx, epoch, M1, "t-1", at=1001)

    assert (1001, 61001, "waiting", 1001) == _attempt(fx)
    assert 1 == fx.events(DeadlineShifted.TAG)


def test_f41_later_turns_credit_the_gap_since_the_previous_end(fx: Fixture) -> None:
    """After an end at 20 000 a start at 30 000 credits 10 000: 45 000 remain."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=5000)
    turn(fx, epoch, M1, "t-1", stop="completed", response="e-2", at=20000)

    turn(fx, epoch, M1, "t-2", at=30000)

    started_at, deadline, _, updated = _attempt(fx)
    assert (15000, 75000, 30000) == (started_at, deadline, updated)
    assert 45000 == deadline - 30000  # type: ignore[operator]
    fx.assert_rebuild_equals_live()


def test_f42_without_a_deadline_a_turn_moves_nothing(tmp_path: Path) -> None:
    """The public path gives a node without timeoutMs no deadline, so SHIFT is a no-op."""
    fx = fixture_with_budget(tmp_path / "s.db", None)
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    before = _attempt(fx)

    assert "accepted" == turn(fx, epoch, M1, "t-1", at=9000).outcome

    assert (1000, None, "waiting", 1000) == before
    assert before == _attempt(fx)
    assert 0 == fx.events("attempt.deadline_shifted")
    fx.assert_rebuild_equals_live()
    fx.close()


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE interactive_requests SET status = 'cancelled'",
        "DELETE FROM node_attempts",
    ],
)
def test_a_turn_start_without_a_pending_timeout_is_refused(fx: Fixture, damage: str) -> None:
    """DOMAIN §10.2: the request must be pending and its attempt present, else the exact text.

    Neither can happen through the commands, so the decider runs on a rebuilt copy.
    """
    copy = sqlite3.connect(":memory:")
    try:
        rebuild_into(copy, fx.store.entries())
        copy.execute(damage)
        ctx, staged = _reading(_Rows(copy), 9000)
        request = get_request(ctx, REQUEST)
        assert request is not None

        with pytest.raises(CommandError) as refused:
            begin_turn_shift(ctx, request)

        assert ("Pending workflow interaction timeout is missing", "rejected") == (
            str(refused.value),
            refused.value.outcome,
        )
        assert [] == staged
    finally:
        copy.close()


def test_f42_the_fallback_base_is_the_request_creation(tmp_path: Path) -> None:
    """With started_at null (deadline 50 000, request created 2 000) a 9 000 start shifts 7 000.

    No public operation leaves an attempt's ``started_at`` null, so the decider
    runs on a rebuilt copy of fixture F with those two columns set.
    """
    fx = Fixture.f(tmp_path / "s.db")
    copy = sqlite3.connect(":memory:")
    try:
        rebuild_into(copy, fx.store.entries())
        copy.execute("UPDATE node_attempts SET started_at = NULL, deadline_at = 50000")
        copy.execute("UPDATE interactive_requests SET created_at = 2000")
        ctx, staged = _reading(_Rows(copy), 9000)
        request = get_request(ctx, REQUEST)
        assert request is not None

        begin_turn_shift(ctx, request)

        assert [(7000, 50000, 57000, None, None)] == [
            (e.idle_ms, e.from_deadline, e.to_deadline, e.from_started_at, e.to_started_at)
            for e in staged
            if isinstance(e, DeadlineShifted)
        ]
    finally:
        copy.close()
    fx.assert_rebuild_equals_live()
    fx.close()


def test_f42_the_attempt_start_is_the_base_before_the_request_creation(tmp_path: Path) -> None:
    """DOMAIN §10.2: with no ended turn the base is the attempt's start, not the request's creation.

    Start 3 000, request created 2 000, deadline 50 000: a turn at 9 000 shifts 6 000.
    """
    fx = Fixture.f(tmp_path / "s.db")
    copy = sqlite3.connect(":memory:")
    try:
        rebuild_into(copy, fx.store.entries())
        copy.execute("UPDATE node_attempts SET started_at = 3000, deadline_at = 50000")
        copy.execute("UPDATE interactive_requests SET created_at = 2000")
        ctx, staged = _reading(_Rows(copy), 9000)
        request = get_request(ctx, REQUEST)
        assert request is not None

        begin_turn_shift(ctx, request)

        assert [(6000, 50000, 56000, 3000, 9000)] == [
            (e.idle_ms, e.from_deadline, e.to_deadline, e.from_started_at, e.to_started_at)
            for e in staged
            if isinstance(e, DeadlineShifted)
        ]
    finally:
        copy.close()
    fx.close()


def _budget_90(tmp_path: Path) -> tuple[Fixture, str]:
    """F with a 90 000 ms budget and t-1 started at 10 000 (start 10 000, deadline 100 000)."""
    fx = fixture_with_budget(tmp_path / "s.db", 90000)
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=10000)
    assert (10000, 100000, "waiting", 10000) == _attempt(fx)
    return fx, epoch


def test_f43_pause_while_a_turn_runs_and_it_ends_before_resume(tmp_path: Path) -> None:
    """Resume credits the 5 000 ms of pause after the end; the next turn credits 17 000 more."""
    fx, epoch = _budget_90(tmp_path)
    assert "accepted" == fx.request("run.pause", None, run_id=RUN, at=30000).outcome
    ended = turn(fx, epoch, M1, "t-1", stop="completed", response="e-2", at=35000)
    assert "accepted" == ended.outcome
    assert (0, 1) == _counters(fx)

    resumed = fx.request("run.resume", None, run_id=RUN, at=50000)

    assert "accepted" == resumed.outcome
    assert (15000, 105000, "waiting", 50000) == _attempt(fx)
    assert (0, 2) == _counters(fx)
    step = fx.rows("workflow_messages", source_id=REQUEST, status="pending")
    assert [RESUMED_2] == [row["workflow_message_id"] for row in step]
    assert 2 == fx.blob(step[0]["content_hash"])["details"]["revision"]

    branch(fx, epoch, {M1: "e-1", RESUMED_2: "e-3"}, at=51000)
    assert "accepted" == turn(fx, epoch, RESUMED_2, "t-2", at=52000).outcome

    started_at, deadline, _, updated = _attempt(fx)
    assert (32000, 122000, 52000) == (started_at, deadline, updated)
    assert 70000 == deadline - 52000  # type: ignore[operator]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_f44_pause_while_a_turn_runs_and_it_is_still_open_at_resume(tmp_path: Path) -> None:
    """With t-1 still open, resume at 50 000 credits the whole 20 000 ms pause."""
    fx, _ = _budget_90(tmp_path)
    fx.request("run.pause", None, run_id=RUN, at=30000)

    resumed = fx.request("run.resume", None, run_id=RUN, at=50000)

    assert "accepted" == resumed.outcome
    assert (30000, 120000, "waiting", 50000) == _attempt(fx)
    assert "started" == fx.existing("workflow_turns", workflow_turn_id="t-1")["state"]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_f44_a_resume_in_the_millisecond_of_its_pause_credits_nothing(tmp_path: Path) -> None:
    """DOMAIN §10.3 and §10.1: a pause of 0 ms with the turn still open shifts by 0, a no-op."""
    fx, _ = _budget_90(tmp_path)
    fx.request("run.pause", None, run_id=RUN, at=30000)
    shifted = fx.events(DeadlineShifted.TAG)

    resumed = fx.request("run.resume", None, run_id=RUN, at=30000)

    assert "accepted" == resumed.outcome
    assert (10000, 100000) == _attempt(fx)[:2]
    assert shifted == fx.events(DeadlineShifted.TAG)
    fx.assert_rebuild_equals_live()
    fx.close()


def test_f45_session_disconnect_and_reconnect(tmp_path: Path) -> None:
    """Closing C1 interrupts the attempt; C2's first report credits the 15 000 ms away."""
    fx = fixture_with_budget(tmp_path / "s.db", 85000)
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-1", at=5000)
    assert (5000, 90000, "waiting", 5000) == _attempt(fx)

    assert fx.host.detach("s-1", 40000, epoch)

    assert (5000, 90000, "interrupted", 40000) == _attempt(fx)
    assert fx.row("session_coordinators", target_session_id="s-1") is None

    second = watch(fx, connection="C2", at=50000)
    assert "accepted" == branch(fx, second, {M1: "e-1"}, at=55000).outcome

    assert (20000, 105000, "waiting", 55000) == _attempt(fx)
    assert "started" == fx.existing("workflow_turns", workflow_turn_id="t-1")["state"]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_f46_host_recovery_with_a_previous_heartbeat(tmp_path: Path) -> None:
    """Recovery credits 130 000 - 100 000; the coordinator's report credits 15 000 more."""
    fx = fixture_with_budget(tmp_path / "s.db", 115000)
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    turn(fx, epoch, M1, "t-0", at=85000)
    turn(fx, epoch, M1, "t-0", stop="completed", response="e-2", at=90000)
    turn(fx, epoch, M1, "t-1", at=90000)
    assert (85000, 200000, "waiting", 85000) == _attempt(fx)

    assert 1 == fx.host.recover(130000, 100000)

    assert (115000, 230000, "interrupted", 130000) == _attempt(fx)

    second = watch(fx, connection="C2", at=140000)
    assert "accepted" == branch(fx, second, {M1: "e-1"}, at=145000).outcome

    assert (130000, 245000, "waiting", 145000) == _attempt(fx)
    assert "started" == fx.existing("workflow_turns", workflow_turn_id="t-1")["state"]
    fx.assert_rebuild_equals_live()
    fx.close()


def _with_turn(fx: Fixture, run_id: str, session: str, timeout_ms: int | None) -> str:
    """``run_id`` parked on a request in ``session`` with a started step turn at 2 000."""
    step = interactive_run(fx, run_id, session=session, timeout_ms=timeout_ms, at=1000)
    epoch = coordinate(fx, {step: f"e-{run_id}"}, session=session, at=2000)
    started = turn(fx, epoch, step, f"t-{run_id}", run_id=run_id, session=session, at=2000)
    assert "accepted" == started.outcome, started
    return step


def test_f47_expiry_selection(tmp_path: Path) -> None:
    """Only unpaused live runs past their deadline with a started turn, earliest deadline first."""
    fx = Fixture(tmp_path / "s.db")
    _with_turn(fx, "run-x", "s-x", 58000)  # (a) deadline 60 000
    step_b = interactive_run(fx, "run-y", session="s-y", timeout_ms=58000, at=1000)
    coordinate(fx, {step_b: "e-y"}, session="s-y", at=2000)  # (b) 59 000, no turn
    _with_turn(fx, "run-p", "s-p", 48000)  # (c) 50 000, paused below
    _with_turn(fx, "run-c", "s-c", 48000)  # (d) 50 000, queue ended below
    _with_turn(fx, "run-n", "s-n", None)  # (e) no deadline
    _with_turn(fx, "run-b", "s-b", 48000)
    _with_turn(fx, "run-a", "s-a", 53000)
    assert "accepted" == fx.request("run.pause", None, run_id="run-p", at=3000).outcome
    deadlines = {
        row["run_id"]: row["deadline_at"]
        for row in fx.rows("node_attempts")
        if row["run_id"] in ("run-x", "run-y", "run-p", "run-c", "run-n", "run-b", "run-a")
    }
    assert {
        "run-x": 60000,
        "run-y": 59000,
        "run-p": 50000,
        "run-c": 50000,
        "run-n": None,
        "run-b": 50000,
        "run-a": 55000,
    } == deadlines
    # No operation leaves a queue ``done`` while its request is still pending,
    # so (d) is checked on a rebuilt copy with that one column changed.
    copy = sqlite3.connect(":memory:")
    try:
        rebuild_into(copy, fx.store.entries())
        copy.execute("UPDATE run_queue SET status = 'done' WHERE run_id = 'run-c'")
        selected = candidates(_reading(_Rows(copy), 60000)[0])
    finally:
        copy.close()

    assert ["run-b", "run-a", "run-x"] == [row.run_id for row in selected]

    assert "accepted" == fx.request("run.cancel", None, run_id="run-c", at=3000).outcome
    assert "cancelled" == fx.existing("run_queue", run_id="run-c")["status"]
    live = candidates(_reading(fx.store.reader(), 60000)[0])
    assert ["run-b", "run-a", "run-x"] == [row.run_id for row in live]
    assert [] == candidates(_reading(fx.store.reader(), 49999)[0])
    assert [("run-b", "s-b"), ("run-a", "s-a"), ("run-x", "s-x")] == fx.host.expire(60000)
    assert 3 == fx.events("run.interaction_timeout_started")
    fx.assert_rebuild_equals_live()
    fx.close()


def test_f47_expiry_skips_interrupted_attempts_and_absent_coordinators(tmp_path: Path) -> None:
    """pwf's reading of §15.2: a run whose session lost its coordinator does not expire yet."""
    fx = Fixture(tmp_path / "s.db")
    _with_turn(fx, "run-a", "s-a", 53000)
    _with_turn(fx, "run-b", "s-b", 48000)
    epoch_b = fx.existing("session_coordinators", target_session_id="s-b")["coordinator_epoch"]
    assert fx.host.detach("s-b", 3000, epoch_b)

    assert ["run-b", "run-a"] == [
        row.run_id for row in candidates(_reading(fx.store.reader(), 60000)[0])
    ]
    assert [("run-a", "s-a")] == fx.host.expire(60000)
    assert "pending" == fx.existing("interactive_requests", run_id="run-b")["status"]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_f48_beginning_a_timeout(fx: Fixture) -> None:
    """The expired request is cancelled, the run finishes it and the validating submission fails."""
    epoch = coordinate(fx, {M1: "e-1"}, at=1000)
    turn(fx, epoch, M1, "t-1", at=1000)
    fx.submit({"reply": "x"}, at=2000)
    assert "validating" == fx.existing("interactive_submissions", submission_id="sub-1")["outcome"]
    assert (1000, 61000, "waiting", 1000) == _attempt(fx)

    assert [(RUN, "s-1")] == fx.host.expire(61000)

    request = fx.existing("interactive_requests", request_id=REQUEST)
    assert ("cancelled", 2) == (request["status"], request["revision"])
    run = fx.existing("runs", run_id=RUN)
    assert ("running", "finishing expired interaction deadline", None) == (
        run["status"],
        run["status_detail"],
        run["finished_at"],
    )
    queue = fx.existing("run_queue", run_id=RUN)
    assert ("starting", None, None) == (
        queue["status"],
        queue["error_code"],
        queue["error_message"],
    )
    submission = fx.existing("interactive_submissions", submission_id="sub-1")
    assert ("rejected", {"error": EXPIRED, "status": "rejected"}) == (
        submission["outcome"],
        fx.blob(submission["receipt_hash"]),
    )
    started = [
        entry.event
        for entry in fx.store.entries()
        if isinstance(entry.event, InteractionTimeoutStarted)
    ]
    assert [(RUN, REQUEST, ATTEMPT)] == [
        (event.run_id, event.request_id, event.attempt_id) for event in started
    ]
    fx.assert_rebuild_equals_live()
