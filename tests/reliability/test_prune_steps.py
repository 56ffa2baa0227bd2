"""SIGKILL a prune at each step of its flow: the log is untouched or compacted and proven.

``pwf state prune --apply`` runs on a fresh copy of a database the writers
filled and is killed (``_killed_at.py``) at one named step: after the
backup, in the middle of folding its scratch file, once the image is built
and before the install takes the write lock, under the lock once the
backup has caught up, once the log is sealed into the image, once the
image is sealed, halfway through copying the image into the live file,
after the install's commit and after the checkpoint (ADR 0051).
Every copy afterwards verifies and equals a rebuild.  Before the commit its
log and projections are exactly the old ones, and a second prune (to
another backup) takes over the dead one's maintenance lock and succeeds;
after it the log is compacted and its backup proves it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from tests._dbfile import projections
    from tests.conftest import Built
    from tests.reliability._reliability import (
        LogState,
        assert_sound,
        init,
        log_state,
        pwf,
        spawn_writer,
        stop,
    )
    from tests.reliability.test_crash import CLOCK, prune_args
else:
    from _reliability import LogState, assert_sound, init, log_state, pwf, spawn_writer, stop
    from test_crash import CLOCK, prune_args

    from _dbfile import projections

pytestmark = pytest.mark.slow

KILLED_AT: Final = Path(__file__).with_name("_killed_at.py")
BEFORE, AFTER = "log unchanged", "log pruned"
STEPS: Final = (
    ("after the backup", "pwf.host.prune:_backed_up", 1, "after", BEFORE),
    ("folding the scratch file", "pwf.host._compacting:Prepared._fold", 1, "after", BEFORE),
    ("image built, before the write lock", "pwf.store.image:install", 1, "before", BEFORE),
    ("under the lock, backup caught up", "pwf.host.prune:_unchanged", 1, "before", BEFORE),
    (
        "under the lock, log.pruned sealed into the image",
        "pwf.host._compacting:Prepared.seal",
        1,
        "after",
        BEFORE,
    ),
    ("under the lock, image sealed", "pwf.host.prune:tally", 2, "after", BEFORE),
    (
        "under the lock, image half copied",
        "pwf.store.image:_Progress.__call__",
        2,
        "before",
        BEFORE,
    ),
    ("after the install's commit", "pwf.host.prune:settle", 1, "before", AFTER),
    ("after the checkpoint", "pwf.host.prune:_settled", 1, "after", AFTER),
)


WRITES: Final = 300
"""Answers the writer gives before the prunes: a few dozen runs, most of them finished."""


def _fill(db: Path) -> None:
    """Let the writer give :data:`WRITES` answers into a new database."""
    init(db)
    errors = db.with_name("writer.err")
    writer = spawn_writer(db, "f", steps=WRITES, gate="0", clock=CLOCK, errors=errors)
    try:
        writer.communicate(timeout=300)
    finally:
        stop(writer)
    assert writer.returncode == 0, errors.read_text()


@pytest.fixture(scope="module")
def template(built: Built) -> tuple[Path, LogState]:
    """A database the writer filled, and its log state, shared by every step.

    It is made once per run (``built``), whichever workers the steps run on.
    """
    db = built("prune-steps-filled.db", _fill)
    return db, log_state(db)


def _projections(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with SqliteStore(db, read_only=True):  # it is a pwf database
        return projections(db)


@pytest.mark.parametrize(
    ("target", "nth", "when", "side"),
    [pytest.param(*step[1:], id=step[0]) for step in STEPS],
)
def test_a_prune_killed_at_a_step_leaves_a_sound_log(  # noqa: PLR0913, PLR0917 - one step
    template: tuple[Path, LogState],
    tmp_path: Path,
    target: str,
    nth: int,
    when: str,
    side: str,
) -> None:
    """The kill lands where it is aimed and leaves the outcome of its side of the commit."""
    source, before = template
    db = tmp_path / "state.db"
    shutil.copy(source, db)
    projections = _projections(db)
    backup = tmp_path / "backup.sqlite"
    killed = subprocess.run(
        [sys.executable, str(KILLED_AT), target, str(nth), when, *prune_args(db, backup)],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr
    assert_sound(db)
    if side == BEFORE:
        assert log_state(db) == before
        assert _projections(db) == projections
        again = pwf(*prune_args(db, tmp_path / "again.sqlite"))
        assert again.returncode == 0, again.stderr
        assert b"stale_lock_taken_over" in again.stderr
        proved = pwf("log", "verify", "--db", str(db), "--backup", str(tmp_path / "again.sqlite"))
    else:
        assert log_state(db) != before
        proved = pwf("log", "verify", "--db", str(db), "--backup", str(backup))
    assert (proved.returncode, proved.stderr) == (0, b""), proved.stderr
