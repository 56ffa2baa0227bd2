"""``pwf state backup DEST [--overwrite]``: an existing DEST is kept unless asked."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import one_line
else:
    from _cli import one_line

Run = Callable[..., Result]


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    path = tmp_path / "live.db"
    assert run("init", "--db", str(path)).exit_code == 0
    assert run("request", "--db", str(path), stdin=client_line(1, at=1000)).exit_code == 0
    return path


def _events(run: Run, live: Path) -> int:
    return len(run("log", "show", "--db", str(live), "--json").stdout.splitlines())


def test_an_existing_destination_is_kept_without_overwrite(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """Exit 2, one line naming the flag, the file untouched."""
    old = tmp_path / "old.sqlite"
    old.write_bytes(b"precious")
    done = run("state", "backup", str(old), "--db", str(live))
    assert 2 == done.exit_code
    assert (
        f"Error: Backup destination already exists: {old}; pass --overwrite to replace it"
        == one_line(done.stderr)
    )
    assert b"precious" == old.read_bytes()
    replaced = run("state", "backup", str(old), "--overwrite", "--db", str(live))
    assert (0, f"backed up to {old}\n") == (replaced.exit_code, replaced.stdout)
    assert old.read_bytes().startswith(b"SQLite format 3\x00")


def test_the_live_database_is_refused_even_with_overwrite(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """Through ``..`` and with --overwrite: refused, the log verifies, one event more."""
    (tmp_path / "sub").mkdir()
    before = _events(run, live)
    done = run("state", "backup", f"{tmp_path}/sub/../live.db", "--overwrite", "--db", str(live))
    assert 2 == done.exit_code
    assert "Error: destination must differ from the live database" == one_line(done.stderr)
    assert before + 1 == _events(run, live)
    assert 0 == run("verify", "--db", str(live)).exit_code


def test_a_symlinked_pwf_db_is_resolved(
    run: Run, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$PWF_DB`` names a symlink; its target's WAL is refused."""
    (tmp_path / "alias.db").symlink_to(live)
    monkeypatch.setenv("PWF_DB", str(tmp_path / "alias.db"))
    done = run("state", "backup", f"{live}-wal", "--overwrite")
    assert 2 == done.exit_code
    assert (
        f"Error: destination is a file the live database keeps beside it: {live}-wal"
        == one_line(done.stderr)
    )
    assert 0 == run("verify").exit_code


def test_a_relative_destination_is_resolved_from_the_working_directory(
    run: Run, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pwf state backup bk.db`` as the original's CLI takes it (only the operation wants /...)."""
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    done = run("state", "backup", "bk.db", "--db", str(live))
    assert 0 == done.exit_code, done.output
    assert f"backed up to {tmp_path / 'here' / 'bk.db'}\n" == done.stdout
    assert 0 == run("log", "verify", "--db", str(tmp_path / "here" / "bk.db")).exit_code


def test_a_copy_whose_projections_are_not_its_logs_is_refused(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """The copy's projections are compared with a fold of its log, a row of each at a time."""
    connection = sqlite3.connect(live)
    with connection:
        connection.execute("UPDATE runs SET updated_at = updated_at + 1")
    connection.close()
    copy = tmp_path / "copy.sqlite"
    done = run("state", "backup", str(copy), "--db", str(live))
    assert 2 == done.exit_code, done.output
    assert "Error: the backup's projections differ from its log" == one_line(done.stderr)
    assert not copy.exists()
    assert [] == sorted(tmp_path.glob("copy.sqlite?*"))  # no .partial, nothing beside it
    # A refused copy replaces nothing: an earlier backup at DEST stays as it was.
    copy.write_bytes(b"an earlier backup")
    again = run("state", "backup", str(copy), "--overwrite", "--db", str(live))
    assert 2 == again.exit_code, again.output
    assert b"an earlier backup" == copy.read_bytes()
    assert [] == sorted(tmp_path.glob("copy.sqlite?*"))  # no .partial, nothing beside it
