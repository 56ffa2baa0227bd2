"""Which expired (run, session) pairs the expiry passes over, and that the pass goes on after one.

DOMAIN §10.7: candidates are grouped by (run, target session) in deadline
order, and the host skips runs with an active worker or pending start.  pwf
also waits, for §15.2, while an attempt is ``interrupted`` (its session's
coordinator went away and the new one has not reported yet) and while the
run's session holds another queued, starting or running run.  Each test keeps
a second candidate with a later deadline that does expire, so a skip that
ended the whole pass would show.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from pwf.commands import Context, Row
from pwf.commands.expiry import begin_timeouts
from pwf.events import InteractionTimeoutStarted, MessageCancelled
from pwf.fold.bulk import rebuild_into

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import (
        Fixture,
        coordinate,
        interactive_run,
        start_run,
        turn,
        watch,
    )

    from pwf.events import Event
else:
    from _harness import Fixture, coordinate, interactive_run, start_run, turn, watch

AT = 60_000
"""When the expiry runs: after both deadlines (50 000 for run-b, 55 000 for run-a)."""


def _with_turn(fx: Fixture, run_id: str, session: str, timeout_ms: int) -> str:
    """``run_id`` parked on a request in ``session`` with a started step turn at 2 000."""
    step = interactive_run(fx, run_id, session=session, timeout_ms=timeout_ms, at=1000)
    epoch = coordinate(fx, {step: f"e-{run_id}"}, session=session, at=2000)
    started = turn(fx, epoch, step, f"t-{run_id}", run_id=run_id, session=session, at=2000)
    assert "accepted" == started.outcome, started
    return step


def _two_runs(tmp_path: Path) -> Fixture:
    """run-b expires first (deadline 50 000), then run-a (55 000), each in its own session."""
    fx = Fixture(tmp_path / "s.db")
    _with_turn(fx, "run-a", "s-a", 53000)
    _with_turn(fx, "run-b", "s-b", 48000)
    return fx


def _pending(fx: Fixture, run_id: str) -> bool:
    return bool(fx.existing("interactive_requests", run_id=run_id)["status"] == "pending")


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


def _expire_copy(fx: Fixture, *changes: str) -> tuple[list[tuple[str, str]], list[Event]]:
    """Begin the timeouts on a rebuilt copy of the read model with ``changes`` made to it.

    No operation reaches some states (a parked run whose worker still holds a
    live lease, one request with two expired candidate rows), so they are made
    on a copy; the copy only collects what the expiry would stage.
    """
    copy = sqlite3.connect(":memory:")
    try:
        rebuild_into(copy, fx.store.entries())
        for change in changes:
            copy.execute(change)
        staged: list[Event] = []
        started = begin_timeouts(Context(_Rows(copy), staged.extend, AT))
    finally:
        copy.close()
    return started, staged


def test_a_run_whose_worker_holds_a_live_lease_is_skipped(tmp_path: Path) -> None:
    """§10.7: a run with an active worker is left to its worker; the next pair still expires."""
    fx = _two_runs(tmp_path)
    live = (
        "UPDATE run_queue SET owner_worker_epoch = 'w-live', lease_expires_at = 90000"
        " WHERE run_id = 'run-b'"
    )

    assert ([("run-a", "s-a")], [("run-b", "s-b"), ("run-a", "s-a")]) == (
        _expire_copy(fx, live)[0],
        _expire_copy(fx)[0],
    )
    ended = "UPDATE run_queue SET owner_worker_epoch = 'w-old', lease_expires_at = 60000"
    assert [("run-b", "s-b"), ("run-a", "s-a")] == _expire_copy(
        fx, f"{ended} WHERE run_id = 'run-b'"
    )[0]
    fx.close()


def _second(
    table: str,
    where: str,
    renamed: tuple[str, ...],
    shifted: str | None = None,
    fixed: tuple[str, str] | None = None,
) -> str:
    """SQL that copies the rows of ``table`` matching ``where`` under ``second-`` ids."""
    names = {
        "interactive_requests": (
            "request_id, run_id, attempt_id, target_session_id, kind, contract_hash, revision,"
            " status, unproductive_turn_ends, accepted_submission_id, created_at, updated_at,"
            " settled_at, consumed_at"
        ),
        "workflow_messages": (
            "workflow_message_id, run_id, target_session_id, kind, source_id, content_hash,"
            " order_number, status, pi_session_entry_id, created_at, updated_at"
        ),
        "node_attempts": (
            "attempt_id, run_id, node_id, attempt_number, status, output_hash, started_at,"
            " deadline_at, created_at, updated_at"
        ),
        "workflow_turns": (
            "workflow_turn_id, workflow_message_id, run_id, target_session_id, state,"
            " stop_reason, response_session_entry_id, started_at, ended_at"
        ),
    }[table]
    columns = [name.strip() for name in names.split(",")]
    values = [
        f"'second-' || {name}" if name in renamed else f"{name} + 10" if name == shifted else name
        for name in columns
    ]
    if fixed is not None:
        values[columns.index(fixed[0])] = fixed[1]
    return f"INSERT INTO {table} ({names}) SELECT {', '.join(values)} FROM {table} WHERE {where}"  # noqa: S608 - the test's own names


def test_one_pair_begins_once_however_many_of_its_rows_expired(tmp_path: Path) -> None:
    """Candidates are grouped by (run, session): a second expired request of run-b adds nothing."""
    fx = _two_runs(tmp_path)
    changes = (
        # A finished earlier attempt: only one attempt of a run may be pending, running or waiting.
        _second(
            "node_attempts",
            "run_id = 'run-b'",
            ("attempt_id",),
            "attempt_number",
            ("status", "'completed'"),
        ),
        _second("interactive_requests", "run_id = 'run-b'", ("request_id", "attempt_id")),
        _second(
            "workflow_messages",
            "run_id = 'run-b'",
            ("workflow_message_id", "source_id"),
            "order_number",
        ),
        _second("workflow_turns", "run_id = 'run-b'", ("workflow_turn_id", "workflow_message_id")),
    )

    started, staged = _expire_copy(fx, *changes)

    assert [("run-b", "s-b"), ("run-a", "s-a")] == started
    begun = [event for event in staged if isinstance(event, InteractionTimeoutStarted)]
    assert [("run-b", "s-b"), ("run-a", "s-a")] == [
        (event.run_id, "s-" + event.run_id[-1]) for event in begun
    ]
    fx.close()


def test_an_interrupted_attempt_waits_for_its_sessions_new_coordinator(tmp_path: Path) -> None:
    """A coordinator that went away interrupts the attempt; no timeout until the new one reports."""
    fx = _two_runs(tmp_path)
    epoch = fx.existing("session_coordinators", target_session_id="s-b")["coordinator_epoch"]
    assert fx.host.detach("s-b", 3000, epoch)
    watch(fx, session="s-b", connection="C2", at=4000)
    assert "interrupted" == fx.existing("node_attempts", run_id="run-b")["status"]

    assert [("run-a", "s-a")] == fx.host.expire(AT)
    assert (True, False) == (_pending(fx, "run-b"), _pending(fx, "run-a"))
    fx.assert_rebuild_equals_live()
    fx.close()


def test_a_session_holding_another_active_run_waits(tmp_path: Path) -> None:
    """run-z queued in run-b's session holds its one active slot: run-b waits its turn."""
    fx = _two_runs(tmp_path)
    start_run(fx, "run-z", session="s-b", at=3000)
    assert "queued" == fx.existing("run_queue", run_id="run-z")["status"]

    assert [("run-a", "s-a")] == fx.host.expire(AT)
    assert (True, False) == (_pending(fx, "run-b"), _pending(fx, "run-a"))
    fx.assert_rebuild_equals_live()
    fx.close()


def test_a_session_without_a_coordinator_waits(tmp_path: Path) -> None:
    """With no coordinator to tell, the pair waits; the next pair still expires.

    A coordinator that detaches interrupts the attempt first (§10.5), so the
    read model reaches this skip only with its coordinator row gone.
    """
    fx = _two_runs(tmp_path)
    gone = "DELETE FROM session_coordinators WHERE target_session_id = 's-b'"

    assert [("run-a", "s-a")] == _expire_copy(fx, gone)[0]
    fx.close()


def test_beginning_a_timeout_cancels_no_message(tmp_path: Path) -> None:
    """§10.7 and §9.4: the timeout start cancels the request, not its messages.

    The original's timeout start updates the request, the run, the queue and
    the validating submissions only; a step or decision message of the
    request that is still pending stays pending (forged here, since a started
    step turn normally means the step message was sent).
    """
    fx = _two_runs(tmp_path)
    forged = (
        "UPDATE workflow_messages SET status = 'pending', pi_session_entry_id = NULL"
        " WHERE source_id = (SELECT request_id FROM interactive_requests WHERE run_id = 'run-b')"
    )

    started, staged = _expire_copy(fx, forged)

    assert [("run-b", "s-b"), ("run-a", "s-a")] == started
    assert [] == [event for event in staged if isinstance(event, MessageCancelled)]
    assert 2 == sum(isinstance(event, InteractionTimeoutStarted) for event in staged)
    fx.close()
