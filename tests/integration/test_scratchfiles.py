"""Scratch files are held while they live and swept once the fold that made them was killed."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from pwf.fold import scratchfiles

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

OLD = 3600.0
"""Seconds an orphan is aged by in these tests: far past ``ORPHAN_AGE``."""


def _aged(path: Path, seconds: float = OLD) -> Path:
    path.write_bytes(b"left behind")
    stamp = path.stat().st_mtime - seconds
    os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def beside(tmp_path: Path) -> Path:
    """The database the scratch files belong to (it need not exist)."""
    return tmp_path / "state.db"


@pytest.fixture
def fresh(beside: Path) -> Iterator[Path]:
    """A scratch file just made and held, as a fold that sweeps has."""
    path, held = scratchfiles.make(f"{beside.name}.rebuild-", beside.parent)
    yield path
    scratchfiles.release(path, held)


def test_make_holds_the_file_and_release_deletes_it(beside: Path) -> None:
    path, held = scratchfiles.make(f"{beside.name}.verify-", beside.parent)
    other = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
    _aged(path.with_name(path.name + "-journal"))
    scratchfiles.release(path, held)
    assert [] == list(beside.parent.iterdir())


def test_orphans_of_every_kind_are_swept(beside: Path, fresh: Path) -> None:
    """Scratch, part and replay files nobody holds, with SQLite's files beside them."""
    orphans = [
        _aged(beside.with_name("state.db.rebuild-abc_1234")),
        _aged(beside.with_name("state.db.rebuild-abc_1234-journal")),
        _aged(beside.with_name("state.db.rebuild-abc_1234.part-zz99zz99")),
        _aged(beside.with_name("state.db.rebuild-abc_1234.part-zz99zz99-wal")),
        _aged(beside.with_name("state.db.verify-00000000")),
        _aged(beside.with_name("state.db.tmp-q1w2e3r4")),
        _aged(beside.with_name("state.db.verify-gone0000-shm")),  # its base is gone already
    ]
    assert sorted(orphans) == sorted(scratchfiles.sweep(beside, fresh))
    assert [fresh] == list(beside.parent.iterdir())


def test_other_files_are_never_touched(beside: Path, fresh: Path) -> None:
    kept = [
        _aged(beside),
        _aged(beside.with_name("state.db-wal")),
        _aged(beside.with_name("state.db.backup")),
        _aged(beside.with_name("state.db.rebuild-short")),
        _aged(beside.with_name("state.db.rebuild-abcdefgh.txt")),
        _aged(beside.with_name("state.db.rebuild-ABCDEFGH")),
        _aged(beside.with_name("other.db.rebuild-abcdefgh")),
        _aged(beside.with_name("state.db.maintenance.lock")),
    ]
    assert [] == scratchfiles.sweep(beside, fresh)
    assert sorted([*kept, fresh]) == sorted(beside.parent.iterdir())


def test_a_recent_file_is_left_alone(beside: Path, fresh: Path) -> None:
    """Unheld but touched within the minute: its maker may not have locked it yet."""
    recent = _aged(beside.with_name("state.db.rebuild-recent00"), scratchfiles.ORPHAN_AGE / 2)
    old = _aged(beside.with_name("state.db.rebuild-oldfile0"))
    _aged(beside.with_name("state.db.rebuild-oldfile0-wal"), scratchfiles.ORPHAN_AGE / 2)
    assert [] == scratchfiles.sweep(beside, fresh)
    assert recent.exists()
    assert old.exists()  # its WAL is recent: SQLite may still be writing it


def test_a_file_held_by_another_process_is_left_alone(beside: Path, fresh: Path) -> None:
    """A live fold in another process (or a process it forked) holds its file."""
    held = _aged(beside.with_name("state.db.rebuild-inuse000"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, os, sys, time\n"
                "descriptor = os.open(sys.argv[1], os.O_RDONLY)\n"
                "fcntl.flock(descriptor, fcntl.LOCK_EX)\n"
                "print('held', flush=True)\n"
                "time.sleep(60)\n"
            ),
            str(held),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert b"held\n" == holder.stdout.readline()
        assert [] == scratchfiles.sweep(beside, fresh)
        assert held.exists()
    finally:
        holder.kill()
        holder.communicate()
    assert [held] == scratchfiles.sweep(beside, fresh)


def test_an_unreadable_directory_sweeps_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "state.db"
    assert [] == scratchfiles.sweep(missing, missing)
