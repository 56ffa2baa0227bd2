"""The ``runs`` read model's kept totals (ADR 0094) against the aggregates they stand for.

``runs_totals`` holds the count of queue entries, of queue entries with a run
(the run list's ``total``), the sum of the runs' revisions (the run list's
revision) and the lifecycle contradictions (HOST §3.1), kept by triggers as
the rows change.  On a log of the demo traffic they equal the aggregates, a
rebuild folds the same row, every kind of row change keeps them equal, and
reading them costs the same whatever the number of runs.
"""

from __future__ import annotations

import shutil
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.commands import Context
from pwf.fold import rebuild as rebuild_module
from pwf.projections.run_totals import TOTALS_FILL
from pwf.store.sqlite import SqliteStore
from pwf.views.runs import list_revision, list_total
from pwf.views.status import allowed_pair, contradictions

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import traffic_module
else:
    from _harness import traffic_module

AGGREGATES = (
    "SELECT (SELECT count(*) FROM run_queue),"  # noqa: S608 - constants
    " (SELECT count(*) FROM run_queue q JOIN runs r USING (run_id)),"
    " (SELECT coalesce(sum(revision), 0) FROM runs),"
    " (SELECT count(*) FROM runs r JOIN run_queue q ON q.run_id = r.run_id"
    f" WHERE NOT ({allowed_pair('r.status', 'q.status')}))"
)
"""What the kept row stands for, asked of every row (the statements before ADR 0094)."""
KEPT = "SELECT queue_rows, listed, revisions, contradictions FROM runs_totals WHERE id = 1"
OLD_REVISION = (
    "SELECT (SELECT count(*) FROM run_queue)"
    " || ':' || (SELECT coalesce(sum(revision), 0) FROM runs)"
    " || ':' || (SELECT coalesce(max(updated_at), 0) FROM run_queue)"
    " || ':' || (SELECT coalesce(max(updated_at), 0) FROM workflow_messages)"
    " || ':' || (SELECT coalesce(max(coalesce(ended_at, started_at)), 0) FROM workflow_turns)"
)
"""HOST §2.8's list revision as it was read before ADR 0094."""


def _cli(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of the demo traffic with sessions: runs finished, cancelled, restarted, waiting."""
    db = tmp_path_factory.mktemp("totals") / "state.db"
    _cli("init", "--db", str(db))
    traffic = traffic_module().Traffic(str(db), 11, sessions=True)
    traffic.batch(range(1, 25))
    traffic.store.close()
    return db


def _copy(seeded: Path, tmp_path: Path) -> Path:
    db = tmp_path / "copy.db"
    shutil.copy(seeded, db)
    return db


def test_the_kept_totals_equal_the_aggregates_and_a_rebuild_folds_them_again(
    seeded: Path, tmp_path: Path
) -> None:
    connection = sqlite3.connect(seeded)
    try:
        kept, wanted = (
            connection.execute(KEPT).fetchone(),
            connection.execute(AGGREGATES).fetchone(),
        )
        old = connection.execute(OLD_REVISION).fetchone()[0]
    finally:
        connection.close()
    assert kept == wanted
    assert kept[0] > 20
    assert kept[2] > kept[0]  # runs are revised
    with SqliteStore(seeded, read_only=True) as store:
        ctx = Context(store.reader(), lambda _events: None, 0)
        assert list_revision(ctx) == old
        assert list_total(ctx) == wanted[1]
        assert contradictions(ctx) == wanted[3] == 0
    assert "projections equal the log" in _cli("verify", "--db", str(seeded))
    db = _copy(seeded, tmp_path)
    _cli("rebuild", "--db", str(db))
    assert "runs_totals" in _cli("digest", str(db))
    assert _cli("digest", str(db)) == _cli("digest", str(seeded))


EDITS = (
    # queue entries of finished runs said parked: three contradictions
    (
        "UPDATE run_queue SET status = 'parked' WHERE run_id IN"
        " (SELECT run_id FROM runs WHERE status = 'completed' ORDER BY run_id LIMIT 3)"
    ),
    # a run's status changes alone, then with its revision
    (
        "UPDATE runs SET status = 'cancelled' WHERE run_id IN"
        " (SELECT run_id FROM runs WHERE status = 'completed' ORDER BY run_id DESC LIMIT 1)"
    ),
    (
        "UPDATE runs SET status = 'failed', revision = revision + 2 WHERE run_id IN"
        " (SELECT run_id FROM runs WHERE status = 'completed' ORDER BY run_id DESC LIMIT 1)"
    ),
    # revisions alone, several rows at once
    (
        "UPDATE runs SET revision = revision + 5 WHERE run_id IN"
        " (SELECT run_id FROM runs ORDER BY run_id LIMIT 4)"
    ),
    # the parked ones put back
    (
        "UPDATE run_queue SET status = 'done' WHERE status = 'parked' AND run_id IN"
        " (SELECT run_id FROM runs WHERE status = 'completed')"
    ),
    # a queue entry without its run, a run without its entry, rows renamed
    "DELETE FROM run_queue WHERE run_id = (SELECT min(run_id) FROM run_queue)",
    (
        "INSERT INTO run_queue (run_id, status, created_at, updated_at)"
        " VALUES ('orphan', 'queued', 1, 1)"
    ),
    "DELETE FROM runs WHERE run_id = (SELECT max(run_id) FROM runs)",
    "UPDATE run_queue SET run_id = 'renamed' WHERE run_id = (SELECT min(run_id) FROM run_queue)",
    "UPDATE runs SET run_id = 'orphan' WHERE run_id = (SELECT max(run_id) FROM runs)",
    (
        "UPDATE runs SET run_id = 'run-renamed', status = 'cancelled' WHERE run_id ="
        " (SELECT min(run_id) FROM runs WHERE status = 'completed')"
    ),
    "DELETE FROM runs",
    "DELETE FROM run_queue",
)


@pytest.mark.parametrize("rebuilt", [False, True], ids=["as written", "after a rebuild"])
def test_every_change_of_a_row_keeps_the_totals_equal_to_the_aggregates(
    seeded: Path, tmp_path: Path, *, rebuilt: bool
) -> None:
    """After a rebuild too: its fold made the row from the tables and its triggers after."""
    db = _copy(seeded, tmp_path)
    if rebuilt:
        _cli("rebuild", "--db", str(db))
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        for edit in EDITS:
            changed = connection.execute(edit).rowcount
            assert changed > 0, edit
            kept = connection.execute(KEPT).fetchone() or (0, 0, 0, 0)
            assert kept == connection.execute(AGGREGATES).fetchone(), edit
        # no queue entry and no run left: no row, as a fold of a log without runs leaves none
        assert connection.execute(KEPT).fetchone() is None
    finally:
        connection.close()


def _steps(db: Path) -> int:
    """SQLite's virtual-machine steps to read the run list's revision and total and
    ``host.status``'s contradictions."""
    with SqliteStore(db, read_only=True) as store:
        counted = [0]

        def tick() -> int:
            counted[0] += 1
            return 0

        ctx: Any = Context(store.reader(), lambda _events: None, 0)
        store.connection.set_progress_handler(tick, 1)
        list_revision(ctx)
        list_total(ctx)
        contradictions(ctx)
        store.connection.set_progress_handler(None, 0)
    return counted[0]


def test_the_fill_makes_the_row_the_triggers_keep(seeded: Path, tmp_path: Path) -> None:
    """``TOTALS_FILL`` run on the tables after each edit gives the row the triggers kept."""
    db = _copy(seeded, tmp_path)
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        for edit in EDITS:
            connection.execute(edit)
            kept = connection.execute(KEPT).fetchone()
            connection.execute("SAVEPOINT fill")
            for statement in TOTALS_FILL:
                connection.execute(statement)
            assert connection.execute(KEPT).fetchone() == kept, edit
            connection.execute("ROLLBACK TO fill")
            connection.execute("RELEASE fill")
    finally:
        connection.close()


def test_reading_the_totals_costs_the_same_with_thousands_more_runs(
    seeded: Path, tmp_path: Path
) -> None:
    db = _copy(seeded, tmp_path)
    before = _steps(db)
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        connection.execute("BEGIN")
        for copy in range(250):
            connection.execute(
                "INSERT INTO runs SELECT 'c' || ? || '-' || run_id, parent_run_id, root_run_id,"
                " lineage_kind, restart_number, parent_terminal_fingerprint, project_path,"
                " workflow_name, workflow_ref, workflow_source, definition_digest,"
                " definition_snapshot_hash, launch_options_hash, origin_session_id, execution_mode,"
                " status, paused, paused_at, status_detail, revision, input_hash,"
                " final_output_hash, error_hash, error_code, presentation_prompt_hash, created_at,"
                " updated_at, finished_at FROM runs"
                " WHERE run_id NOT LIKE 'c%' AND parent_run_id IS NULL",
                (copy,),
            )
            connection.execute(
                "INSERT INTO run_queue SELECT 'c' || ? || '-' || run_id, origin_session_id,"
                " status, generation, owner_worker_epoch, lease_expires_at, error_code,"
                " error_message, created_at, updated_at FROM run_queue WHERE run_id IN"
                " (SELECT run_id FROM runs WHERE run_id NOT LIKE 'c%' AND parent_run_id IS NULL)",
                (copy,),
            )
        connection.execute("COMMIT")
        runs = connection.execute("SELECT count(*) FROM runs").fetchone()[0]
        assert connection.execute(KEPT).fetchone() == connection.execute(AGGREGATES).fetchone()
    finally:
        connection.close()
    assert runs > 5_000
    after = _steps(db)
    assert after <= before + 20, (before, after)


def test_a_swap_that_would_make_a_trigger_before_its_table_is_refused_and_changes_nothing(
    seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap's guard (ADR 0108): a trigger placed before the table it watches is refused.

    No read model's DDL does that; one that did would have the trigger fire on
    the copied rows and leave the kept totals wrong, so the rebuild stops with
    one line and the file keeps its rows.
    """
    db = _copy(seeded, tmp_path)
    before = _cli("digest", str(db))
    order = rebuild_module._ddl_order()
    assert order["runs_totals_insert"] > order["runs"]
    monkeypatch.setattr(rebuild_module, "_ddl_order", lambda: {**order, "runs_totals_insert": -1})
    result = CliRunner().invoke(cli, ["rebuild", "--db", str(db)])
    assert result.exit_code != 0
    assert result.output.strip().splitlines()[-1] == (
        "Error: cannot recreate trigger runs_totals_insert: its table runs comes after it"
    ), result.output
    assert "Traceback" not in result.output
    monkeypatch.undo()
    assert _cli("digest", str(db)) == before
    assert "projections equal the log" in _cli("verify", "--db", str(db))
