"""Backup destinations are compared by the file they reach, never by their text.

A destination that reaches the live database (through ``..``, a symlinked
directory or a symlinked database path), a file SQLite or pwf keeps beside
it, a directory, or a backup a compaction names is refused with one line;
the only thing appended is the recorded rejection, and the log still verifies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pwf.commands.prune import iso_utc

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import Fixture, finish_fixture_run
else:
    from _harness import Fixture, finish_fixture_run


def _backup(fx: Fixture, destination: str) -> Any:
    before = fx.events()
    response = fx.request("state.backup", {"destination": destination}, at=fx.now + 1)
    return response, fx.events() - before


def _assert_refused(fx: Fixture, destination: str, error: str) -> None:
    """Refused with ``error``; one event (the recorded rejection) appended; the log verifies."""
    live = fx.store.projections_file.path.read_bytes()
    response, appended = _backup(fx, destination)
    assert ("rejected", error) == (response.outcome, response.error)
    assert 1 == appended
    assert fx.store.verify().ok
    assert fx.store.projections_file.path.read_bytes()[:100] == live[:100]
    fx.assert_rebuild_equals_live()


def test_a_dotted_path_to_the_live_database_is_refused(tmp_path: Path) -> None:
    """``dir/../s.db`` is the live database."""
    fx = Fixture.f(tmp_path / "s.db")
    (tmp_path / "dir").mkdir()
    dotted = f"{tmp_path}/dir/../s.db"
    _assert_refused(fx, dotted, "destination must differ from the live database")


def test_a_symlinked_directory_to_the_live_database_is_refused(tmp_path: Path) -> None:
    """``link/s.db`` where ``link`` points at the database's directory."""
    (tmp_path / "state").mkdir()
    fx = Fixture.f(tmp_path / "state" / "s.db")
    (tmp_path / "link").symlink_to(tmp_path / "state")
    _assert_refused(fx, f"{tmp_path}/link/s.db", "destination must differ from the live database")


def test_a_symlinked_database_path_is_resolved(tmp_path: Path) -> None:
    """The store opened through a symlink; the real file and its WAL are both refused."""
    (tmp_path / "real").mkdir()
    Fixture.f(tmp_path / "real" / "s.db").close()
    (tmp_path / "alias.db").symlink_to(tmp_path / "real" / "s.db")
    fx = Fixture(tmp_path / "alias.db")
    _assert_refused(
        fx, str(tmp_path / "real" / "s.db"), "destination must differ from the live database"
    )
    wal = tmp_path / "real" / "s.db-wal"
    _assert_refused(fx, str(wal), f"destination is a file the live database keeps beside it: {wal}")


def test_a_symlink_named_as_destination_is_followed(tmp_path: Path) -> None:
    """A destination that is itself a symlink to the live database is the live database."""
    fx = Fixture.f(tmp_path / "s.db")
    (tmp_path / "innocent.sqlite").symlink_to(tmp_path / "s.db")
    _assert_refused(
        fx, str(tmp_path / "innocent.sqlite"), "destination must differ from the live database"
    )


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal", ".maintenance.lock"])
def test_files_beside_the_live_database_are_refused(tmp_path: Path, suffix: str) -> None:
    """SQLite's own files and the maintenance lock; none is created or replaced."""
    fx = Fixture.f(tmp_path / "s.db")
    beside = tmp_path / f"s.db{suffix}"
    existed = beside.exists()
    _assert_refused(
        fx, str(beside), f"destination is a file the live database keeps beside it: {beside}"
    )
    assert existed == beside.exists()
    assert not (tmp_path / f"s.db{suffix}.partial").exists()


def test_a_scratch_file_of_the_live_database_is_refused(tmp_path: Path) -> None:
    """``s.db.rebuild-xxxxxxxx`` is a fold's scratch file."""
    fx = Fixture.f(tmp_path / "s.db")
    scratch = tmp_path / "s.db.rebuild-abcd1234"
    _assert_refused(
        fx, str(scratch), f"destination is a scratch file of the live database: {scratch}"
    )


def test_a_directory_is_refused_before_any_copy(tmp_path: Path) -> None:
    """Nothing is written into or beside the directory."""
    fx = Fixture.f(tmp_path / "s.db")
    directory = tmp_path / "backups"
    directory.mkdir()
    _assert_refused(fx, str(directory), f"backup destination is a directory: {directory}")
    assert [] == list(directory.iterdir())
    assert not (tmp_path / "backups.partial").exists()


def test_the_backup_a_compaction_names_is_refused(tmp_path: Path) -> None:
    """Overwriting the backup of a prune would destroy the proof of the compacted log."""
    fx = Fixture.f(tmp_path / "s.db")
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    proof = tmp_path / "proof.sqlite"
    payload = {"before": iso_utc(120_000), "apply": True, "backupPath": str(proof)}
    pruned = fx.request("state.prune", payload, key="prune", rid="prune", at=130_000)
    assert "accepted" == pruned.outcome
    kept = proof.read_bytes()
    fx.now = 140_000
    named = "destination is the backup a prune, compaction or migration of this log names:"
    _assert_refused(fx, str(proof), f"{named} {proof}")
    (tmp_path / "alias").symlink_to(tmp_path)
    _assert_refused(
        fx,
        f"{tmp_path}/alias/proof.sqlite",
        f"{named} {tmp_path}/alias/proof.sqlite",
    )
    assert kept == proof.read_bytes()


def test_the_protocol_replaces_an_existing_ordinary_file(tmp_path: Path) -> None:
    """DOMAIN §15.9: over the protocol an existing destination is replaced."""
    fx = Fixture.f(tmp_path / "s.db")
    old = tmp_path / "old.sqlite"
    old.write_bytes(b"yesterday")
    response, appended = _backup(fx, str(old))
    assert ("accepted", 1) == (response.outcome, appended)
    assert old.read_bytes().startswith(b"SQLite format 3\x00")


def test_a_prune_backup_onto_the_journal_is_refused(tmp_path: Path) -> None:
    """The prune's backup gets the same checks; nothing is compacted."""
    fx = Fixture.f(tmp_path / "s.db")
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    shm = tmp_path / "s.db-journal"
    assert not shm.exists()
    payload = {"before": iso_utc(120_000), "apply": True, "backupPath": str(shm)}
    before = fx.events()
    pruned = fx.request("state.prune", payload, key="prune", rid="prune", at=130_000)
    assert ("rejected", f"destination is a file the live database keeps beside it: {shm}") == (
        pruned.outcome,
        pruned.error,
    )
    assert before + 1 == fx.events()
    assert fx.store.verify().ok
