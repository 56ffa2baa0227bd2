"""``pwf state restore BACKUP``: proved first, refused while held, atomic, the old file kept."""

from __future__ import annotations

import json
import sqlite3
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

    from tests._compacted import compact_by_hand
    from tests.cli._cli import PRUNE_CUTOFF, edit, one_line, prunable
else:
    from _cli import PRUNE_CUTOFF, edit, one_line, prunable

    from _compacted import compact_by_hand

Run = Callable[..., Result]
CUTOFF = PRUNE_CUTOFF


def _runs(run: Run, db: Path) -> list[str]:
    listing = run("query", "runs", "--db", str(db)).stdout.splitlines()
    return sorted(line.split()[0] for line in listing[1:])


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    """Three runs, two of them cancelled early (so a prune has one to remove)."""
    return prunable(run, tmp_path / "live.db", client_line)


@pytest.fixture
def backup(run: Run, live: Path, tmp_path: Path) -> Path:
    path = tmp_path / "backups" / "b.db"
    done = run("state", "backup", str(path), "--db", str(live), "--at", "8000")
    assert done.exit_code == 0, done.output
    return path


def _more(run: Run, live: Path, client_line: Callable[..., bytes]) -> None:
    done = run("request", "--db", str(live), stdin=client_line(4, at=9000))
    assert '"outcome":"accepted"' in done.stdout


def test_restore_puts_the_backup_back_and_keeps_the_replaced_file(
    run: Run, live: Path, backup: Path, client_line: Callable[..., bytes]
) -> None:
    _more(run, live, client_line)
    assert _runs(run, live) == ["run-1", "run-2", "run-3", "run-4"]
    done = run("state", "restore", str(backup), "--db", str(live), "--at", "10000", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    kept = live.with_name("live.db.before-restore-10000")
    assert report["kept"] == str(kept)
    assert report["compactionProved"] is False
    assert report["headSeq"] < report["replacedHeadSeq"]
    assert _runs(run, live) == ["run-1", "run-2", "run-3"]
    assert _runs(run, kept) == ["run-1", "run-2", "run-3", "run-4"]
    assert stat.S_IMODE(live.stat().st_mode) == 0o600
    assert run("verify", "--db", str(live)).exit_code == 0
    assert not list(live.parent.glob(".live.db.restoring-*"))


def test_the_human_report(run: Run, live: Path, backup: Path) -> None:
    done = run("state", "restore", str(backup), "--db", str(live), "--at", "10000")
    assert done.exit_code == 0, done.output
    first, second = done.stdout.splitlines()
    assert first.startswith(f"restored {live} from {backup}: head seq ")
    assert first.endswith("(chain and projections proved)")
    assert second.endswith(f"is kept as {live}.before-restore-10000")


def test_a_backup_that_does_not_prove_is_refused_and_nothing_changes(
    run: Run, live: Path, backup: Path
) -> None:
    edit(backup, "UPDATE runs SET workflow_name = 'forged'")
    before = live.read_bytes()
    done = run("state", "restore", str(backup), "--db", str(live))
    assert done.exit_code == 2
    line = one_line(done.stderr)
    assert line.startswith(f"Error: {backup} does not prove, so it is not restored: ")
    assert "runs" in line
    assert before == live.read_bytes()
    assert not list(live.parent.glob("live.db.before-restore-*"))


def test_refused_while_another_process_has_the_database_open(
    run: Run, live: Path, backup: Path
) -> None:
    other = sqlite3.connect(live)
    try:
        other.execute("SELECT count(*) FROM runs").fetchone()
        done = run("state", "restore", str(backup), "--db", str(live))
    finally:
        other.close()
    assert done.exit_code == 2
    assert (
        f"Error: {live} is open in another process (a writer, pwf serve or pwf web):"
        " stop it before restoring"
    ) == one_line(done.stderr)
    assert not list(live.parent.glob("live.db.before-restore-*"))


def _prune(run: Run, live: Path, saved: Path) -> None:
    done = run(
        "state", "prune", "--db", str(live), "--before", CUTOFF, "--apply",
        "--backup", str(saved), "--at", "9000",
    )  # fmt: skip
    assert done.exit_code == 0, done.output


def test_the_backup_of_a_prune_is_proved_against_its_log_compacted(
    run: Run, live: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "backups" / "pruned-from.db"
    _prune(run, live, saved)
    assert _runs(run, live) == ["run-2", "run-3"]
    restored = run("state", "restore", str(saved), "--db", str(live), "--at", "10000", "--json")
    assert restored.exit_code == 0, restored.output
    report = json.loads(restored.stdout)
    assert (report["compactionProved"], report["provedBy"]) == (True, "log.pruned")
    assert _runs(run, live) == ["run-1", "run-2", "run-3"]


def test_the_line_names_the_event_that_named_the_backup(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """A prune's backup is proved against ``log.pruned``, an old compaction's against its own."""
    saved = tmp_path / "backups" / "pruned-from.db"
    _prune(run, live, saved)
    restored = run("state", "restore", str(saved), "--db", str(live), "--at", "10000")
    assert restored.exit_code == 0, restored.output
    assert "(chain and projections, and the log.pruned that names it proved)" in restored.stdout
    compacted = tmp_path / "compacted.db"
    compacted.write_bytes(saved.read_bytes())
    kept = tmp_path / "backups" / "compacted-from.db"
    compact_by_hand(compacted, kept)
    restored = run("state", "restore", str(kept), "--db", str(compacted), "--at", "11000", "--json")
    assert restored.exit_code == 0, restored.output
    report = json.loads(restored.stdout)
    assert (report["compactionProved"], report["provedBy"]) == (True, "log.compacted")


def test_another_backup_of_a_pruned_log_is_restored_on_its_own_proof(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """Only the backup ``log.pruned`` names is proved against the prune; any other stands alone."""
    _prune(run, live, tmp_path / "backups" / "pruned-from.db")
    later = tmp_path / "backups" / "later.db"
    assert run("state", "backup", str(later), "--db", str(live), "--at", "9500").exit_code == 0
    restored = run("state", "restore", str(later), "--db", str(live), "--at", "10000", "--json")
    assert restored.exit_code == 0, restored.output
    report = json.loads(restored.stdout)
    assert (report["compactionProved"], report["provedBy"]) == (False, None)
    assert _runs(run, live) == ["run-2", "run-3"]


def test_the_backup_a_prune_names_that_does_not_prove_is_refused_and_nothing_changes(
    run: Run, live: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "backups" / "pruned-from.db"
    _prune(run, live, saved)
    edit(
        live,
        "UPDATE _pwf_pruned SET leaf = zeroblob(32) WHERE seq = (SELECT min(seq) FROM _pwf_pruned)",
    )
    before = live.read_bytes()
    done = run("state", "restore", str(saved), "--db", str(live), "--at", "10000")
    assert done.exit_code == 2
    line = one_line(done.stderr)
    assert line.startswith(
        f"Error: {saved} is the backup {live}'s log.pruned names, but it does not prove: its event"
    ), line
    assert line.endswith("is not the leaf kept"), line
    assert before == live.read_bytes()
    assert not list(live.parent.glob("live.db.before-restore-*"))


def test_restore_to_a_new_path_keeps_nothing(run: Run, backup: Path, tmp_path: Path) -> None:
    target = tmp_path / "fresh" / "state.db"
    done = run("state", "restore", str(backup), "--db", str(target), "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["kept"] is None
    assert _runs(run, target) == ["run-1", "run-2", "run-3"]


def test_a_missing_backup_is_one_line(run: Run, live: Path, tmp_path: Path) -> None:
    done = run("state", "restore", str(tmp_path / "nope.db"), "--db", str(live))
    assert done.exit_code == 2
    assert f"Error: no backup at {tmp_path / 'nope.db'}" == one_line(done.stderr)
