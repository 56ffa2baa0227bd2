"""A supervising host's claim finds its candidates in SQL and judges the first few (ADR 0117).

Before, every claim read each queued and parked run's rows in turn: with
10 000 runs parked on questions nobody had answered yet, a claim held the
writer for a quarter of a second, and a host claims after every answer.
:data:`pwf.commands.workers.CLAIM_CANDIDATES` leaves out in SQLite the
parked runs :func:`pwf.commands.workers.claimable` refuses; these tests hold
:func:`pwf.commands.supervision.launchable` to the whole scan it replaced,
in the same order, over every kind of parked run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pwf.commands import Context, supervision
from pwf.commands.runs import get_run, queue_of
from pwf.commands.workers import CLAIM_CANDIDATES, claimable

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from pathlib import Path

    from tests.integration._harness import Fixture, edit, interactive_run, start_run
else:
    from _harness import Fixture, edit, interactive_run, start_run

NOW = 10**13
"""Past every lease the fixture's workers hold."""


def _every_row(ctx: Context, busy: Collection[str]) -> list[str]:
    """The claim's candidates as the whole scan found them before ADR 0117: the oracle."""
    rows = ctx.all(
        "SELECT r.run_id FROM interactive_submissions s JOIN interactive_requests r"
        " ON r.request_id = s.request_id WHERE s.outcome = 'validating'"
        " ORDER BY s.submitted_at, s.submission_id"
    )
    rows += ctx.all(
        "SELECT run_id FROM run_queue WHERE status IN ('queued', 'parked')"
        " ORDER BY created_at, run_id"
    )
    chosen: list[str] = []
    for row in rows:
        run_id = row["run_id"]
        if run_id in busy or run_id in chosen:
            continue
        run, queue = get_run(ctx, run_id), queue_of(ctx, run_id)
        if run is None or queue is None:
            continue
        if queue.owner_worker_epoch is not None and queue.held(ctx.now):
            continue
        if claimable(ctx, run, queue) or supervision._validating(ctx, run_id):
            chosen.append(run_id)
    return chosen


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Queued runs and parked runs of every kind, created in an interleaved order.

    ``run-1`` is parked with a submission being validated; ``p-0`` to ``p-7``
    are parked on a pending request, of which ``p-1`` is then answered,
    ``p-2`` paused, ``p-3`` checkpointed, ``p-4`` ended, ``p-5`` answered
    and paused, ``p-6`` answered and checkpointed; ``q-0`` to ``q-3`` are
    queued between them.
    """
    path = tmp_path / "s.db"
    fx = Fixture.f(path)
    fx.submit({"ok": True})  # recorded as validating: its worker is not there to say
    assert fx.count("interactive_submissions", outcome="validating") == 1
    for number in range(8):
        interactive_run(fx, f"p-{number}", session=f"s-p-{number}", at=2000 + 10 * number)
        if number % 2 == 0:
            start_run(fx, f"q-{number // 2}", session=f"s-q-{number}", at=2005 + 10 * number)
    fx.close()
    answered = (
        "UPDATE interactive_requests SET status = 'settled', accepted_submission_id = 'x',"
        " settled_at = 1 WHERE run_id IN ('p-1', 'p-5', 'p-6')"
    )
    checkpoint = (
        "INSERT INTO run_checkpoints (run_id, node_id, created_at, updated_at)"
        " VALUES ({}, 'n', 1, 1)"
    )
    edit(
        path,
        answered,
        "UPDATE runs SET paused = 1 WHERE run_id IN ('p-2', 'p-5')",
        checkpoint.format("'p-3'"),
        checkpoint.format("'p-6'"),
        "UPDATE runs SET status = 'failed' WHERE run_id = 'p-4'",
    )
    return path


def _ctx(path: Path) -> Iterator[Context]:
    from pwf.store.opening import open_file  # noqa: PLC0415

    with open_file(path, read_only=True) as store:
        yield Context(store.reader(), lambda _events: None, NOW)


def test_the_candidates_are_the_whole_scans_in_its_order(db: Path) -> None:
    for ctx in _ctx(db):
        expected = ["run-1", "q-0", "p-1", "q-1", "q-2", "q-3"]
        assert _every_row(ctx, ()) == expected
        assert supervision.launchable(ctx, ()) == expected
        assert supervision.launchable(ctx, (), most=2) == expected[:2]
        assert supervision.launchable(ctx, {"run-1", "q-1"}, most=3) == ["q-0", "p-1", "q-2"]
        assert supervision.launchable(ctx, {"run-1", "q-1"}) == _every_row(ctx, {"run-1", "q-1"})


def test_sql_leaves_out_only_parked_runs_the_rule_refuses(db: Path) -> None:
    for ctx in _ctx(db):
        found = [row["run_id"] for row in ctx.all(CLAIM_CANDIDATES)]
        assert found == ["run-1", "q-0", "p-1", "q-1", "q-2", "q-3"]
        every = ctx.all("SELECT run_id FROM run_queue WHERE status IN ('queued', 'parked')")
        for row in every:
            run, queue = get_run(ctx, row["run_id"]), queue_of(ctx, row["run_id"])
            assert run is not None
            assert queue is not None
            assert claimable(ctx, run, queue) == (row["run_id"] in found), row["run_id"]


def test_a_claim_reads_the_rows_of_its_first_few_candidates_only(db: Path) -> None:
    """Parked runs waiting on people cost a claim no statement of their own."""
    from pwf.store.opening import open_file  # noqa: PLC0415

    with open_file(db, read_only=True) as store:
        reader = store.reader()
        statements: list[str] = []
        reader.connection.set_trace_callback(statements.append)
        ctx = Context(reader, lambda _events: None, NOW)
        assert supervision.launchable(ctx, (), most=2) == ["run-1", "q-0"]
        read_first = len(statements)
        statements.clear()
        assert len(_every_row(ctx, ())) == 6
    assert read_first <= 2 + 2 * 5  # two lists, then each of two candidates' rows and rules
    assert len(statements) > 3 * read_first  # the whole scan read every parked run's rows


def test_runs_skipped_past_the_bound_send_the_claim_to_the_whole_list(db: Path) -> None:
    """Queued runs a live lease still holds are read but not chosen: the claim reads on."""
    edit(
        db,
        "UPDATE run_queue SET owner_worker_epoch = 'w-x', lease_expires_at = 100000000000000"
        " WHERE run_id IN ('q-0', 'q-1', 'q-2')",
    )
    for ctx in _ctx(db):
        every = _every_row(ctx, ())
        assert every == ["run-1", "p-1", "q-3"]
        for most in range(1, 5):
            assert supervision.launchable(ctx, (), most=most) == every[:most]
