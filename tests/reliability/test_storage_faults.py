"""Storage that fails under ``pwf request``: a full disk, a read-only file, a held write lock.

Each fault must end the command with one clear line on stderr (no traceback)
and a non-zero exit code, and must leave a log that verifies, whose
projections equal a rebuild, and in which nothing is half-written: the head
is the batch of the last acknowledged request, or the log did not move.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest

from pwf import canonical
from pwf.cli._options import open_store
from pwf.events import open_body
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from tests.reliability._reliability import (
        AT,
        START,
        LogState,
        assert_sound,
        confined,
        init,
        log_state,
        one_line,
        pwf,
        request_line,
    )
    from tests.reliability.conftest import Figures
else:
    from _reliability import (
        AT,
        START,
        LogState,
        assert_sound,
        confined,
        init,
        log_state,
        one_line,
        pwf,
        request_line,
    )

pytestmark = pytest.mark.slow

PART: Final = "test_storage_faults"
KIB: Final = 1024
HEADROOMS: Final = (0, 64 * KIB, 256 * KIB, 1024 * KIB)
"""Bytes a file may grow past the database's size before writes fail, one round each."""
LINES: Final = 400
"""Requests offered per round: far more than fit, so every round ends on the fault."""


def starts(prefix: str, count: int = LINES) -> bytes:
    """``count`` distinct ``run.start`` lines, each a batch of its own, with a 1 KiB input."""
    payload = {**START, "input": {"notes": "n" * 1024}}
    lines = [
        request_line(
            "run.start",
            {**payload, "originSessionId": f"{prefix}-s-{number}"},
            rid=f"{prefix}-r-{number}",
            run_id=f"{prefix}-run-{number}",
        )
        for number in range(count)
    ]
    return b"".join(line + b"\n" for line in lines)


def answers(out: bytes) -> list[Any]:
    """The response lines a command printed, as plain JSON values."""
    return [canonical.parse_line(line) for line in out.splitlines()]


def batch_of(db: Path, request_id: str) -> int:
    """The batch in which the request's ``command.recorded`` was committed."""
    with SqliteStore(db, read_only=True) as store:
        found = list(store.find(request_id=request_id, type="command.recorded"))
    assert len(found) == 1, request_id
    return open_body(found[0].body).batch


def assert_nothing_half_written(db: Path, before: LogState, acknowledged: list[str]) -> None:
    """The head is the last acknowledged batch, or the log is where it was."""
    after = log_state(db)
    if not acknowledged:
        assert before == after
        return
    assert batch_of(db, acknowledged[-1]) == after.batch
    assert before.batch + len(acknowledged) == after.batch


def test_disk_full_is_one_line_and_leaves_a_whole_log(tmp_path: Path, figures: Figures) -> None:
    """Writes past a file-size limit fail as on a full disk; every acknowledged batch is whole."""
    db = tmp_path / "state.db"
    init(db)
    for number, headroom in enumerate(HEADROOMS):
        before = log_state(db)
        limit = db.stat().st_size + headroom
        command = ("request", "--db", str(db), "--at", str(AT))
        result = confined(*command, stdin=starts(f"full{number}"), file_limit=limit)
        figures.add(PART, "faults injected")
        error = one_line(result.stderr)
        responses = answers(result.stdout)
        assert (3, True) == (result.returncode, "disk" in error), error
        assert len(responses) < LINES, "the limit was never reached"
        assert {"accepted"} >= {answer["outcome"] for answer in responses}
        figures.add(PART, "disk-full failures")
        figures.add(PART, "requests acknowledged before a fault", len(responses))
        assert_sound(db)
        acknowledged = [answer["requestId"] for answer in responses]
        assert_nothing_half_written(db, before, acknowledged)


def _digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def _settle(db: Path) -> None:
    """Close the last read-write connection, which checkpoints and removes the WAL file.

    A read-only directory only stops writes while there is no WAL file to write to.
    """
    open_store(str(db)).close()
    assert not db.with_name(db.name + "-wal").exists()


def _make_read_only(db: Path, what: str) -> tuple[Path, int]:
    """Take write permission away from the database file or its directory; how to undo it."""
    target = db if what == "file" else db.parent
    mode = target.stat().st_mode
    target.chmod(0o400 if what == "file" else 0o500)
    return target, mode


@pytest.mark.parametrize("what", ["file", "directory"])
def test_read_only_database_is_one_line_and_changes_nothing(
    tmp_path: Path, figures: Figures, what: str
) -> None:
    """A database pwf may not write refuses the request clearly and stays byte for byte."""
    root = os.geteuid() == 0
    if root and not sys.platform.startswith("linux"):
        pytest.skip("root ignores file modes, and only Linux lets this test drop that power")
    db = tmp_path / "ro" / "state.db"
    init(db)
    seeded = pwf("request", "--db", str(db), "--at", str(AT), stdin=starts("seed", 3))
    assert 0 == seeded.returncode, seeded.stderr
    before, digest = log_state(db), _digest(db)
    _settle(db)
    target, mode = _make_read_only(db, what)
    try:
        command = ("request", "--db", str(db), "--at", str(AT))
        result = confined(*command, stdin=starts("ro", 1), drop_capabilities=root)
    finally:
        target.chmod(mode)
    if b"cannot drop capability" in result.stderr:
        pytest.skip(f"root here may not give up its file-permission bypass: {result.stderr!r}")
    figures.add(PART, "faults injected")
    assert b"" == result.stdout
    assert (3, True) == (result.returncode, "read-only" in one_line(result.stderr)), result.stderr
    assert (before, digest) == (log_state(db), _digest(db))
    assert_sound(db)


def test_locked_past_the_busy_timeout_is_one_line_and_appends_nothing(
    tmp_path: Path, figures: Figures
) -> None:
    """Another connection holds the write lock longer than the busy timeout (5 s, the default)."""
    db = tmp_path / "state.db"
    init(db)
    before = log_state(db)
    line = starts("locked", 1)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        result = pwf("request", "--db", str(db), "--at", str(AT), stdin=line)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    figures.add(PART, "faults injected")
    assert b"" == result.stdout
    assert (3, True) == (result.returncode, "locked" in one_line(result.stderr)), result.stderr
    assert before == log_state(db)
    retried = pwf("request", "--db", str(db), "--at", str(AT), stdin=line)
    assert (0, b"") == (retried.returncode, retried.stderr), "the lock, not the line, was the fault"
    assert_sound(db)
