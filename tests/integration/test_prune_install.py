"""A prune installs its new database in one step, and writes the bytes the rules give.

ADR 0051: the whole new file is built in a scratch file, the part that
depends on the live head is written under the write lock that SQLite's
backup API takes to copy it over the live file, and nothing else is
written.  The log it leaves is compared, seq by seq, with the prune that
ADR 0103 defines, computed here apart from the backup: every event keeps
its seq, batch and hashes; the compaction rule's removed events keep no
bytes and their Merkle leaf; the rest keep their bytes; ``log.pruned``
follows the backup's head, as ``seal()`` writes it there.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from pwf import merkle
from pwf.commands.prune import iso_utc
from pwf.errors import StoreError
from pwf.events import LogCompacted, LogPruned, seal
from pwf.events.compaction import compacted
from pwf.host import _compacting
from pwf.store import image
from pwf.store.compaction import file_sha256
from pwf.store.image import install
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import Fixture, finish_fixture_run, start_run
    from tests.integration._pruning import prune_failure
else:
    from _harness import Fixture, finish_fixture_run, start_run
    from _pruning import prune_failure

if TYPE_CHECKING:
    from tests._dbfile import projections, rows
else:
    from _dbfile import projections, rows


def _history(db: Path) -> Fixture:
    """Three finished runs before the cutoff, one after it and one still running."""
    fx = Fixture.f(db)
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    for number, at in ((2, 10_000), (3, 20_000), (4, 200_000)):
        start_run(fx, f"run-{number}", session=f"s-{number}", at=at)
        done = fx.request("run.cancel", {}, run_id=f"run-{number}", key=f"c-{number}", at=at + 1)
        assert done.outcome == "accepted"
    start_run(fx, "run-5", session="s-5", at=210_000)
    return fx


def _prune(fx: Fixture, backup: Path) -> Any:
    payload = {"before": iso_utc(120_000), "apply": True, "backupPath": str(backup)}
    return fx.request("state.prune", payload, key="prune", rid="prune", at=230_000)


def _expected(backup: Path, pruned: LogPruned, at: int, record: Any) -> list[tuple[Any, ...]]:
    """The pruned log by ADR 0103's rules alone: (seq, content hash, body or None, leaf or None)."""
    removed = frozenset(pruned.removed_run_ids)
    with SqliteStore(backup, read_only=True) as copy:
        head = copy.head()
        found = []
        for stored in copy.read():
            entry = next(copy.entries(stored.seq, stored.seq))
            goes = compacted(entry.event, removed) is None and not isinstance(
                entry.event, LogCompacted
            )
            found.append(
                (
                    stored.seq,
                    entry.content_hash,
                    None if goes else stored.body,
                    merkle.leaf_hash(stored.body) if goes else None,
                )
            )
        sealed = seal(
            LogPruned(
                cutoff=pruned.cutoff,
                removed_run_ids=pruned.removed_run_ids,
                removed_events=sum(1 for row in found if row[2] is None),
                backup_path=str(backup.absolute()),
                backup_sha256=file_sha256(backup),
                backup_seq=head.seq,
                backup_hash=head.content_hash,
            ),
            seq=head.seq + 1,
            batch=head.batch + 1,
            at=at,
            actor=record.actor,
            cause=record.cause,
            event_id=f"evt-{head.seq + 1}",
            prev_hash=head.content_hash,
        )
    return [*found, (sealed.entry.seq, sealed.entry.content_hash, sealed.body, None)]


def test_the_installed_log_is_the_prune_the_rules_define_byte_for_byte(
    tmp_path: Path,
) -> None:
    """Every seq up to ``log.pruned`` is what the rules give: bytes kept or taken, leaf kept."""
    fx = _history(tmp_path / "s.db")
    backup = tmp_path / "p.sqlite"
    response = _prune(fx, backup)
    assert (response.outcome, response.receipt["selectedRuns"]) == ("accepted", 3)
    found = list(fx.store.find(type=LogPruned.TAG))
    assert len(found) == 1
    record = next(fx.store.entries(found[0].seq, found[0].seq))
    assert isinstance(record.event, LogPruned)
    expected = _expected(backup, record.event, 230_000, record)
    live = rows(
        fx.store.projections_file.path,
        "SELECT e.seq, e.content_hash, e.body, p.leaf FROM events e"
        " LEFT JOIN _pwf_pruned p ON p.seq = e.seq WHERE e.seq <= ? ORDER BY e.seq",
        record.seq,
    )
    assert live == expected
    assert record.event.removed_events == sum(1 for row in expected if row[2] is None) > 0
    assert prune_failure(fx.store, backup) is None
    assert fx.store.verify(deep=True).ok
    fx.assert_rebuild_equals_live()
    assert fx.store.projections_file.integrity_check() is None
    assert rows(fx.store.projections_file.path, "PRAGMA freelist_count") == [(0,)]  # no vacuum owed
    assert rows(fx.store.projections_file.path, "PRAGMA journal_mode") == [("wal",)]
    assert not list(tmp_path.glob("s.db.rebuild-*"))


def test_the_work_runs_under_the_lock_and_readers_see_old_or_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the image is sealed no writer commits; a reader's snapshot keeps the old log.

    The reader's open snapshot makes the prune's last checkpoint wait out the
    store's busy timeout; 500 ms instead of the default 5 s is the same wait.
    """
    monkeypatch.setenv("PWF_BUSY_TIMEOUT_MS", "500")
    fx = _history(tmp_path / "s.db")
    head = fx.store.head()
    reader = sqlite3.connect(fx.store.projections_file.path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 5
    seen: list[str] = []
    sealing = _compacting.Prepared.seal

    def watched(self: _compacting.Prepared, *args: Any, **kwargs: Any) -> Any:
        writer = sqlite3.connect(fx.store.projections_file.path, timeout=0, isolation_level=None)
        try:
            writer.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            seen.append(str(error))
        finally:
            writer.close()
        return sealing(self, *args, **kwargs)

    monkeypatch.setattr(_compacting.Prepared, "seal", watched)
    assert _prune(fx, tmp_path / "p.sqlite").outcome == "accepted"
    assert seen == ["database is locked"]
    assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 5
    assert reader.execute("SELECT seq FROM _pwf_head").fetchone()[0] == head.seq
    reader.execute("COMMIT")
    assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    reader.close()
    assert fx.row("runs", run_id="run-1") is None
    assert fx.store.verify().ok


def test_the_logs_indexes_are_built_before_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image's log indexes are sorted while writers commit; the tail keeps them up.

    At a million events the sort was 3 s of the 15 s the install held the lock.
    """
    fx = _history(tmp_path / "s.db")
    free: list[bool] = []
    indexing = image.index_events

    def watched(*args: Any) -> None:
        writer = sqlite3.connect(fx.store.projections_file.path, timeout=0, isolation_level=None)
        try:
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("ROLLBACK")
            free.append(True)
        except sqlite3.OperationalError:
            free.append(False)
        finally:
            writer.close()
        indexing(*args)

    monkeypatch.setattr(_compacting, "index_events", watched)
    assert _prune(fx, tmp_path / "p.sqlite").outcome == "accepted"
    assert free == [True]
    names = {name for (name,) in rows(fx.store.projections_file.path, _INDEXES)}
    assert {"_pwf_events_type", "_pwf_events_run", "_pwf_batches_request"} <= names
    assert fx.store.projections_file.integrity_check() is None
    assert len(list(fx.store.find(type=LogPruned.TAG))) == 1
    assert fx.store.verify(deep=True).ok
    fx.assert_rebuild_equals_live()


_INDEXES = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name LIKE '_pwf_%'"


def _filled(path: Path, rows: int) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, v BLOB NOT NULL)")
    connection.execute("BEGIN")
    connection.executemany("INSERT INTO t VALUES (?, ?)", ((n, b"x" * 200) for n in range(rows)))
    connection.execute("COMMIT")
    return connection


def test_install_copies_the_image_with_the_work_written_into_it(tmp_path: Path) -> None:
    """Pages the first step copied and the work changed arrive as the work left them."""
    live = _filled(tmp_path / "live.db", 50)
    live.execute("PRAGMA journal_mode = WAL")
    image = _filled(tmp_path / "image.db", 2_000)

    def work() -> int:
        image.execute("UPDATE t SET v = x'00' WHERE n < 10")
        image.execute("INSERT INTO t VALUES (5000, x'01')")
        return 7

    assert install(image, live, work, busy_timeout_ms=1000) == 7
    assert live.execute("SELECT count(*), sum(length(v)) FROM t").fetchone() == (
        2001,
        1990 * 200 + 11,
    )
    assert live.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_failing_work_leaves_the_live_file_as_it_was(tmp_path: Path) -> None:
    """The backup is aborted and rolled back; the lock is free again."""
    live = _filled(tmp_path / "live.db", 50)
    live.execute("PRAGMA journal_mode = WAL")
    image = _filled(tmp_path / "image.db", 2_000)

    def work() -> None:
        raise StoreError("no")

    with pytest.raises(StoreError, match="no"):
        install(image, live, work, busy_timeout_ms=1000)
    assert live.execute("SELECT count(*) FROM t").fetchone()[0] == 50
    other = sqlite3.connect(tmp_path / "live.db", timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("COMMIT")
    other.close()


def test_a_held_write_lock_makes_the_install_give_up_after_its_timeout(tmp_path: Path) -> None:
    """A writer that never lets go: the install fails as busy, having written nothing.

    A store's connection waits as long as its install (``busy_timeout_ms``);
    so does this one, not ``sqlite3``'s default 5 s.
    """
    live = _filled(tmp_path / "live.db", 50)
    live.execute("PRAGMA journal_mode = WAL")
    live.execute("PRAGMA busy_timeout = 50")
    image = _filled(tmp_path / "image.db", 2_000)
    holder = sqlite3.connect(tmp_path / "live.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    ran: list[int] = []
    with pytest.raises(StoreError, match="locked"):
        install(image, live, lambda: ran.append(1), busy_timeout_ms=50)
    holder.execute("COMMIT")
    assert (ran, live.execute("SELECT count(*) FROM t").fetchone()[0]) == ([], 50)


def test_an_image_of_too_few_pages_is_refused(tmp_path: Path) -> None:
    """An image its first step could copy whole is never installed."""
    live = _filled(tmp_path / "live.db", 50)
    image = sqlite3.connect(tmp_path / "image.db", isolation_level=None)
    image.execute("CREATE TABLE t (n)")
    with pytest.raises(StoreError, match="not a whole pwf database"):
        install(image, live, lambda: None, busy_timeout_ms=50)
    assert live.execute("SELECT count(*) FROM t").fetchone()[0] == 50


def test_projections_survive_the_install_as_a_rebuild_gives_them(tmp_path: Path) -> None:
    """The installed projections are the old ones minus the trees (a rebuild of the new log)."""
    fx = _history(tmp_path / "s.db")
    before = projections(fx.store.projections_file.path)
    assert _prune(fx, tmp_path / "p.sqlite").outcome == "accepted"
    after = projections(fx.store.projections_file.path)
    assert [row[0] for row in after["runs"]] == ["run-4", "run-5"]
    assert len(before["runs"]) == 5
    fx.assert_rebuild_equals_live()
