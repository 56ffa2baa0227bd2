"""The maintenance lock is an ``flock`` held by a live process, under the original's file name.

A prune killed outright leaves the file behind; the kernel has let go of
its ``flock``, so the next prune takes the file over with a warning.  A
lock held by a live process is refused with the original's text and the
holder's pid, and left in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from pwf import logs
from pwf.commands.prune import iso_utc
from pwf.errors import CommandError
from pwf.host._lock import acquire_lock, lock_path

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import Fixture, finish_fixture_run
else:
    from _harness import Fixture, finish_fixture_run

_HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pwf.host._lock import acquire_lock
    lock = acquire_lock(Path(sys.argv[1]))
    print("held", flush=True)
    time.sleep(60)
    """
)


def _holder(db: Path) -> subprocess.Popen[str]:
    """A live process holding the maintenance lock of ``db``."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert "held\n" == process.stdout.readline()
    return process


def _finished(db: Path) -> Fixture:
    fx = Fixture.f(db)
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    return fx


def _prune(fx: Fixture, backup: Path, key: str) -> object:
    payload = {"before": iso_utc(120_000), "apply": True, "backupPath": str(backup)}
    return fx.request("state.prune", payload, key=key, rid=key, at=130_000)


def test_a_live_holder_is_refused_with_its_pid_and_released_when_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: the original's refusal plus the pid, file kept; killed: the next prune runs."""
    db = tmp_path / "s.db"
    fx = _finished(db)
    holder = _holder(db)
    try:
        refused = _prune(fx, tmp_path / "b1.sqlite", "p-1")
        assert (
            "rejected",
            f"State maintenance is already active: {lock_path(db)} (held by pid {holder.pid})",
        ) == (refused.outcome, refused.error)  # type: ignore[attr-defined]
        assert f"{holder.pid}\n" == lock_path(db).read_text()
        assert not (tmp_path / "b1.sqlite").exists()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    assert lock_path(db).exists()  # left behind by the killed holder
    logs.set_verbosity(0)
    capsys.readouterr()
    done = _prune(fx, tmp_path / "b2.sqlite", "p-2")
    assert "accepted" == done.outcome  # type: ignore[attr-defined]
    warned = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [("maintenance.stale_lock_taken_over", holder.pid, "warning")] == [
        (line["event"], line["dead_pid"], line["level"]) for line in warned
    ]
    assert not lock_path(db).exists()


def test_the_lock_is_exclusive_within_one_process_too(tmp_path: Path) -> None:
    """A second acquire on another descriptor is refused while the first is held."""
    db = tmp_path / "s.db"
    first = acquire_lock(db)
    try:
        with pytest.raises(CommandError, match=rf"\(held by pid {os.getpid()}\)$"):
            acquire_lock(db)
    finally:
        first.release()
    assert not lock_path(db).exists()
    acquire_lock(db).release()


def test_the_lock_file_is_private_under_a_permissive_umask(tmp_path: Path) -> None:
    """0600 whatever the umask."""
    old = os.umask(0)
    try:
        lock = acquire_lock(tmp_path / "s.db")
        assert 0o600 == lock_path(tmp_path / "s.db").stat().st_mode & 0o777
        lock.release()
    finally:
        os.umask(old)
