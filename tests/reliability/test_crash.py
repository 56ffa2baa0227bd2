"""SIGKILL a writer at random points, many times, on one database: nothing acknowledged is lost.

The writer (``_writer.py``) sends realistic load through the real command path
and prints a line per answer only after its transaction committed.  Each
round starts a fresh writer on the same file, waits until it writes, lets it
run for a random delay and kills it with SIGKILL, so the next open must
recover whatever the kill left in the WAL.  After every kill the chain
verifies, the live projections equal a rebuild of the log, and every
acknowledged answer is found in the log.

Rebuilds and replays are killed the same way: a killed rebuild leaves the
live projections as they were or rebuilt, never half swapped, and a killed
replay leaves no output file or a whole one.

A killed command's copy whose contents (schema, log, head, checkpoints,
projections: everything pwf's checks read) equal those of a file already
checked is as sound as that file; only copies that differ from every
checked file are checked themselves, and the first copy of each test is
checked either way (ADR 0064).

A prune is killed too: ``pwf state prune --apply`` on a copy of a database
the writers filled, at random points of its backup, compaction and checkpoint.
Each copy afterwards verifies and equals a rebuild, and holds either its old
log or a compacted log that its backup proves.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from typing import TYPE_CHECKING, Final

import pytest

from pwf.cli._options import open_store
from pwf.commands.prune import iso_utc
from pwf.store.sqlite import SqliteStore
from pwf.verify import check

if TYPE_CHECKING:
    from pathlib import Path

    from tests._dbfile import projections
    from tests.conftest import Built
    from tests.reliability._forked import spawn
    from tests.reliability._reliability import (
        Ack,
        LogState,
        assert_sound,
        contents,
        init,
        log_state,
        missing,
        parse_acks,
        pwf,
        spawn_writer,
        stop,
        wait_line,
    )
    from tests.reliability.conftest import Figures
else:
    from _forked import spawn
    from _reliability import (
        Ack,
        LogState,
        assert_sound,
        contents,
        init,
        log_state,
        missing,
        parse_acks,
        pwf,
        spawn_writer,
        stop,
        wait_line,
    )

    from _dbfile import projections

pytestmark = pytest.mark.slow

PART: Final = "test_crash"
KILLS: Final = int(os.environ.get("PWF_RELIABILITY_KILLS", "30"))
"""How many times the writer is killed; CI's default keeps the test near a minute."""
SEED: Final = int(os.environ.get("PWF_RELIABILITY_SEED", "20260101"))
"""Seeds the kill delays, so a failing run can be repeated with the same schedule."""
LONGEST_DELAY: Final = 0.5
"""Seconds a writer may run before its kill; the log grows with it, and so does each check."""
CLOCK: Final = 1_785_700_000_000
ROUND_MS: Final = 10_000_000
"""Each writer's clock starts this much after the previous one's: time only moves forward."""


def delay(seed: int, number: int) -> float:
    """A reproducible pseudo-random delay in ``[0, LONGEST_DELAY)`` for kill ``number``."""
    digest = hashlib.sha256(f"{seed}:{number}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * LONGEST_DELAY


def kill_one_writer(db: Path, tmp_path: Path, number: int) -> list[Ack]:
    """Run a writer until a random moment after it started writing, SIGKILL it, return its acks."""
    errors = tmp_path / f"writer-{number}.err"
    writer = spawn_writer(
        db, f"g{number}", steps=0, gate="0", clock=CLOCK + number * ROUND_MS, errors=errors
    )
    try:
        assert writer.stdout is not None
        assert b"ready\n" == wait_line(writer.stdout)
        time.sleep(delay(SEED, number))
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate(timeout=300)
    finally:
        stop(writer)
    died = errors.read_text(encoding="utf-8", errors="replace")
    assert -signal.SIGKILL == writer.returncode, f"the writer ended on its own: {died}"
    return parse_acks(out)


def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, figures: Figures) -> None:
    """Every kill leaves a verifying chain, projections equal to the log, and every ack kept."""
    db = tmp_path / "state.db"
    init(db)
    figures.set(PART, "seed", SEED)
    acknowledged: list[Ack] = []
    for number in range(1, KILLS + 1):
        acks = kill_one_writer(db, tmp_path, number)
        acknowledged += acks
        figures.add(PART, "batches acknowledged", len(acks))
        events = assert_sound(db)
        figures.set(PART, "events in the log", events)
        lost = missing(db, acks)
        figures.add(PART, "events lost", len(lost))
        assert [] == lost, f"kill {number} lost acknowledged answers"
        figures.add(PART, "kills survived")
    assert [] == missing(db, acknowledged), "an answer acknowledged before an earlier kill is gone"
    assert len(acknowledged) > KILLS, "the writers were killed before they wrote anything"


PRUNE_KILLS: Final = int(os.environ.get("PWF_RELIABILITY_PRUNE_KILLS", "12"))
"""How many prunes are killed, each on a fresh copy of one filled database."""


def _fill(db: Path) -> None:
    """Let one writer drive 2000 steps into a new database."""
    init(db)
    errors = db.with_name("f.err")
    writer = spawn_writer(db, "f", steps=2000, gate="0", clock=CLOCK, errors=errors)
    try:
        writer.communicate(timeout=300)
    finally:
        stop(writer)
    assert writer.returncode == 0, errors.read_text()


def filled(tmp_path: Path, built: Built) -> tuple[Path, LogState]:
    """A copy of a database holding a few hundred finished and unfinished runs, and its state.

    The writer fills it once per run (``built``); each test kills its
    commands on copies of its own copy.
    """
    db = tmp_path / "filled.db"
    shutil.copyfile(built("crash-filled.db", _fill), db)
    return db, log_state(db)


def prune_args(db: Path, backup: Path) -> list[str]:
    """Apply a prune of the runs finished in the first half of the writer's 20 s of clock."""
    cutoff = iso_utc(CLOCK + 10_000)
    return [
        "state",
        "prune",
        "--db",
        str(db),
        "--before",
        cutoff,
        "--apply",
        "--backup",
        str(backup),
    ]


def _pruned(db: Path) -> bool:
    """The prune has committed: the log holds its ``log.pruned`` (ADR 0103)."""
    connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=0)
    try:
        row = connection.execute("SELECT 1 FROM events WHERE type = 'log.pruned'").fetchone()
    except sqlite3.Error:
        return False
    finally:
        connection.close()
    return row is not None


def kill_one_prune(db: Path, backup: Path, after: float | None) -> bool:
    """Start ``pwf state prune --apply``; SIGKILL it ``after`` seconds later if still running.

    ``after`` None kills it as soon as its ``log.pruned`` is seen committed.
    Returns whether the kill hit a running prune (False: it had already finished).
    """
    environment = {key: value for key, value in os.environ.items() if key != "PWF_DB"}
    process = spawn("pwf", *prune_args(db, backup), stdout=subprocess.DEVNULL, env=environment)
    try:
        if after is None:
            while process.poll() is None and not _pruned(db):
                time.sleep(0.001)
        else:
            time.sleep(after)
        running = process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=300)
    finally:
        stop(process)
    return running and process.returncode == -signal.SIGKILL


BEFORE_COMMIT: Final = "prunes cut before their commit (log unchanged)"
AFTER_COMMIT: Final = "prunes cut after their commit (log pruned)"
SEARCHES: Final = 12
"""Extra kills to reach an outcome the random ones missed: before the commit by bisecting
the delay, after it by killing the prune as soon as its log.pruned is seen committed."""


def _killed_prune(  # noqa: PLR0913 - the copy's number, its kill and its two references
    template: Path,
    tmp_path: Path,
    number: int,
    after: float | None,
    before: object,
    *,
    untouched: dict[str, list[tuple[object, ...]]],
) -> str | None:
    """Kill one prune of a fresh copy ``after`` seconds in; check it; which side of the commit.

    A copy whose contents are still ``untouched`` (the template's, checked
    once) is the template again, log and projections; any other is checked.
    """
    db = tmp_path / f"prune-{number}.db"
    shutil.copy(template, db)
    backup = tmp_path / f"prune-{number}.sqlite"
    hit = kill_one_prune(db, backup, after)
    if number == 0 or contents(db) != untouched:
        assert_sound(db)
    if log_state(db) == before:
        return BEFORE_COMMIT if hit else None
    proved = pwf("log", "verify", "--db", str(db), "--backup", str(backup))
    assert (proved.returncode, proved.stderr) == (0, b""), proved.stderr
    return AFTER_COMMIT if hit else None


def test_sigkill_during_a_prune_leaves_the_old_log_or_a_proven_prune(
    tmp_path: Path, figures: Figures, built: Built
) -> None:
    """Killed anywhere, a prune leaves a sound database: untouched, or pruned and provable.

    Both sides of the prune's commit must have been reached by a kill
    of a running prune: when the random delays miss the side before it,
    further kills bisect the delay; when they miss the side after it,
    further prunes are killed as soon as their ``log.pruned`` is seen committed
    (during the checkpoint and the record that follow).
    """
    template, before = filled(tmp_path, built)
    assert_sound(template)
    untouched = contents(template)
    started = time.monotonic()
    whole_db = tmp_path / "whole.db"
    shutil.copy(template, whole_db)
    whole = pwf(*prune_args(whole_db, tmp_path / "whole.sqlite"))
    took = time.monotonic() - started
    assert (whole.returncode, whole.stderr) == (0, b"")
    reached: dict[str, float | None] = {}
    early, late = 0.0, took * 1.5
    for number in range(PRUNE_KILLS + SEARCHES):
        after: float | None
        if number < PRUNE_KILLS:
            after = delay(SEED, 1000 + number) / LONGEST_DELAY * took
        elif len(reached) == 2:
            break
        else:
            after = None if BEFORE_COMMIT in reached else (early + late) / 2
        side = _killed_prune(template, tmp_path, number, after, before, untouched=untouched)
        if after is not None and side == BEFORE_COMMIT:
            early = max(early, after)
        elif after is not None:
            late = min(late, after)
        if side is not None:
            reached.setdefault(side, after)
            figures.add(PART, side)
        figures.add(PART, "prune kills survived")
    assert {BEFORE_COMMIT, AFTER_COMMIT} == set(reached), reached


REBUILD_KILLS: Final = int(os.environ.get("PWF_RELIABILITY_REBUILD_KILLS", "12"))
"""How many rebuilds and replays are killed, each on a fresh copy of one filled database."""
_HAND_EDIT: Final = "UPDATE runs SET status_detail = 'edited by hand' WHERE rowid = 1"


def kill_one(args: list[str], after: float) -> None:
    """Start ``pwf ARGS``; SIGKILL it ``after`` seconds later if it is still running."""
    environment = {key: value for key, value in os.environ.items() if key != "PWF_DB"}
    process = spawn("pwf", *args, stdout=subprocess.DEVNULL, env=environment)
    try:
        time.sleep(after)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=300)
    finally:
        stop(process)


def _timed(*args: str) -> float:
    started = time.monotonic()
    done = pwf(*args)
    assert (done.returncode, done.stderr) == (0, b""), done.stderr
    return time.monotonic() - started


def _projections(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with SqliteStore(db, read_only=True):  # it is a pwf database
        return projections(db)


def test_sigkill_during_a_rebuild_leaves_the_old_projections_or_the_rebuilt_ones(
    tmp_path: Path, figures: Figures, built: Built
) -> None:
    """Killed anywhere, a rebuild leaves the hand-edited projections as they were, or repaired.

    The copy's projections are edited by hand first, so the two outcomes
    differ: before its commit the live tables must be byte for byte the
    edited ones; after it they must equal the log's rebuild.  The log itself
    never changes.
    """
    template, before = filled(tmp_path, built)
    connection = sqlite3.connect(template)
    try:
        with connection:
            connection.execute(_HAND_EDIT)
    finally:
        connection.close()
    edited = _projections(template)
    opened = _timed("query", "runs", "--db", str(template), "--limit", "1")
    whole_db = tmp_path / "whole.db"
    shutil.copy(template, whole_db)
    took = _timed("rebuild", "--db", str(whole_db))
    # The two outcomes, each checked once: the edited copy's chain, the rebuilt one whole.
    assert _repaired(template) is False
    assert _repaired(whole_db) is True
    known = [(contents(template), False), (contents(whole_db), True)]
    for number in range(REBUILD_KILLS):
        db = tmp_path / f"rebuild-{number}.db"
        shutil.copy(template, db)
        after = opened + delay(SEED, 2000 + number) / LONGEST_DELAY * max(took - opened, 0.05)
        kill_one(["rebuild", "--db", str(db)], after)
        assert log_state(db) == before, "a rebuild changed the log"
        found = contents(db)
        repaired = next((outcome for seen, outcome in known if seen == found), None)
        if number == 0 or repaired is None:
            repaired = _repaired(db)
        if repaired:
            figures.add(PART, "rebuilds cut after their commit (projections rebuilt)")
        else:
            assert _projections(db) == edited, "a killed rebuild left half-swapped projections"
            figures.add(PART, "rebuilds cut before their commit (projections as they were)")
        figures.add(PART, "rebuild kills survived")
        figures.add(PART, "scratch files left by killed folds, then swept", _swept(db))


def _repaired(db: Path) -> bool:
    """The chain of ``db`` verifies; whether its projections equal a rebuild of its log."""
    with open_store(str(db), read_only=True) as store:
        found = check(store)  # walks the whole chain first, deep, as store.verify() does
    assert found.chain.ok, found.chain
    return found.ok


def _swept(db: Path) -> int:
    """Age the scratch files a killed fold left beside ``db``; a rebuild must delete them all."""
    left = sorted(db.parent.glob(f"{db.name}.*-*"))
    if not left:
        return 0  # nothing to sweep; the copy was already checked after its kill
    for path in left:
        os.utime(path, (path.stat().st_mtime - 3600,) * 2)
    done = pwf("rebuild", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert [] == sorted(db.parent.glob(f"{db.name}.*-*")), "a scratch file was not swept"
    return len(left)


def test_sigkill_during_a_replay_leaves_no_file_or_a_whole_one(
    tmp_path: Path, figures: Figures, built: Built
) -> None:
    """Killed anywhere, a replay's output is absent or a complete database equal to its log."""
    template, before = filled(tmp_path, built)
    with SqliteStore(template, read_only=True) as source:
        head = source.head()
    opened = _timed("query", "runs", "--db", str(template), "--limit", "1")
    whole = tmp_path / "whole-replay.db"
    took = _timed("replay", "--db", str(template), "--out", str(whole))
    _whole_replay(whole, head)
    replayed = contents(whole)
    checked = False
    for number in range(REBUILD_KILLS):
        out = tmp_path / f"replay-{number}.db"
        after = opened + delay(SEED, 3000 + number) / LONGEST_DELAY * max(took - opened, 0.05)
        kill_one(["replay", "--db", str(template), "--out", str(out)], after)
        assert log_state(template) == before, "a replay changed the log it read"
        if out.exists():
            if not checked or contents(out) != replayed:
                _whole_replay(out, head)
                checked = True
            figures.add(PART, "replays cut after their rename (whole file)")
        else:
            figures.add(PART, "replays cut before their rename (no file)")
        figures.add(PART, "replay kills survived")


def _whole_replay(out: Path, head: object) -> None:
    """``out`` is a whole replay: its chain verifies to ``head``, its projections equal its log."""
    with open_store(str(out), read_only=True) as replayed:
        found = check(replayed)  # walks the whole chain first, deep
        assert found.chain.ok, found.chain
        assert found.ok, found.difference
        assert replayed.head() == head
