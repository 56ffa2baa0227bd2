"""``state.backup`` (DOMAIN §13.1) and scenario B.17's recorded maintenance rejection."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from tests.integration._harness import Fixture
else:
    from _harness import Fixture


def test_b17_backup_then_adopted_and_relative_rejection_recorded(tmp_path: Path) -> None:
    """One backup is made, the same key adopts it, and a relative destination is recorded."""
    fx = Fixture.f(tmp_path / "s.db")
    destination = tmp_path / "backups" / "a.sqlite"
    payload = {"destination": str(destination)}
    first = fx.request("state.backup", payload, key="backup-1", rid="b-1", at=5000)
    second = fx.request("state.backup", payload, key="backup-1", rid="b-2", at=5001)
    assert ("accepted", {"destination": str(destination)}) == (first.outcome, first.receipt)
    assert ("adopted", first.receipt) == (second.outcome, second.receipt)
    assert 1 == fx.count("host_commands", operation="state.backup")
    relative = {"destination": "backups/a.sqlite"}
    rejected = fx.request("state.backup", relative, key="backup-2", at=6000)
    again = fx.request("state.backup", relative, key="backup-2", at=7000)
    assert ("rejected", "destination must be an absolute path") == (
        rejected.outcome,
        rejected.error,
    )
    assert ("rejected", rejected.error) == (again.outcome, again.error)
    assert 2 == fx.count("host_commands", operation="state.backup")
    fx.assert_rebuild_equals_live()


def test_backup_is_private_and_verifies(tmp_path: Path) -> None:
    """The copy is mode 0600 in a 0700 directory and its chain and projections check out."""
    fx = Fixture.f(tmp_path / "s.db")
    destination = tmp_path / "new" / "dir" / "copy.sqlite"
    response = fx.request("state.backup", {"destination": str(destination)}, at=5000)
    assert "accepted" == response.outcome
    assert 0o600 == stat.S_IMODE(destination.stat().st_mode)
    assert 0o700 == stat.S_IMODE(destination.parent.stat().st_mode)
    with SqliteStore(destination, read_only=True) as copy:
        report = copy.verify()
    assert report.ok
    assert report.head.seq == fx.events() - 1  # everything before the backup's own record


def test_backup_onto_the_live_file_is_refused(tmp_path: Path) -> None:
    """The destination must differ from the live database; the refusal is recorded."""
    fx = Fixture.f(tmp_path / "s.db")
    response = fx.request(
        "state.backup", {"destination": str(fx.store.projections_file.path)}, at=5000
    )
    assert ("rejected", "destination must differ from the live database") == (
        response.outcome,
        response.error,
    )
    assert fx.store.verify().ok


def test_cli_state_backup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pwf state backup DEST`` makes the copy; a relative DEST is read from the working directory.

    The original's CLI resolves a relative destination; only the protocol
    operation insists on an absolute one (DOMAIN §13.1, ADR 0079).
    """
    from click.testing import CliRunner  # noqa: PLC0415 - only this test needs the CLI

    from pwf.cli import cli  # noqa: PLC0415 - same as above

    fx = Fixture.f(tmp_path / "s.db")
    fx.close()
    destination = tmp_path / "b" / "copy.sqlite"
    runner = CliRunner()
    ok = runner.invoke(cli, ["state", "backup", str(destination), "--db", str(tmp_path / "s.db")])
    assert (0, f"backed up to {destination}\n") == (ok.exit_code, ok.output)
    monkeypatch.chdir(tmp_path)
    relative = runner.invoke(cli, ["state", "backup", "rel.sqlite", "--db", str(tmp_path / "s.db")])
    assert (0, f"backed up to {tmp_path / 'rel.sqlite'}\n") == (
        relative.exit_code,
        relative.output,
    )
    assert (tmp_path / "rel.sqlite").is_file()


def test_failed_copy_is_a_recorded_rejection_and_leaves_no_file(tmp_path: Path) -> None:
    """A destination under a regular file cannot be written: rejected, recorded, nothing made."""
    fx = Fixture.f(tmp_path / "s.db")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    destination = blocker / "copy.sqlite"
    response = fx.request("state.backup", {"destination": str(destination)}, at=5000)
    assert "rejected" == response.outcome
    assert response.error is not None
    assert response.error.startswith(f"backup to {destination} failed:")
    assert 1 == fx.count("host_commands", operation="state.backup")
    assert not destination.exists()
    assert fx.store.verify().ok


def test_the_placed_backup_is_synced_into_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the rename the folder is synced, so the backup's name survives a power cut."""
    import pwf.host._backup as backup  # noqa: PLC0415 - the module whose sync is watched

    synced: list[Path] = []
    monkeypatch.setattr(backup, "sync", synced.append)
    fx = Fixture.f(tmp_path / "s.db")
    destination = tmp_path / "backups" / "a.sqlite"
    response = fx.request("state.backup", {"destination": str(destination)}, at=5000)
    assert "accepted" == response.outcome
    assert [destination.parent] == synced


def test_what_an_earlier_attempt_left_beside_the_partial_file_is_removed(tmp_path: Path) -> None:
    """What SQLite left beside an earlier attempt's ``.partial`` file goes with it."""
    fx = Fixture.f(tmp_path / "s.db")
    destination = tmp_path / "a.sqlite"
    left = tmp_path / "a.sqlite.partial-shm"
    left.write_bytes(b"an earlier attempt's shared memory")
    response = fx.request("state.backup", {"destination": str(destination)}, at=5000)
    assert "accepted" == response.outcome
    assert not left.exists()
    with SqliteStore(destination, read_only=True) as copy:
        assert copy.verify().ok
