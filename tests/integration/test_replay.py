"""Replay, rebuild and check: folding the log gives the live projections, and nothing else.

Databases are built through the command path with fixture F and a scripted
continuation (one clock reading per step), so a database built from the first
steps only is exactly the log's prefix and its live projections.  Damage is
done by hand with plain SQL, outside pwf.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
from typing import TYPE_CHECKING, Final

import pytest

import pwf.fold.decode
import pwf.fold.parallel
import pwf.fold.rebuild
from pwf._sqlite import dump
from pwf.cli._options import open_store
from pwf.errors import ChainError, InputError, StoreBusyError, StoreError
from pwf.fold.rebuild import rebuild
from pwf.fold.replay import replay
from pwf.projections import PROJECTIONS
from pwf.store.sqlite import SqliteStore
from pwf.verify import check

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests._tamper import editable
    from tests.integration._harness import ATTEMPT, RUN, Fixture, edit

    from pwf.events import Entry
    from pwf.store import EventStore
else:
    from _harness import ATTEMPT, RUN, Fixture, edit

    from _tamper import editable

STEPS: Final[tuple[Callable[[Fixture], object], ...]] = (
    lambda fx: fx.request("run.status", {}, RUN, at=2000),
    lambda fx: fx.submit({"reply": "x"}, at=3000),
    lambda fx: fx.validate(at=4000),
    lambda fx: fx.ok("interaction.accept", {}, at=5000),
    lambda fx: fx.ok("node.finished", {"output": {"reply": "x"}}, attempt=ATTEMPT, at=6000),
    lambda fx: fx.ok("run.finished", {"status": "completed", "finalOutput": {}}, at=7000),
)
"""Fixture F continued: a status request, a submission, its validation, the run's end."""


def _build(path: Path, steps: int = len(STEPS)) -> Path:
    """Fixture F plus the first ``steps`` steps, closed (so no WAL is left behind)."""
    fixture = Fixture.f(path)
    for step in STEPS[:steps]:
        step(fixture)
    fixture.close()
    return path


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    connection = sqlite3.connect(path)
    try:
        return dump(connection)
    finally:
        connection.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _head(path: Path) -> tuple[int, str | None, int]:
    with SqliteStore(path, read_only=True) as store:
        head = store.head()
    return head.seq, head.content_hash, head.batch


@pytest.fixture
def live(tmp_path: Path) -> Path:
    """The whole script: run-1 asked, answered, validated and completed."""
    return _build(tmp_path / "live.db")


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """The same script stopped after the submission (clock 3 000): a prefix of the live log."""
    return _build(tmp_path / "prefix.db", steps=2)


def _store(path: Path) -> EventStore:
    return open_store(str(path))


def _batches(path: Path) -> list[tuple[int, int, int]]:
    """(batch, first seq, last seq) of every batch of the log."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            "SELECT batch, min(seq), max(seq) FROM events GROUP BY batch ORDER BY batch"
        ).fetchall()
    finally:
        connection.close()
    return [(int(batch), int(first), int(last)) for batch, first, last in rows]


@pytest.fixture(params=["one process", "split"], autouse=True)
def fold_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs twice: folding in one process, and split with a forked process."""
    mode: str = request.param
    if mode == "split":
        monkeypatch.setattr(pwf.fold.parallel, "SPLIT_FROM", 1)
        monkeypatch.setattr(pwf.fold.parallel, "processors", lambda: 2)
    return mode


def _rows_and_rowids(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table but the log, with its rowid, and the schema in its order."""
    connection = sqlite3.connect(path)
    try:
        found: dict[str, list[tuple[object, ...]]] = {
            "sqlite_master": connection.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"
            ).fetchall()
        }
        for (table,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'events'"
        ).fetchall():
            found[table] = connection.execute(
                f'SELECT rowid, * FROM "{table}" ORDER BY rowid'  # noqa: S608 - names from sqlite_master
            ).fetchall()
    finally:
        connection.close()
    return found


class TestSplitFold:
    """A forked process folding some read models gives the same rows, rowids and schema."""

    def test_replays_are_identical(
        self, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The same log replayed in one process and split gives the same file content."""
        monkeypatch.setattr(pwf.fold.parallel, "SPLIT_FROM", 10**9)
        with _store(live) as store:
            replay(store, tmp_path / "one.db", chunk=4)
        monkeypatch.setattr(pwf.fold.parallel, "SPLIT_FROM", 1)
        monkeypatch.setattr(pwf.fold.parallel, "processors", lambda: 2)
        with _store(live) as store:
            replay(store, tmp_path / "split.db", chunk=4)
        assert _rows_and_rowids(tmp_path / "one.db") == _rows_and_rowids(tmp_path / "split.db")

    def test_rebuild_equals_the_live_path(self, live: Path) -> None:
        """A rebuilt database holds what the live path wrote, rowids and schema order included."""
        before = _rows_and_rowids(live)
        with _store(live) as store:
            rebuild(store, chunk=5)
        assert before == _rows_and_rowids(live)

    def test_a_failing_forked_process_changes_nothing(
        self, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A forked process that raises fails the rebuild; live file and folder stay as before."""
        monkeypatch.setattr(pwf.fold.parallel, "SPLIT_FROM", 1)
        monkeypatch.setattr(pwf.fold.parallel, "processors", lambda: 2)

        def failing(part: pwf.fold.parallel.Part) -> int:
            raise RuntimeError(f"forked process crash in {part.names}")

        monkeypatch.setattr(pwf.fold.parallel, "fold_part", failing)
        digest, before = _digest(live), sorted(path.name for path in tmp_path.iterdir())
        with _store(live) as store, pytest.raises(StoreError, match="forked process crash"):
            rebuild(store)
        assert digest == _digest(live)
        assert before == sorted(path.name for path in tmp_path.iterdir())


class TestReplay:
    """``replay`` copies whole batches of the log into a new database and folds them."""

    def test_to_a_seq_equals_the_database_that_stopped_there(
        self, live: Path, prefix: Path, tmp_path: Path
    ) -> None:
        """Replaying to the prefix's head gives the prefix's head and live projections."""
        with _store(live) as store:
            report = replay(store, tmp_path / "out.db", until_seq=_head(prefix)[0])
        assert _head(prefix) == _head(tmp_path / "out.db")
        assert _dump(prefix) == _dump(tmp_path / "out.db")
        assert (_head(prefix)[0], _head(prefix)[0]) == (report.head.seq, report.requested)

    def test_a_seq_inside_a_batch_stops_at_the_batch_before(
        self, live: Path, tmp_path: Path
    ) -> None:
        """Batches are folded whole: a seq inside one rounds down to the end of the one before."""
        batch, first, last = next(item for item in _batches(live) if item[2] > item[1])
        with _store(live) as store:
            report = replay(store, tmp_path / "out.db", until_seq=first)
        assert (first - 1, batch - 1, first) == (
            report.head.seq,
            report.head.batch,
            report.requested,
        )
        assert last > first

    def test_until_time(self, live: Path, prefix: Path, tmp_path: Path) -> None:
        """``until_time`` keeps the events up to the first one stamped later."""
        with _store(live) as store:
            report = replay(store, tmp_path / "out.db", until_time=3500)
        assert _head(prefix) == _head(tmp_path / "out.db")
        assert _dump(prefix) == _dump(tmp_path / "out.db")
        assert _head(prefix)[0] == report.requested

    def test_the_whole_log_equals_live(self, live: Path, tmp_path: Path) -> None:
        """Without a limit every event is folded, and the result is the live projections."""
        with _store(live) as store:
            report = replay(store, tmp_path / "out.db")
        assert (_head(live), None) == (_head(tmp_path / "out.db"), report.requested)
        assert _dump(live) == _dump(tmp_path / "out.db")
        assert len(_dump(live)) == report.tables

    def test_the_file_is_a_pwf_database_with_an_intact_chain(
        self, live: Path, prefix: Path, tmp_path: Path
    ) -> None:
        """The copy verifies, opens as a store and holds the log's bytes verbatim."""
        with _store(live) as store:
            replay(store, tmp_path / "out.db", until_seq=_head(prefix)[0])
            expected = [item.body for item in store.read(1, _head(prefix)[0])]
        with open_store(str(tmp_path / "out.db"), read_only=True) as copy:
            assert copy.verify().ok
            assert expected == [item.body for item in copy.read()]

    def test_past_the_head_folds_everything(self, live: Path, tmp_path: Path) -> None:
        """A seq beyond the log is the whole log; the report says how far was asked."""
        with _store(live) as store:
            report = replay(store, tmp_path / "out.db", until_seq=10**6)
        assert (_head(live)[0], 10**6, _head(live)[0]) == (
            report.head.seq,
            report.requested,
            report.log_seq,
        )

    def test_zero_writes_an_empty_database(self, live: Path, tmp_path: Path) -> None:
        """``until_seq=0`` folds nothing but still writes every table."""
        with _store(live) as store:
            report = replay(store, tmp_path / "out.db", until_seq=0)
        assert (0, None, 0) == _head(tmp_path / "out.db")
        assert all(not rows for rows in _dump(tmp_path / "out.db").values())
        assert len(_dump(live)) == report.tables

    def test_an_existing_file_is_refused(self, live: Path, tmp_path: Path) -> None:
        """The output must be new; the existing file is left alone."""
        (tmp_path / "out.db").write_bytes(b"keep")
        with _store(live) as store, pytest.raises(InputError, match="already exists"):
            replay(store, tmp_path / "out.db")
        assert b"keep" == (tmp_path / "out.db").read_bytes()

    def test_both_limits_are_refused(self, live: Path, tmp_path: Path) -> None:
        """A seq and a time together are ambiguous."""
        with _store(live) as store, pytest.raises(InputError, match="not both"):
            replay(store, tmp_path / "out.db", until_seq=3, until_time=3000)

    def test_a_broken_chain_stops_and_leaves_nothing(self, live: Path, tmp_path: Path) -> None:
        """A tampered body fails the fold at its seq; no output or scratch file remains."""
        edit(
            live,
            "UPDATE events SET body = CAST(replace(body, 'run-1', 'run-9') AS BLOB) WHERE seq = 3",
        )
        before = sorted(path.name for path in tmp_path.iterdir())
        with _store(live) as store, pytest.raises(ChainError, match="seq 3"):
            replay(store, tmp_path / "out.db")
        assert before == sorted(path.name for path in tmp_path.iterdir())

    @pytest.mark.parametrize(
        ("change", "reason"),
        [
            ({"type": "no.such.event"}, "unknown event type: no.such.event"),
            ({"data": {"unexpected": 1}}, "Object contains unknown field `unexpected`"),
            ({"batch": "two"}, "envelope: Expected `int`, got `str`"),
        ],
    )
    def test_bytes_no_event_type_reads_stop_the_fold_at_their_seq(
        self,
        live: Path,
        tmp_path: Path,
        forge: Callable[[dict[str, object]], bytes],
        change: dict[str, object],
        reason: str,
    ) -> None:
        """A self-consistent body that is no known event fails the fold there; no file is left."""
        connection = editable(sqlite3.connect(live))
        try:
            [body] = connection.execute("SELECT body FROM events WHERE seq = 3").fetchone()
            document = json.loads(body) | change
            with connection:
                connection.execute("UPDATE events SET body = ? WHERE seq = 3", (forge(document),))
        finally:
            connection.close()
        with _store(live) as store, pytest.raises(ChainError) as caught:
            replay(store, tmp_path / "out.db")
        assert (3, True) == (caught.value.seq, reason in caught.value.reason)
        assert [] == [path for path in tmp_path.iterdir() if path.name.startswith("out.db")]


class TestRebuild:
    """``rebuild`` swaps freshly folded tables in under the write lock, or changes nothing."""

    def test_keeps_the_projections_equal(self, live: Path) -> None:
        """Rebuilding a sound database changes no row and reports every event and table."""
        before = _dump(live)
        with _store(live) as store:
            report = rebuild(store, chunk=7)
        assert before == _dump(live)
        assert (_head(live)[0], len(before)) == (report.events, report.tables)

    def test_fixes_a_hand_corrupted_row(self, live: Path) -> None:
        """A changed cell and a deleted row come back as the log says."""
        before = _dump(live)
        edit(
            live,
            "UPDATE runs SET status = 'failed' WHERE run_id = 'run-1'",
            "DELETE FROM blobs WHERE rowid = (SELECT min(rowid) FROM blobs)",
        )
        assert before != _dump(live)
        with _store(live) as store:
            rebuild(store)
        assert before == _dump(live)

    def test_resets_checkpoints_to_the_head_and_the_code_version(self, live: Path) -> None:
        """A projection at another version is rebuilt at this one, and every checkpoint moves."""
        edit(live, "UPDATE _pwf_checkpoint SET version = 99, last_seq = 1")
        with _store(live) as store:
            rebuild(store)
            found = set(store.reader().table("SELECT version, last_seq FROM _pwf_checkpoint")[1])
        assert {(projection.VERSION, _head(live)[0]) for projection in PROJECTIONS} == found

    def test_a_failed_fold_leaves_the_live_file_untouched(
        self, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A fold dying midway leaves the live file byte for byte the same and no scratch file."""
        digest, before = _digest(live), sorted(path.name for path in tmp_path.iterdir())
        _fail_at(monkeypatch, seq=_head(live)[0] // 2)
        with _store(live) as store, pytest.raises(RuntimeError, match="crash"):
            rebuild(store, chunk=3)
        assert digest == _digest(live)
        assert before == sorted(path.name for path in tmp_path.iterdir())

    def test_a_failed_swap_rolls_back(
        self, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The swap dies after dropping and refilling the tables: its transaction rolls back."""
        edit(live, "UPDATE runs SET status = 'failed' WHERE run_id = 'run-1'")
        digest, before = _digest(live), sorted(path.name for path in tmp_path.iterdir())
        swap = pwf.fold.rebuild._swap

        def swap_then_crash(connection: sqlite3.Connection) -> int:
            swap(connection)
            raise RuntimeError("crash")

        monkeypatch.setattr(pwf.fold.rebuild, "_swap", swap_then_crash)
        with _store(live) as store, pytest.raises(RuntimeError, match="crash"):
            rebuild(store)
        assert digest == _digest(live)
        assert before == sorted(path.name for path in tmp_path.iterdir())

    def test_events_appended_during_the_build_are_folded_too(self, live: Path) -> None:
        """The tail written while the scratch file was being built is folded under the lock."""
        appender = _Appender(live)
        with _store(live) as store:
            report = rebuild(store, chunk=5, progress=appender.once)
            assert check(store).ok
        assert (True, _head(live)[0]) == (appender.appended, report.events)

    def test_waits_for_the_write_lock_and_gives_up(self, live: Path, tmp_path: Path) -> None:
        """Another writer holding the lock past the timeout fails the rebuild, changing nothing."""
        digest, before = _digest(live), sorted(path.name for path in tmp_path.iterdir())
        blocker = sqlite3.connect(live, isolation_level=None)
        try:
            with SqliteStore(live, busy_timeout_ms=50) as store:
                blocker.execute("BEGIN IMMEDIATE")
                with pytest.raises(StoreBusyError):
                    rebuild(store)
        finally:
            blocker.close()
        assert digest == _digest(live)
        assert before == sorted(path.name for path in tmp_path.iterdir())


class _Appender:
    """A progress callback that appends one request through another connection, once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.appended = False

    def once(self, done: int, total: int) -> None:
        if self.appended:
            return
        assert 0 < done <= total
        fixture = Fixture(self.path)
        fixture.request("run.status", {}, RUN, rid="late", key="late", at=9000)
        fixture.close()
        self.appended = True


def _fail_at(monkeypatch: pytest.MonkeyPatch, *, seq: int) -> None:
    """Make decoding the event at ``seq`` raise, as a crash in the middle of the fold would."""
    decode = pwf.fold.decode.entry_at

    def failing(expected: int, stored: int, body: bytes) -> Entry:
        if expected == seq:
            raise RuntimeError("crash")
        return decode(expected, stored, body)

    monkeypatch.setattr(pwf.fold.decode, "entry_at", failing)


class TestCheck:
    """``check`` verifies the chain, then compares every live table with a rebuild."""

    def test_a_sound_database_is_ok(self, live: Path) -> None:
        """Chain intact and every table equal: the report counts events and tables."""
        with _store(live) as store:
            found = check(store)
        assert (True, _head(live)[0], len(_dump(live))) == (
            found.ok,
            found.chain.events,
            found.tables,
        )

    def test_a_corrupted_cell_names_table_key_and_column(self, live: Path) -> None:
        """The first differing table, the row's primary key and both values of the column."""
        edit(live, "UPDATE runs SET status_detail = 'tampered' WHERE run_id = 'run-1'")
        with _store(live) as store:
            found = check(store)
        assert not found.ok
        assert found.difference is not None
        assert "runs" == found.difference.table
        [row] = found.difference.rows
        assert ({"run_id": RUN}, "changed") == (row.key, row.kind)
        assert ["status_detail"] == list(row.columns)
        assert "tampered" == row.columns["status_detail"][0]

    def test_missing_and_extra_rows(self, live: Path) -> None:
        """A deleted row is only in the rebuild; an invented one only in live."""
        edit(
            live,
            "DELETE FROM blobs WHERE rowid = (SELECT min(rowid) FROM blobs)",
            "INSERT INTO blobs (blob_hash, media_type, byte_length, content, created_at)"
            " VALUES (zeroblob(32), 'text/plain', 1, CAST('x' AS BLOB), 1)",
        )
        with _store(live) as store:
            found = check(store, rows=10)
        assert found.difference is not None
        kinds = {row.kind: row.key for row in found.difference.rows}
        assert {"onlyInLive", "onlyInRebuild"} == set(kinds)
        assert {"blob_hash": "00" * 32} == kinds["onlyInLive"]

    def test_rows_are_limited(self, live: Path) -> None:
        """At most ``rows`` differing rows are reported."""
        edit(live, "UPDATE blobs SET created_at = created_at + 1")
        with _store(live) as store:
            found = check(store, rows=2)
        assert found.difference is not None
        assert ("blobs", 2) == (found.difference.table, len(found.difference.rows))

    def test_a_tampered_body_names_its_seq(self, live: Path) -> None:
        """A changed event body fails the chain at its seq, before any table is compared."""
        edit(
            live,
            "UPDATE events SET body = CAST(replace(body, 'run-1', 'run-9') AS BLOB) WHERE seq = 3",
        )
        with _store(live) as store:
            found = check(store)
        assert (False, 3, None) == (found.ok, found.chain.first_bad_seq, found.difference)

    def test_a_dropped_table_is_named(self, live: Path) -> None:
        """A projection table missing from the live database is the difference."""
        edit(live, "DROP TABLE run_workers")
        with _store(live) as store:
            found = check(store)
        assert found.difference is not None
        assert ("run_workers", ()) == (found.difference.table, found.difference.rows)

    def test_events_appended_during_the_fold_are_compared_too(self, live: Path) -> None:
        """The comparison sees the live tables and the rebuild at one and the same seq."""
        appender = _Appender(live)
        with open_store(str(live), read_only=True) as store:
            found = check(store, chunk=5, progress=appender.once)
        assert (True, True, _head(live)[0]) == (appender.appended, found.ok, found.chain.events)

    def test_a_lagging_checkpoint_is_named(self, live: Path) -> None:
        """A projection whose checkpoint is behind the log is reported before any table."""
        edit(live, "UPDATE _pwf_checkpoint SET last_seq = 1 WHERE projection = 'runs'")
        with _store(live) as store:
            found = check(store)
        assert found.difference is not None
        [row] = found.difference.rows
        assert ("_pwf_checkpoint", {"projection": "runs"}) == (found.difference.table, row.key)
        assert {"last_seq": (1, _head(live)[0])} == row.columns

    def test_an_unwritable_directory_uses_the_temporary_one(
        self, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An auditor's read-only copy is still checked, with the scratch file elsewhere."""
        mkstemp = tempfile.mkstemp

        def refusing(prefix: str, dir: str | None = None) -> tuple[int, str]:  # noqa: A002 - tempfile's name
            if dir is not None:
                raise PermissionError(13, "read-only", dir)
            return mkstemp(prefix=prefix)

        monkeypatch.setattr(tempfile, "mkstemp", refusing)
        before = sorted(path.name for path in tmp_path.iterdir())
        with _store(live) as store:
            assert check(store).ok
            with pytest.raises(PermissionError):
                rebuild(store)
        assert before == sorted(path.name for path in tmp_path.iterdir())

    def test_leaves_no_scratch_file(self, live: Path, tmp_path: Path) -> None:
        """The rebuild used for the comparison is deleted afterwards."""
        before = sorted(path.name for path in tmp_path.iterdir())
        with _store(live) as store:
            check(store)
        assert before == sorted(path.name for path in tmp_path.iterdir())


class TestLogBreakingAnIndex:
    """A log that the live path would have refused cannot be folded, and nothing changes."""

    def test_rebuild_names_the_index_and_leaves_the_database(self, tmp_path: Path) -> None:
        """A forged second pending step message of one source stops the rebuild cleanly."""
        from pwf import canonical  # noqa: PLC0415 - only this test forges events
        from pwf.errors import StoreError  # noqa: PLC0415 - same as above
        from pwf.events import Actor, MessageCreated  # noqa: PLC0415 - same as above

        db = tmp_path / "s.db"
        Fixture.f(db).close()
        forged = MessageCreated(
            workflow_message_id="workflow-message-forged",
            run_id=RUN,
            target_session_id="s-1",
            kind="step",
            source_id=f"interaction-{RUN}-{ATTEMPT}",
            content=canonical.raw({"forged": True}),
            order_number=99,
        )
        with SqliteStore(db) as raw:  # no read model: the forgery skips the live checks
            raw.append([forged], at=9_000, actor=Actor(type="system", id="forger"))
        before = hashlib.sha256(db.read_bytes()).hexdigest()
        with open_store(str(db)) as store, pytest.raises(StoreError) as caught:
            rebuild(store)
        assert "breaks its index workflow_messages_pending_step_source_idx" in str(caught.value)
        assert before == hashlib.sha256(db.read_bytes()).hexdigest()
        assert [] == [p for p in tmp_path.iterdir() if ".rebuild-" in p.name]

    def test_rebuild_names_the_check_constraint_and_leaves_the_database(
        self, tmp_path: Path
    ) -> None:
        """A forged outcome for an operation the table does not know breaks a CHECK."""
        from pwf.errors import StoreError  # noqa: PLC0415 - only this test forges events
        from pwf.events import Actor, CommandRecorded  # noqa: PLC0415 - same as above

        db = tmp_path / "s.db"
        Fixture.f(db).close()
        forged = CommandRecorded(
            request_id="req-forged",
            client_id="client-forged",
            operation="no.such.operation",
            idempotency_key="key-forged",
            fingerprint="a" * 64,
            outcome="accepted",
        )
        with SqliteStore(db) as raw:  # no read model: the forgery skips the live checks
            raw.append([forged], at=9_000, actor=Actor(type="system", id="forger"))
        before = hashlib.sha256(db.read_bytes()).hexdigest()
        for fold in (rebuild, lambda store: replay(store, tmp_path / "out.db")):
            with open_store(str(db)) as store, pytest.raises(StoreError) as caught:
                fold(store)
            assert "read model host_commands breaks a CHECK constraint" in str(caught.value)
            assert "operation IN (" in str(caught.value)
        assert before == hashlib.sha256(db.read_bytes()).hexdigest()
        assert [] == [p for p in tmp_path.iterdir() if p.name != "s.db"]
