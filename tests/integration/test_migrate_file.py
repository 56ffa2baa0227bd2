"""``pwf log migrate`` of a SQLite file: every seq, byte and proof kept, or nothing changed.

ADR 0102.  The v1 files are made by hand (``tests/_sqlite_v1.py``) from logs
of the demo's traffic, as pwf wrote them before ADR 0102.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.errors import ChainError, InputError, StoreError
from pwf.store import migration
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from click.testing import Result
    from tests._sqlite_v1 import make_v1
    from tests.integration._harness import Fixture, traffic_module
else:
    from _harness import Fixture, traffic_module

    from _sqlite_v1 import make_v1


def _pwf(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    """A v1 file of eight runs of the demo's traffic."""
    source = tmp_path / "source.db"
    Fixture(source).close()
    traffic = traffic_module().Traffic(str(source), 5)
    for index in range(8):
        traffic.run(index)
    traffic.store.close()
    path = tmp_path / "v1.db"
    make_v1(source, path)
    return path


def _events(path: Path) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(
            "SELECT seq, batch, content_hash, prev_hash, body FROM events ORDER BY seq"
        ).fetchall()
    finally:
        connection.close()


def test_every_event_keeps_its_seq_and_bytes_and_the_backup_proves_it(v1: Path) -> None:
    before = _events(v1)
    proof_before = _pwf("log", "prove", str(len(before) // 2), "--db", str(v1), "--json")
    assert proof_before.exit_code == 2  # this pwf does not read v1 at all
    done = _pwf("log", "migrate", "--db", str(v1), "--json")
    assert done.exit_code == 0, done.output
    after = _events(v1)
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    kept = v1.with_name("v1.db.v1-backup")
    assert _events(kept) == before
    assert kept.stat().st_mode & 0o777 == 0o600
    assert _pwf("verify", "--db", str(v1)).exit_code == 0
    proved = _pwf("log", "verify", "--db", str(v1), "--backup", str(kept))
    assert proved.exit_code == 0, proved.output
    again = _pwf("log", "migrate", "--db", str(v1))
    assert again.exit_code == 2
    assert "already in format pwf.store.v2" in again.output


def test_a_proof_issued_before_the_migration_is_the_same_after(v1: Path, tmp_path: Path) -> None:
    """Leaves do not change: the tree of the old events is the same tree (ADR 0083, 0102)."""
    with sqlite3.connect(v1) as connection:
        nodes = connection.execute("SELECT pos, hash FROM _pwf_tree ORDER BY pos").fetchall()
    assert _pwf("log", "migrate", "--db", str(v1)).exit_code == 0
    with sqlite3.connect(v1) as connection:
        now = connection.execute("SELECT pos, hash FROM _pwf_tree ORDER BY pos").fetchall()
    assert now[: len(nodes)] == nodes


@pytest.mark.parametrize(
    ("where", "error"),
    [("_build", StoreError), ("_install", StoreError)],
)
def test_a_failure_midway_changes_nothing_and_leaves_no_backup(
    v1: Path, monkeypatch: pytest.MonkeyPatch, where: str, error: type[Exception]
) -> None:
    before = v1.read_bytes()

    def failing(*_args: object, **_kwargs: object) -> None:
        raise error("the disk went away")

    monkeypatch.setattr(migration, where, failing)
    done = _pwf("log", "migrate", "--db", str(v1))
    assert done.exit_code != 0
    assert "the disk went away" in done.output
    assert v1.read_bytes() == before
    assert not v1.with_name("v1.db.v1-backup").exists()
    assert not v1.with_name("v1.db.migrating").exists()


def test_a_damaged_v1_log_is_refused_naming_the_seq(v1: Path) -> None:
    connection = sqlite3.connect(v1)
    try:
        connection.execute(
            "UPDATE events SET body = CAST(replace(CAST(body AS TEXT), 'run-', 'rum-') AS BLOB)"
            " WHERE seq = 5"
        )
        connection.commit()
    finally:
        connection.close()
    before = v1.read_bytes()
    with pytest.raises(ChainError, match="seq 5"):
        migration.migrate(
            v1, v1.with_name("kept"), seal=lambda _path, _event: 0, busy_timeout_ms=1000
        )
    assert v1.read_bytes() == before
    assert not v1.with_name("kept").exists()


def test_bad_input_is_one_line_and_changes_nothing(v1: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_bytes(b"mine")
    before = v1.read_bytes()
    exists = _pwf("log", "migrate", "--db", str(v1), "--backup", str(taken))
    assert exists.exit_code == 2
    assert exists.output.splitlines() == [
        f"Error: {taken} exists; name another --backup for the pwf.store.v1 file"
    ]
    assert taken.read_bytes() == b"mine"
    assert v1.read_bytes() == before
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    refused = _pwf("log", "migrate", "--db", str(foreign))
    assert refused.exit_code == 2
    assert "not a pwf database" in refused.output
    with pytest.raises(InputError), SqliteStore(tmp_path / "missing.db"):
        pass
    missing = _pwf("log", "migrate", "--db", str(tmp_path / "missing.db"))
    assert missing.exit_code == 2
    assert missing.output.splitlines() == [
        f"Error: no state database at {tmp_path / 'missing.db'} (run `pwf init` first)"
    ]
    assert not (tmp_path / "missing.db").exists()
    nowhere = tmp_path / "no-such-folder" / "v1.db"
    unplaced = _pwf("log", "migrate", "--db", str(v1), "--backup", str(nowhere))
    assert unplaced.exit_code == 2
    assert unplaced.output.splitlines() == [
        f"Error: cannot write --backup {nowhere}: its folder does not exist"
    ]
    assert v1.read_bytes() == before


_KILLED_WHILE_BUILDING = """
import os, signal, sys
from pwf.store import migration

def killed(scratch, backup):
    os.kill(os.getpid(), signal.SIGKILL)  # no clean-up runs, as under a real kill

migration._build = killed
from pwf.cli import cli
cli(["log", "migrate", "--db", sys.argv[1]])
"""


def _killed_while_building(v1: Path) -> Path:
    """Run a migrate of ``v1`` that is killed after its copy, while it builds; its backup."""
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_WHILE_BUILDING, str(v1)], capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    kept = v1.with_name("v1.db.v1-backup")
    assert kept.exists()
    assert v1.with_name("v1.db.migrating").exists()
    return kept


def test_a_migrate_killed_while_it_builds_is_resumed_from_its_copy(v1: Path) -> None:
    """ADR 0113: before, the copy it left refused every migrate after, named as taken."""
    before = _events(v1)
    kept = _killed_while_building(v1)
    copied = kept.stat().st_ino, kept.stat().st_mtime_ns
    assert v1.with_name("v1.db.migrating").stat().st_mode & 0o777 == 0o600
    done = _pwf("log", "migrate", "--db", str(v1))
    assert done.exit_code == 0, done.output
    assert (kept.stat().st_ino, kept.stat().st_mtime_ns) == copied  # kept, not copied again
    assert not v1.with_name("v1.db.migrating").exists()
    assert _events(v1)[: len(before)] == before
    proved = _pwf("log", "verify", "--db", str(v1), "--backup", str(kept))
    assert proved.exit_code == 0, proved.output


def test_a_copy_left_of_another_head_is_not_taken(v1: Path) -> None:
    kept = _killed_while_building(v1)
    with sqlite3.connect(kept) as connection:
        connection.execute("UPDATE _pwf_head SET seq = seq - 1")
    connection.close()
    left = kept.read_bytes()
    before = v1.read_bytes()
    refused = _pwf("log", "migrate", "--db", str(v1))
    assert refused.exit_code == 2
    # The killed migrate's maintenance lock is taken over first, with a warning.
    assert refused.output.splitlines()[-1] == (
        f"Error: {kept} exists; name another --backup for the pwf.store.v1 file"
    )
    assert kept.read_bytes() == left
    assert v1.read_bytes() == before


def test_an_empty_backup_is_a_name_taken_before_the_copy(v1: Path) -> None:
    kept = v1.with_name("v1.db.v1-backup")
    kept.write_bytes(b"")
    done = _pwf("log", "migrate", "--db", str(v1))
    assert done.exit_code == 0, done.output
    assert _pwf("log", "verify", "--db", str(v1), "--backup", str(kept)).exit_code == 0
