"""Backups and prunes work outside the write lock; a prune still compacts exactly its backup.

The copy and the prune's preparation of its compacted segment are
interrupted from inside (the copy's own check, or the fold into the scratch
file, is wrapped) to do what a concurrent writer would do at that moment:
take the write lock with no busy timeout, append events, finish a run.  A
backup lets the writer in; a prune brings its backup and its scratch file up
to the live head before it compacts, or refuses when the selection changed
meanwhile (DOMAIN §13.2, ADR 0047).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from pwf.commands.prune import iso_utc
from pwf.host import _backup
from pwf.host import prune as prune_flow
from pwf.host._compacting import Prepared
from pwf.host._lock import lock_path
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration._harness import Fixture, finish_fixture_run, start_run
    from tests.integration._pruning import prune_failure
else:
    from _harness import Fixture, finish_fixture_run, start_run
    from _pruning import prune_failure


def _write_now(db: Path) -> None:
    """What a writer with no busy timeout can do: take the write lock and commit at once."""
    connection = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("COMMIT")
    finally:
        connection.close()


def _during_the_copy(monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]) -> list[int]:
    """Run ``act`` while a backup checks its copy; count how often it ran."""
    ran: list[int] = []
    checked = _backup._verify_copy

    def wrapped(destination: Path) -> None:
        act()
        ran.append(1)
        checked(destination)

    monkeypatch.setattr(_backup, "_verify_copy", wrapped)
    return ran


def test_a_backup_holds_no_write_lock_while_it_copies(
    fx: Fixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer with no busy timeout commits in the middle of the backup."""
    ran = _during_the_copy(monkeypatch, lambda: _write_now(fx.store.projections_file.path))
    response = fx.request("state.backup", {"destination": str(tmp_path / "b.sqlite")}, at=5000)
    assert ("accepted", [1]) == (response.outcome, ran)


def test_a_prune_holds_no_write_lock_while_it_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for the prune's backup."""
    fx = Fixture.f(tmp_path / "s.db")
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    ran = _during_the_copy(monkeypatch, lambda: _write_now(fx.store.projections_file.path))
    payload = {"before": iso_utc(120_000), "apply": True, "backupPath": str(tmp_path / "p.sqlite")}
    response = fx.request("state.prune", payload, key="prune", rid="prune", at=130_000)
    assert ("accepted", [1]) == (response.outcome, ran)


def _prune(fx: Fixture, backup: Path) -> Any:
    payload = {"before": iso_utc(120_000), "apply": True, "backupPath": str(backup)}
    return fx.request("state.prune", payload, key="prune", rid="prune", at=130_000)


def test_events_committed_during_the_copy_reach_the_backup_and_the_proof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backup is brought up to the head the compaction replaces; the proof holds."""
    fx = Fixture.f(tmp_path / "s.db")
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    backup = tmp_path / "p.sqlite"
    _during_the_copy(monkeypatch, lambda: start_run(fx, "run-late", session="s-late", at=125_000))
    response = _prune(fx, backup)
    assert ("accepted", 1) == (response.outcome, response.receipt["selectedRuns"])
    with SqliteStore(backup, read_only=True) as copy:
        late = list(copy.find(run_id="run-late"))
        assert copy.verify().ok
    assert late, "the run started during the copy is not in the backup"
    assert prune_failure(fx.store, backup) is None
    assert fx.row("runs", run_id="run-late") is not None
    assert fx.row("runs", run_id="run-1") is None
    fx.assert_rebuild_equals_live()


def test_a_selection_changed_during_the_copy_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that finished before the cutoff while the backup was made changes the selection."""
    fx = Fixture.f(tmp_path / "s.db")
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    start_run(fx, "run-2", session="s-2", at=4000)

    def cancel() -> None:
        cancelled = fx.request("run.cancel", {}, run_id="run-2", key="cancel-2", at=5000)
        assert "accepted" == cancelled.outcome

    _during_the_copy(monkeypatch, cancel)
    head = fx.store.head()
    response = _prune(fx, tmp_path / "p.sqlite")
    assert ("rejected", "Prune selection changed after backup; run the command again") == (
        response.outcome,
        response.error,
    )
    assert fx.row("runs", run_id="run-1") is not None
    assert list(fx.store.find(type="log.pruned")) == []  # not pruned
    assert fx.store.head().seq > head.seq
    assert not lock_path(fx.store.projections_file.path).exists()
    fx.assert_rebuild_equals_live()


def _while_preparing(monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]) -> list[int]:
    """Run ``act`` each time the prune folds its backup into the scratch file; count the calls."""
    ran: list[int] = []
    extend = Prepared.extend

    def wrapped(self: Prepared, backup: Path, chunk: int = 10_000) -> None:
        act()
        ran.append(1)
        extend(self, backup, chunk)

    monkeypatch.setattr(Prepared, "extend", wrapped)
    return ran


def test_a_prune_holds_no_write_lock_while_it_prepares_the_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer with no busy timeout commits while the compacted segment is folded."""
    fx = Fixture.f(tmp_path / "s.db")
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    ran = _while_preparing(monkeypatch, lambda: _write_now(fx.store.projections_file.path))
    response = _prune(fx, tmp_path / "p.sqlite")
    assert ("accepted", [1]) == (response.outcome, ran)
    assert prune_failure(fx.store, tmp_path / "p.sqlite") is None


@pytest.mark.parametrize("rounds", [0, 1], ids=["tail under the lock", "tail folded off the lock"])
def test_events_committed_while_the_compaction_is_prepared_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rounds: int
) -> None:
    """Runs started meanwhile reach the backup and the compacted log; the proof holds.

    With no catch-up round left for later, the events committed while the
    scratch file was folded are sealed under the write lock; with one, the
    backup and the scratch file take them first.
    """
    fx = Fixture.f(tmp_path / "s.db")
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    monkeypatch.setattr(prune_flow, "ROUNDS", rounds)
    monkeypatch.setattr(prune_flow, "CAUGHT_UP", 1)
    started = iter(range(1, 10))

    def start() -> None:
        number = next(started)
        start_run(fx, f"run-late-{number}", session=f"s-late-{number}", at=125_000 + number)

    ran = _while_preparing(monkeypatch, start)
    backup = tmp_path / "p.sqlite"
    response = _prune(fx, backup)
    assert ("accepted", 1) == (response.outcome, response.receipt["selectedRuns"])
    assert len(ran) == 1 + rounds
    for number in range(1, len(ran) + 1):
        assert fx.row("runs", run_id=f"run-late-{number}") is not None
    with SqliteStore(backup, read_only=True) as copy:
        assert list(copy.find(run_id=f"run-late-{len(ran)}"))
    assert fx.row("runs", run_id="run-1") is None
    assert prune_failure(fx.store, backup) is None
    assert fx.store.verify(deep=True).ok
    fx.assert_rebuild_equals_live()
