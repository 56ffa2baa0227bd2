"""Verifying the chain from stored bytes: tampering is found at its first bad seq.

Tampering goes straight to the ``events`` view with SQL, as an attacker or a
damaged disk would change format v1's table (:func:`tests._tamper.editable`);
the tables are STRICT, so bodies are bound as bytes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwf import canonical
from pwf.errors import InputError, NotPwfDatabaseError, PwfError, StoreBusyError, StoreError
from pwf.events import Actor, CommandRecorded, CommandRefused, Sealed, seal
from pwf.store import Head, VerifyReport
from pwf.store.sqlite import SqliteStore, translate_error

if TYPE_CHECKING:
    from tests._tamper import editable
else:
    from _tamper import editable

AppendBatches = Callable[..., list[list[Sealed]]]
Reseal = Callable[[dict[str, Any]], bytes]

SIZES = (1, 3, 2, 1)
"""Batches of the test log: seqs 1 | 2 3 4 | 5 6 | 7."""
EVENTS = sum(SIZES)
AT = 1_764_403_200_000


def _body(store: SqliteStore, seq: int) -> bytes:
    [stored] = store.read(seq, seq)
    return stored.body


def _set_body(store: SqliteStore, seq: int, body: bytes) -> None:
    editable(store.connection).execute("UPDATE events SET body = ? WHERE seq = ?", (body, seq))


def _set_column(store: SqliteStore, seq: int, column: str, value: object) -> None:
    editable(store.connection)
    store.connection.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (value, seq))  # noqa: S608 - column names come from the test's own list


def _replace_byte(body: bytes, offset: int, new: int) -> bytes:
    assert body[offset] != new
    return body[:offset] + bytes([new]) + body[offset + 1 :]


def _insert(store: SqliteStore, item: Sealed) -> None:
    """Write a sealed event as a row whose columns agree with its bytes."""
    entry = item.entry
    editable(store.connection).execute(
        "INSERT INTO events (seq, batch, type, at, run_id, session_id, request_id, client_id,"
        " idempotency_key, content_hash, prev_hash, body) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            entry.seq,
            entry.batch,
            entry.type,
            entry.at,
            entry.event.index_run_id(),
            entry.event.index_session_id(),
            entry.cause.request_id if entry.cause else None,
            entry.cause.client_id if entry.cause else None,
            entry.cause.idempotency_key if entry.cause else None,
            entry.content_hash,
            entry.prev_hash,
            item.body,
        ),
    )


def _refused(error: str) -> CommandRefused:
    return CommandRefused(
        request_id="req-refused",
        client_id="client-b",
        operation="run.start",
        idempotency_key="idem-refused",
        fingerprint="b" * 64,
        outcome="conflict",
        error=error,
    )


def _bad(report: VerifyReport) -> tuple[int | None, int]:
    """The first bad seq and how many events were found good before it."""
    assert not report.ok
    assert report.reason is not None
    assert "\n" not in report.reason
    return (report.first_bad_seq, report.events)


@pytest.fixture
def log(store: SqliteStore, fill: AppendBatches) -> SqliteStore:
    """A store holding seven events in four batches, its ``events`` editable (as v1's table)."""
    fill(store, SIZES)
    editable(store.connection)
    return store


class TestCleanLog:
    """An untouched log verifies."""

    def test_clean_log_verifies(self, log: SqliteStore) -> None:
        """Every event is checked and nothing is reported."""
        report = log.verify()
        assert (True, EVENTS, None, None) == (
            report.ok,
            report.events,
            report.first_bad_seq,
            report.reason,
        )
        assert log.head() == report.head

    def test_empty_log_verifies(self, store: SqliteStore) -> None:
        """A new store is a valid, empty chain."""
        assert VerifyReport(events=0, head=Head(0, None, 0)) == store.verify()

    def test_verify_reads_a_reopened_database(self, log: SqliteStore) -> None:
        """Verification works from the file alone, in a new read-only connection."""
        with SqliteStore(log.path, read_only=True) as again:
            assert again.verify().ok


class TestWhileAWriterAppends:
    """A writer appending during a verify does not make a sound log look broken."""

    @pytest.mark.parametrize("deep", [True, False])
    def test_head_and_events_come_from_one_snapshot(
        self, log: SqliteStore, fill: AppendBatches, deep: bool
    ) -> None:
        """Events appended after verify read the head are not mistaken for a head mismatch."""
        with SqliteStore(log.path) as writer, SqliteStore(log.path, read_only=True) as reader:
            origin = reader.origin

            def origin_then_append() -> Head:
                found = origin()
                fill(writer, [2])  # between reading the head and walking the events
                return found

            reader.origin = origin_then_append  # type: ignore[method-assign]
            report = reader.verify(deep=deep)
            assert (report.ok, report.events, report.head.seq) == (True, EVENTS, EVENTS), report
            assert reader.verify(deep=deep).events == EVENTS + 2


class TestTamperedBody:
    """Changed stored bytes are found at the event that holds them."""

    @pytest.mark.parametrize("seq", [1, 2, 4, 6, 7])
    @pytest.mark.parametrize(
        "where",
        [
            lambda _: 0,
            lambda body: body.index(b'"at":') + 6,
            lambda body: body.index(b'"contentHash":"') + 20,
            lambda body: body.index(b'"prevHash":') + 14,
            lambda body: body.index(b'"receipt":') + 12,
            lambda body: body.index(b'"temperature":') + 16,
            lambda body: body.index(b'"seq":') + 6,
            lambda body: len(body) // 2,
            lambda body: len(body) - 1,
        ],
        ids=["first", "at", "hash", "prev", "receipt", "float", "seq", "middle", "last"],
    )
    def test_one_changed_byte_is_found_at_its_seq(
        self, log: SqliteStore, seq: int, where: Callable[[bytes], int]
    ) -> None:
        """Replacing one byte of one body reports exactly that event's seq."""
        body = _body(log, seq)
        offset = where(body)
        _set_body(log, seq, _replace_byte(body, offset, (body[offset] + 1) % 256))
        assert (seq, seq - 1) == _bad(log.verify())

    def test_every_byte_position_of_a_body_is_covered(self, log: SqliteStore) -> None:
        """For each offset of event 4, a changed byte there is reported at seq 4."""
        body = _body(log, 4)
        missed = []
        for offset in range(len(body)):
            new = ord("0") if body[offset] != ord("0") else ord("1")
            _set_body(log, 4, _replace_byte(body, offset, new))
            report = log.verify()
            if report.first_bad_seq != 4:
                missed.append(offset)
        _set_body(log, 4, body)
        assert [] == missed
        assert log.verify().ok

    def test_changed_content_hash_member(self, log: SqliteStore) -> None:
        """A contentHash member naming other bytes is found at its event."""
        body = _body(log, 3)
        claimed = json.loads(body)["contentHash"]
        _set_body(log, 3, body.replace(claimed.encode(), b"0" * 64))
        report = log.verify()
        assert (3, 2) == _bad(report)
        assert "content hash" in (report.reason or "")

    def test_resealed_body_is_caught_by_its_stale_hash_column(
        self, log: SqliteStore, forge: Reseal
    ) -> None:
        """An edited body with a recomputed hash disagrees with its own indexed hash column."""
        document = json.loads(_body(log, 5))
        document["data"]["outcome"] = "rejected"
        _set_body(log, 5, forge(document))
        report = log.verify()
        assert (5, 4) == _bad(report)
        assert "content_hash" in (report.reason or "")

    def test_consistent_forgery_is_caught_by_the_next_prev_hash(
        self, log: SqliteStore, forge: Reseal
    ) -> None:
        """A forged event with matching columns breaks the next event's prevHash."""
        document = json.loads(_body(log, 5))
        document["data"]["outcome"] = "rejected"
        forged = forge(document)
        _set_body(log, 5, forged)
        _set_column(log, 5, "content_hash", json.loads(forged)["contentHash"])
        report = log.verify()
        assert (6, 5) == _bad(report)
        assert "prevHash" in (report.reason or "")

    def test_batch_that_skips_ahead_is_found(self, log: SqliteStore, forge: Reseal) -> None:
        """A self-consistent event whose batch number jumps is refused at its seq."""
        document = json.loads(_body(log, 7))
        document["batch"] = 9
        forged = forge(document)
        _set_body(log, 7, forged)
        _set_column(log, 7, "batch", 9)
        _set_column(log, 7, "content_hash", json.loads(forged)["contentHash"])
        report = log.verify()
        assert (7, 6) == _bad(report)
        assert "batch 9" in (report.reason or "")

    def test_body_that_is_not_an_event_is_found(self, log: SqliteStore) -> None:
        """Canonical JSON that is no event is reported at its seq."""
        _set_body(log, 2, b'{"hello":"world"}')
        assert (2, 1) == _bad(log.verify())

    def test_canonical_body_msgspec_cannot_decode_is_reported(self, log: SqliteStore) -> None:
        """A canonical body with a lone surrogate escape is reported, never raised."""
        body = _body(log, 3).replace(b'"status":"running"', b'"status":"\\ud800"')
        assert canonical.parse_line(body) is not None
        _set_body(log, 3, body)
        assert (3, 2) == _bad(log.verify())


class TestTamperedColumns:
    """Indexed columns must say what the stored bytes say."""

    @pytest.mark.parametrize("seq", [1, 4, 7])
    @pytest.mark.parametrize(
        ("column", "value"),
        [
            ("type", "command.refused"),
            ("run_id", "run-evil"),
            ("run_id", None),
            ("content_hash", "f" * 64),
            ("prev_hash", "0" * 64),
            ("request_id", "req-evil"),
            ("client_id", "client-evil"),
            ("idempotency_key", "idem-evil"),
            ("session_id", "session-evil"),
            ("at", 0),
            ("batch", 99),
        ],
    )
    def test_changed_column_is_found_at_its_seq(
        self, log: SqliteStore, seq: int, column: str, value: object
    ) -> None:
        """Changing one indexed column of one row names that seq and that column."""
        _set_column(log, seq, column, value)
        report = log.verify()
        assert (seq, seq - 1) == _bad(report)
        assert f"indexed column {column} disagrees" in (report.reason or "")

    def test_renumbered_row_leaves_a_gap(self, log: SqliteStore) -> None:
        """A row moved to another seq leaves its old seq missing."""
        _set_column(log, 4, "seq", 100)
        report = log.verify()
        assert (4, 3) == _bad(report)
        assert "missing" in (report.reason or "")


class TestMissingAndMovedEvents:
    """Deleted, reordered and forged events."""

    @pytest.mark.parametrize("seq", [1, 2, 4, 6])
    def test_deleted_event_is_found_at_its_seq(self, log: SqliteStore, seq: int) -> None:
        """Deleting an event that is not the last reports the deleted seq."""
        log.connection.execute("DELETE FROM events WHERE seq = ?", (seq,))
        report = log.verify()
        assert (seq, seq - 1) == _bad(report)
        assert f"seq {seq} is missing" in (report.reason or "")

    def test_deleted_last_event_is_found_through_the_head(self, log: SqliteStore) -> None:
        """The head still names the deleted last event, so its seq is reported."""
        log.connection.execute("DELETE FROM events WHERE seq = ?", (EVENTS,))
        report = log.verify()
        assert (EVENTS, EVENTS - 1) == _bad(report)
        assert f"head says seq {EVENTS}" in (report.reason or "")

    def test_deleted_tail_is_found_through_the_head(self, log: SqliteStore) -> None:
        """Cutting the last batch off reports the first seq that went missing."""
        log.connection.execute("DELETE FROM events WHERE seq >= 5")
        assert (5, 4) == _bad(log.verify())

    def test_all_events_deleted(self, log: SqliteStore) -> None:
        """An emptied log whose head remembers events reports seq 1."""
        log.connection.execute("DELETE FROM events")
        assert (1, 0) == _bad(log.verify())

    @pytest.mark.parametrize(("first", "second"), [(1, 2), (3, 5), (6, 7), (2, 7)])
    def test_swapped_bodies_are_found_at_the_first(
        self, log: SqliteStore, first: int, second: int
    ) -> None:
        """Exchanging the bodies of two events reports the earlier of the two."""
        one, two = _body(log, first), _body(log, second)
        _set_body(log, first, two)
        _set_body(log, second, one)
        assert (first, first - 1) == _bad(log.verify())

    def test_swapped_rows_are_found_at_the_first(self, log: SqliteStore) -> None:
        """Exchanging whole rows (their seq numbers swapped) reports the earlier seq."""
        for old, new in ((3, 1000), (4, 3), (1000, 4)):
            log.connection.execute("UPDATE events SET seq = ? WHERE seq = ?", (new, old))
        assert (3, 2) == _bad(log.verify())

    @pytest.mark.parametrize("move_head", [False, True])
    def test_forged_event_at_the_end_with_a_wrong_prev_hash(
        self, log: SqliteStore, command: Callable[..., CommandRecorded], move_head: bool
    ) -> None:
        """An appended event whose prevHash does not chain is found at its seq."""
        head = log.head()
        forged = seal(
            command(99),
            seq=EVENTS + 1,
            batch=head.batch + 1,
            at=AT,
            actor=Actor(type="human", id="mallory"),
            cause=None,
            event_id=f"evt-{EVENTS + 1}",
            prev_hash="0" * 64,
        )
        _insert(log, forged)
        if move_head:
            log.connection.execute(
                "UPDATE _pwf_head SET seq = ?, content_hash = ?, batch = ?",
                (EVENTS + 1, forged.entry.content_hash, head.batch + 1),
            )
        report = log.verify()
        assert (EVENTS + 1, EVENTS) == _bad(report)
        assert "prevHash" in (report.reason or "")

    def test_event_beyond_the_head_is_found(self, log: SqliteStore) -> None:
        """A well-chained event the head does not know of is reported at its seq."""
        head = log.head()
        extra = seal(
            _refused("late"),
            seq=EVENTS + 1,
            batch=head.batch + 1,
            at=AT,
            actor=Actor(type="system", id="pwf"),
            cause=None,
            event_id=f"evt-{EVENTS + 1}",
            prev_hash=head.content_hash,
        )
        _insert(log, extra)
        report = log.verify()
        assert (EVENTS + 1, EVENTS + 1) == _bad(report)
        assert "head says seq" in (report.reason or "")

    def test_forged_last_event_is_reported_at_its_seq(
        self, log: SqliteStore, forge: Reseal
    ) -> None:
        """A consistent forgery of the last event is reported at that event, not past it."""
        document = json.loads(_body(log, EVENTS))
        document["data"]["outcome"] = "rejected"
        forged = forge(document)
        _set_body(log, EVENTS, forged)
        _set_column(log, EVENTS, "content_hash", json.loads(forged)["contentHash"])
        report = log.verify()
        assert "head" in (report.reason or "")
        assert (EVENTS, EVENTS) == _bad(report)


class TestEverythingAppendedVerifies:
    """What append accepts, verify and entries must read back."""

    def test_lone_surrogate_text_is_refused_or_reads_back(
        self, store: SqliteStore, actor: Actor
    ) -> None:
        """An event holding a lone surrogate is either refused on append or verifies."""
        event = _refused("half a pair: \ud800")
        try:
            store.append([event], at=AT, actor=actor)
        except InputError:
            assert Head(0, None, 0) == store.head()
            return
        assert store.verify().ok
        assert [event] == [entry.event for entry in store.entries()]

    def test_large_event_is_refused_or_reads_back(self, store: SqliteStore, actor: Actor) -> None:
        """An event with a receipt over 1 MiB is either refused on append or verifies."""
        event = CommandRecorded(
            request_id="req-big",
            client_id="client-a",
            operation="run.start",
            idempotency_key="idem-big",
            fingerprint="c" * 64,
            outcome="accepted",
            receipt=canonical.raw({"transcript": "x" * 1_100_000}),
        )
        try:
            store.append([event], at=AT, actor=actor)
        except InputError:
            assert Head(0, None, 0) == store.head()
            return
        assert VerifyReport(events=1, head=store.head()) == store.verify()


# --------------------------------------------------------------------------- property

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, fill: AppendBatches) -> Path:
    """A closed database file holding the seven-event test log, copied per example."""
    path = tmp_path_factory.mktemp("template") / "pwf.db"
    with SqliteStore(path, create=True, synchronous="NORMAL") as store:
        fill(store, SIZES)
    return path


@SETTINGS
@given(
    index=st.integers(min_value=0, max_value=EVENTS - 1),
    position=st.integers(min_value=0, max_value=2**16),
    delta=st.integers(min_value=1, max_value=255),
)
def test_any_changed_byte_is_found_at_its_seq(
    template: Path, index: int, position: int, delta: int
) -> None:
    """Changing any single byte of any stored body to another byte is reported at that seq."""
    seq = index + 1
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "pwf.db"
        shutil.copyfile(template, path)
        with SqliteStore(path, synchronous="NORMAL") as store:
            body = _body(store, seq)
            offset = position % len(body)
            _set_body(store, seq, _replace_byte(body, offset, (body[offset] + delta) % 256))
            report = store.verify()
    assert (False, seq, seq - 1) == (report.ok, report.first_bad_seq, report.events)


# --------------------------------------------------------------------------- error mapping

PATH = Path("/srv/pwf/state.db")


def _coded(error: sqlite3.Error, code: int) -> sqlite3.Error:
    """``error`` as SQLite raises it: with its (extended) result code."""
    error.sqlite_errorcode = code
    return error


class TestTranslateError:
    """sqlite3 errors become pwf errors at the store's edge by their code (STYLE §5)."""

    @pytest.mark.parametrize(
        ("error", "expected_type", "says"),
        [
            (
                _coded(sqlite3.OperationalError("database is locked"), sqlite3.SQLITE_BUSY),
                StoreBusyError,
                "locked by another",
            ),
            (
                _coded(sqlite3.OperationalError("database table is locked"), sqlite3.SQLITE_LOCKED),
                StoreBusyError,
                "locked",
            ),
            (
                _coded(sqlite3.OperationalError("database is busy"), 261),
                StoreBusyError,
                "locked by another",
            ),
            (
                _coded(
                    sqlite3.OperationalError("attempt to write a readonly database"),
                    sqlite3.SQLITE_READONLY,
                ),
                StoreError,
                "the database is read-only",
            ),
            (
                _coded(sqlite3.OperationalError("database or disk is full"), sqlite3.SQLITE_FULL),
                StoreError,
                "disk failed",
            ),
            (
                _coded(sqlite3.OperationalError("disk I/O error"), 266),
                StoreError,
                "disk failed or is full",
            ),
            (
                _coded(sqlite3.DatabaseError("file is not a database"), sqlite3.SQLITE_NOTADB),
                NotPwfDatabaseError,
                "not a pwf database",
            ),
            (
                _coded(
                    sqlite3.DatabaseError("database disk image is malformed"),
                    sqlite3.SQLITE_CORRUPT,
                ),
                NotPwfDatabaseError,
                "not a pwf database or damaged",
            ),
            (
                _coded(
                    sqlite3.OperationalError("unable to open database file"),
                    sqlite3.SQLITE_CANTOPEN,
                ),
                StoreError,
                "cannot open the database",
            ),
            (
                _coded(sqlite3.OperationalError("no such table: runs"), sqlite3.SQLITE_ERROR),
                StoreError,
                "no such table: runs",
            ),
            (
                _coded(sqlite3.IntegrityError("UNIQUE constraint failed: events.seq"), 2067),
                StoreError,
                "UNIQUE",
            ),
            (
                sqlite3.ProgrammingError("Cannot operate on a closed database."),
                StoreError,
                "closed",
            ),
        ],
        ids=[
            "locked",
            "table-locked",
            "busy",
            "readonly",
            "disk-full",
            "io",
            "not-a-database",
            "malformed",
            "unable-to-open",
            "other",
            "integrity",
            "programming",
        ],
    )
    def test_every_message_kind_maps_to_its_error(
        self, error: sqlite3.Error, expected_type: type[PwfError], says: str
    ) -> None:
        """Each kind of sqlite3 message becomes its pwf class with one line naming the path."""
        translated = translate_error(error, PATH)
        message = str(translated)
        assert expected_type is type(translated)
        assert [message] == message.splitlines()
        assert message.startswith(f"{PATH}: ")
        assert says in message
        assert str(error) in message
        assert (2 if expected_type is NotPwfDatabaseError else 3) == translated.exit_code

    def test_a_held_write_lock_is_a_busy_error(
        self, log: SqliteStore, command: Callable[..., CommandRecorded], actor: Actor
    ) -> None:
        """A writer that cannot get the lock within its timeout gets a StoreBusyError."""
        holder = sqlite3.connect(log.path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with SqliteStore(log.path, busy_timeout_ms=0) as impatient:
                with pytest.raises(StoreBusyError, match="locked by another writer"):
                    impatient.append([command(50)], at=AT, actor=actor)
                assert EVENTS == impatient.head().seq
            holder.execute("ROLLBACK")
        finally:
            holder.close()

    def test_writing_a_read_only_store_is_a_store_error(
        self, log: SqliteStore, command: Callable[..., CommandRecorded], actor: Actor
    ) -> None:
        """Appending through a read-only connection says the database is read-only."""
        with (
            SqliteStore(log.path, read_only=True) as reader,
            pytest.raises(StoreError, match="read-only"),
        ):
            reader.append([command(50)], at=AT, actor=actor)
        assert log.verify().ok

    def test_garbage_file_is_not_a_database(self, tmp_path: Path) -> None:
        """A file that is not SQLite says so, with its path."""
        path = tmp_path / "garbage.db"
        path.write_bytes(bytes(range(256)) * 64)
        with pytest.raises(StoreError, match="not a pwf database or damaged"):
            SqliteStore(path)

    def test_directory_cannot_be_opened(self, tmp_path: Path) -> None:
        """A directory in place of the database file says so."""
        with pytest.raises(InputError, match="is a directory, not a database file"):
            SqliteStore(tmp_path)


class TestChainOnly:
    """``verify(deep=False)`` walks the chain from the bytes alone and finds the same faults."""

    def test_clean_log_gives_the_deep_report(self, log: SqliteStore) -> None:
        """On an untouched log both walks report the same."""
        assert log.verify() == log.verify(deep=False)

    def test_every_changed_byte_is_found_at_its_seq(self, log: SqliteStore) -> None:
        """For each offset of event 4, a changed byte there is reported at seq 4."""
        body = _body(log, 4)
        missed = []
        for offset in range(len(body)):
            new = ord("0") if body[offset] != ord("0") else ord("1")
            _set_body(log, 4, _replace_byte(body, offset, new))
            if log.verify(deep=False).first_bad_seq != 4:
                missed.append(offset)
        _set_body(log, 4, body)
        assert [] == missed

    @pytest.mark.parametrize("seq", [1, 2, 4, 6])
    def test_deleted_event_is_found_at_its_seq(self, log: SqliteStore, seq: int) -> None:
        """A gap is reported at the missing seq."""
        log.connection.execute("DELETE FROM events WHERE seq = ?", (seq,))
        assert (seq, seq - 1) == _bad(log.verify(deep=False))

    @pytest.mark.parametrize(("first", "second"), [(1, 2), (3, 5), (2, 7)])
    def test_swapped_bodies_are_found_at_the_first(
        self, log: SqliteStore, first: int, second: int
    ) -> None:
        """Exchanging two bodies is reported at the earlier one."""
        one, two = _body(log, first), _body(log, second)
        _set_body(log, first, two)
        _set_body(log, second, one)
        assert first == _bad(log.verify(deep=False))[0]

    def test_deleted_tail_is_found_through_the_head(self, log: SqliteStore) -> None:
        """Cutting the last batch off reports the first seq that went missing."""
        log.connection.execute("DELETE FROM events WHERE seq >= 5")
        assert (5, 4) == _bad(log.verify(deep=False))

    def test_indexed_columns_are_not_its_business(self, log: SqliteStore) -> None:
        """A changed index column is left to the deep walk: the chain itself is intact."""
        _set_column(log, 3, "run_id", "run-forged")
        assert (True, 3) == (log.verify(deep=False).ok, log.verify().first_bad_seq)
