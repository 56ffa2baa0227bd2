"""Conformance scenarios H53-H57: prune options, cutoff, selection, guards and apply (§13.2).

Run ``a1`` is fixture F's ``run-1``, driven through the command path so it
owns messages, attempts, a request and recorded commands.  The other runs
of scenario 55 are facts seeded straight into the log: a prune selects from
whatever the log holds, and some of these situations (a completed run that
still has a queued follow-up, a finished run whose lease is held) are not
reachable through today's deciders.  ``d1``'s held lease is set on the
projection itself, which no event can produce (finishing a run frees its lease).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Final

import msgspec
import pytest

if TYPE_CHECKING:
    from tests.integration._harness import RUN, Fixture, finish_fixture_run
    from tests.integration._pruning import prune_failure
else:
    from _harness import RUN, Fixture, finish_fixture_run
    from _pruning import prune_failure

from pwf.events import (
    Actor,
    Event,
    FollowUpQueued,
    RunClaimed,
    RunFinished,
    RunReserved,
    RunStarted,
)

if TYPE_CHECKING:
    from pathlib import Path

if TYPE_CHECKING:
    from tests._dbfile import change
else:
    from _dbfile import change

A1: Final = RUN
NOW: Final = 10_000
CUTOFF: Final = "1970-01-01T00:00:05.000Z"
SEED: Final = Actor(type="system", id="seed")
_QUEUE: Final = {
    "completed": "done",
    "failed": "failed",
    "timed_out": "failed",
    "cancelled": "cancelled",
}

pytestmark = pytest.mark.sqlite_only("prune backs up and prunes the SQLite file itself")


def _reserved(run_id: str, *, parent: str | None = None, options: object = None) -> RunReserved:
    lineage = {
        "lineage_kind": "restart",
        "restart_number": 1,
        "parent_terminal_fingerprint": "0" * 64,
    }
    return RunReserved(
        run_id=run_id,
        root_run_id=parent or run_id,
        parent_run_id=parent,
        project_path="/p",
        workflow_name="echo",
        workflow_ref="builtin:echo",
        workflow_source=msgspec.Raw(
            b'{"mounted":[],"root":{"id":"echo","kind":"builtin","revision":"test"}}'
        ),
        definition_digest="d1",
        input=msgspec.Raw(b"{}"),
        launch_options=msgspec.Raw(msgspec.json.encode(options or {})),
        **(lineage if parent else {}),  # type: ignore[arg-type]
    )


def _finished(run_id: str, status: str) -> RunFinished:
    return RunFinished(run_id=run_id, status=status, queue_status=_QUEUE[status], detail=status)  # type: ignore[arg-type]


def _seed(fx: Fixture, at: int, *events: Event) -> None:
    fx.store.append(list(events), at=at, actor=SEED)


def _follow_up(run_id: str) -> FollowUpQueued:
    return FollowUpQueued(
        follow_up_id=f"follow-up-{run_id}",
        run_id=run_id,
        request_id=f"fu-{run_id}",
        order_number=1,
        target_session_id="s-c",
        actor_type="session",
        source_type="prompt",
        prompt="Write the changelog",
    )


def scenario_55(db: Path, *, lease_on_projection: bool = True) -> Fixture:
    """Scenario 55's runs: a1 (= run-1) and a2 eligible, b, c, d blocked, e1 not eligible.

    With ``lease_on_projection`` ``d1``'s lease is written on its queue row
    directly, the exact situation of the scenario; the projections then no
    longer equal their log, which a backup refuses.  Without it the lease
    comes from a claim logged after ``d1`` finished, which also puts its
    queue row back to ``starting``: ``d1`` stays blocked, by its queue first.
    """
    fx = Fixture.f(db)
    finish_fixture_run(fx, "failed", at=1000)
    fx.request("run.status", {}, run_id=A1, key="status-a1", rid="status-a1", at=1000)
    _seed(fx, 1500, _reserved("a2", parent=A1))
    _seed(fx, 2000, _finished("a2", "failed"))
    _seed(fx, 900, _reserved("b1"), _reserved("c1"), _reserved("d1"), _reserved("e1"))
    _seed(fx, 1000, _finished("b1", "completed"))
    _seed(fx, 1100, _reserved("b2", options={"restartLineage": {"parentRunId": "b1"}}))
    _seed(
        fx,
        1100,
        RunClaimed(
            run_id="b2",
            generation=1,
            worker_epoch="w-b2",
            lease_expires_at=NOW + 60_000,
            launch=msgspec.Raw(b"{}"),
        ),
        RunStarted(run_id="b2", worker_epoch="w-b2", detail="running"),
    )
    _seed(fx, 1400, _follow_up("c1"))
    _seed(fx, 1500, _finished("c1", "completed"))
    _seed(fx, 1200, _finished("d1", "timed_out"))
    _seed(fx, 5000, _finished("e1", "failed"))
    if lease_on_projection:
        change(
            fx.store.projections_file.path,
            "UPDATE run_queue SET owner_worker_epoch = 'w-d1', lease_expires_at = ?"
            " WHERE run_id = 'd1'",
            NOW + 10_000,
        )
    else:
        claim = RunClaimed(
            run_id="d1",
            generation=1,
            worker_epoch="w-d1",
            lease_expires_at=NOW + 10_000,
            launch=msgspec.Raw(b"{}"),
        )
        _seed(fx, 1300, claim)
    return fx


def _prune(fx: Fixture, key: str, **payload: object) -> Any:
    return fx.request("state.prune", payload, key=key, rid=key, at=NOW)


def _lock(db: Path) -> Path:
    return db.with_name(db.name + ".maintenance.lock")


# --------------------------------------------------------------------------- H53


def test_h53_options_are_checked_in_the_original_order(tmp_path: Path) -> None:
    fx = Fixture(tmp_path / "state.db")
    head = fx.store.head()
    answers = [
        _prune(fx, "p-1", before="yesterday", apply=True),
        _prune(fx, "p-2", before="2026-08-01", apply=True),
        _prune(fx, "p-3", before="2026-08-01", apply=False, backupPath="backups/x.sqlite"),
    ]
    assert [(a.outcome, a.error) for a in answers] == [
        ("rejected", "state prune --before requires a valid timestamp"),
        ("rejected", "state prune --apply requires --backup <absolute-path>"),
        ("rejected", "state prune backup path must be absolute"),
    ]
    # Maintenance refusals are recorded, like the original's, and delete nothing.
    assert fx.count("host_commands", operation="state.prune", outcome="rejected") == 3
    assert fx.store.head().seq == head.seq + 3
    assert not _lock(tmp_path / "state.db").exists()


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"before": 20260801}, "state prune --before requires a valid timestamp"),
        ({"before": "2026-02-30"}, "state prune --before requires a valid timestamp"),
        ({"before": "2026-08-01", "apply": "yes"}, "state prune apply must be true or false"),
        ({"before": "2026-08-01", "backupPath": 7}, "state prune backup path must be absolute"),
        ({"before": "2026-08-01", "extra": 1}, "state prune does not accept extra"),
    ],
)
def test_h53_wrong_types_and_unknown_members(
    tmp_path: Path, payload: dict[str, object], error: str
) -> None:
    fx = Fixture(tmp_path / "state.db")
    answer = _prune(fx, "p-1", **payload)
    assert (answer.outcome, answer.error) == ("rejected", error)


# --------------------------------------------------------------------------- H54


def test_h54_cutoff_is_strict_and_reported_in_utc(tmp_path: Path) -> None:
    fx = Fixture(tmp_path / "state.db")
    _seed(fx, 1, _reserved("early"), _reserved("late"))
    _seed(fx, 1_785_542_399_999, _finished("early", "completed"))
    _seed(fx, 1_785_542_400_000, _finished("late", "completed"))
    answer = fx.request(
        "state.prune", {"before": "2026-08-01"}, key="p", rid="p", at=1_785_600_000_000
    )
    assert answer.outcome == "accepted", answer
    report: Any = answer.receipt
    assert report["cutoff"] == "2026-08-01T00:00:00.000Z"
    assert (report["candidateTrees"], report["selectedRuns"]) == (1, 1)
    shifted = fx.request(
        "state.prune",
        {"before": "2026-08-01T00:00:00.000+02:00"},
        key="q",
        rid="q",
        at=1_785_600_000_000,
    )
    moved: Any = shifted.receipt
    assert moved["cutoff"] == "2026-07-31T22:00:00.000Z"  # 1 785 535 200 000
    assert (moved["candidateTrees"], moved["selectedRuns"]) == (0, 0)


# --------------------------------------------------------------------------- H55


def test_h55_tree_selection_and_blockers_in_a_dry_run(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fx = scenario_55(db)
    runs_before = fx.count("runs")
    answer = _prune(fx, "dry", before=CUTOFF, apply=False)
    assert answer.outcome == "accepted", answer
    report = dict(answer.receipt)
    assert report.pop("databaseBytesBefore") == report.pop("databaseBytesAfter") > 0
    assert report == {
        "applied": False,
        "blockedTrees": 3,
        "candidateTrees": 4,
        "cutoff": "1970-01-01T00:00:05.000Z",
        "deletedBlobBytes": 0,
        "deletedBlobs": 0,
        "deletedRows": 0,
        "selectedRuns": 2,
    }
    assert fx.count("runs") == runs_before
    assert not _lock(db).exists()


# --------------------------------------------------------------------------- H56


def test_h56_a_foreign_lock_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fx = scenario_55(db)
    _lock(db).write_text("someone else\n")
    answer = _prune(fx, "p", before=CUTOFF, apply=True, backupPath=str(tmp_path / "b" / "x.sqlite"))
    assert (answer.outcome, answer.error) == (
        "rejected",
        (
            f"State maintenance is already active: {_lock(db)}"
            " (written by another program; remove it once no maintenance is running)"
        ),
    )
    assert _lock(db).read_text() == "someone else\n"
    assert not (tmp_path / "b" / "x.sqlite").exists()
    assert fx.row("runs", run_id="a2") is not None


def test_h56_an_existing_backup_destination_deletes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fx = scenario_55(db, lease_on_projection=False)
    existing = tmp_path / "b" / "x.sqlite"
    existing.parent.mkdir()
    existing.write_bytes(b"keep me")
    runs, events = fx.count("runs"), fx.store.head().seq
    answer = _prune(fx, "p", before=CUTOFF, apply=True, backupPath=str(existing))
    assert (answer.outcome, answer.error) == (
        "rejected",
        f"Backup destination already exists: {existing}",
    )
    assert existing.read_bytes() == b"keep me"
    assert not _lock(db).exists()
    assert fx.count("runs") == runs
    assert fx.store.head().seq == events + 1  # the recorded rejection only


# --------------------------------------------------------------------------- H57


def test_h57_apply_backs_up_compacts_and_keeps_the_rest(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fx = scenario_55(db, lease_on_projection=False)
    backup = tmp_path / "b" / "new.sqlite"
    a1_commands = [row["request_id"] for row in fx.rows("host_commands", run_id=A1)]
    assert a1_commands
    answer = _prune(fx, "apply", before=CUTOFF, apply=True, backupPath=str(backup))
    assert answer.outcome == "accepted", answer
    report = answer.receipt
    assert (report["applied"], report["selectedRuns"], report["blockedTrees"]) == (True, 2, 3)
    assert report["deletedRows"] > 0
    assert report["deletedBlobs"] > 0
    # The backup: mode 0600, sound, holding the whole old log.
    assert backup.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(f"file:{backup}?mode=ro&immutable=1", uri=True) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert (
            copy.execute("SELECT count(*) FROM runs WHERE run_id IN ('run-1', 'a2')").fetchone()[0]
            == 2
        )
    # a1, a2 and everything of theirs are gone; the other trees stay.
    remaining = sorted(row["run_id"] for row in fx.rows("runs"))
    assert remaining == ["b1", "b2", "c1", "d1", "e1"]
    for table in (
        "node_attempts",
        "interactive_requests",
        "workflow_messages",
        "workflow_turns",
        "run_queue",
    ):
        assert fx.count(table, run_id=A1) == 0, table
        assert fx.count(table, run_id="a2") == 0, table
    for request_id in a1_commands:
        row = fx.row("host_commands", request_id=request_id)
        assert row is not None
        assert row["run_id"] is None
    assert not _lock(db).exists()
    # Every seq stays (ADR 0103): the log verifies, and the backup proves each removed body.
    assert fx.store.verify().ok
    assert prune_failure(fx.store, backup) is None
    fx.assert_rebuild_equals_live()
    # A retried old request of a pruned run is still adopted from its record.
    again = fx.request("run.status", {}, run_id=A1, key="status-a1", rid="status-a1", at=NOW)
    assert again.outcome == "adopted", again


def test_a_backup_that_cannot_be_written_prunes_nothing(tmp_path: Path) -> None:
    """The backup fails before anything is deleted: a recorded rejection, no lock left."""
    db = tmp_path / "state.db"
    fx = scenario_55(db, lease_on_projection=False)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the backup's directory should be\n")
    runs, head = fx.count("runs"), fx.store.head()
    answer = _prune(fx, "p", before=CUTOFF, apply=True, backupPath=str(blocker / "x.sqlite"))
    assert answer.outcome == "rejected"
    assert answer.error is not None
    assert answer.error.startswith(f"backup to {blocker / 'x.sqlite'} failed")
    assert fx.count("runs") == runs
    assert fx.store.origin().seq == 0
    assert fx.store.head().seq == head.seq + 1  # the recorded rejection only
    assert not _lock(db).exists()
    fx.assert_rebuild_equals_live()
