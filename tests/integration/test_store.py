"""The SQLite event store: batches, reads, look-ups, files, transactions, hooks, read model."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pwf import canonical
from pwf.errors import InputError, StoreError
from pwf.events import (
    Actor,
    Cause,
    CommandRecorded,
    CommandRefused,
    Entry,
    Event,
    Sealed,
    content_hash_of,
)
from pwf.projections import Sql
from pwf.readmodel import CHECKPOINT_TABLE, ReadModel
from pwf.store import Head
from pwf.store.sqlite import SCHEMA, SqliteStore

MakeCommand = Callable[..., CommandRecorded]
MakeCause = Callable[[CommandRecorded], Cause]
AppendBatches = Callable[..., list[list[Sealed]]]

AT = 1_764_403_200_000


def _seqs(store: SqliteStore, **where: Any) -> list[int]:
    return [stored.seq for stored in store.find(**where)]


def _count(path: Path, table: str = "events") -> int:
    """Count rows through a separate connection: it sees only what was committed."""
    other = sqlite3.connect(path)
    try:
        row = other.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608 - constant names
    finally:
        other.close()
    assert isinstance(row[0], int)
    return row[0]


def _refused(n: int) -> CommandRefused:
    return CommandRefused(
        request_id=f"req-refused-{n}",
        client_id="client-b",
        operation="run.start",
        idempotency_key=f"idem-refused-{n}",
        fingerprint=hashlib.sha256(f"refused {n}".encode()).hexdigest(),
        outcome="conflict",
        error="idempotency key reused with a different request",
    )


class Abort(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a test to abandon a transaction half way."""


def _append_then_abort(store: SqliteStore, *batches: Sequence[Event]) -> None:
    """Append ``batches`` in one transaction, then raise before it commits."""
    with store.transaction() as tx:
        for events in batches:
            tx.append(events, at=AT, actor=Actor(type="session", id="session-main"))
        raise Abort


class SessionNoted(Event, frozen=True, kw_only=True):
    """A test-only event that names a session, to exercise the session index."""

    TAG = "test.session-noted"

    session_id: str


class TestAppend:
    """Appending batches: seq, batch, chain, content hash and event id."""

    def test_seqs_are_gapless_from_one(self, store: SqliteStore, fill: AppendBatches) -> None:
        """Seqs run 1, 2, 3, … across batches with no gap."""
        fill(store, [1, 3, 2])
        assert list(range(1, 7)) == [stored.seq for stored in store.read()]

    def test_each_append_is_one_batch(self, store: SqliteStore, fill: AppendBatches) -> None:
        """Every event of one append carries the same batch number, counting up from 1."""
        batches = fill(store, [1, 3, 2])
        assert [[1], [2, 2, 2], [3, 3]] == [[item.entry.batch for item in b] for b in batches]
        assert [1, 2, 2, 2, 3, 3] == [entry.batch for entry in store.entries()]

    def test_prev_hash_chains_each_event_to_the_one_before(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """The first event has no prevHash; every later one names its predecessor's hash."""
        fill(store, [2, 1, 3])
        entries = list(store.entries())
        expected = [None] + [entry.content_hash for entry in entries[:-1]]
        assert expected == [entry.prev_hash for entry in entries]

    def test_content_hash_is_sha256_of_the_bytes_without_the_member(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """contentHash is the SHA-256 of the canonical envelope with that member removed."""
        fill(store, [2, 1])
        for stored in store.read():
            document = json.loads(stored.body)
            claimed = document.pop("contentHash")
            assert hashlib.sha256(canonical.encode(document)).hexdigest() == claimed
            assert claimed == content_hash_of(stored.body)

    def test_stored_bytes_are_canonical(self, store: SqliteStore, fill: AppendBatches) -> None:
        """Each stored body is already canonical: re-encoding its parsed value gives it back."""
        fill(store, [3])
        for stored in store.read():
            assert stored.body == canonical.encode(json.loads(stored.body))

    def test_envelope_members(
        self, store: SqliteStore, command: MakeCommand, cause: MakeCause, actor: Actor
    ) -> None:
        """The envelope holds the schema, type, time, actor, cause and the event's data."""
        event = command(7)
        [sealed] = store.append([event], at=AT, actor=actor, cause=cause(event))
        document = json.loads(sealed.body)
        assert "pwf.event.v1" == document["schema"]
        assert "command.recorded" == document["type"]
        assert AT == document["at"]
        assert {"id": "session-main", "type": "session"} == document["actor"]
        assert "req-7" == document["cause"]["requestId"]
        assert json.loads(canonical.encode(event)) == document["data"]

    def test_event_ids_derive_from_the_seq(self, store: SqliteStore, fill: AppendBatches) -> None:
        """eventId is ``evt-{seq}`` (ADR 0007)."""
        fill(store, [2, 2])
        assert ["evt-1", "evt-2", "evt-3", "evt-4"] == [e.event_id for e in store.entries()]

    def test_returned_bodies_are_the_stored_bytes(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """What append returns is byte for byte what the log holds."""
        batches = fill(store, [2, 3])
        assert [item.body for batch in batches for item in batch] == [
            stored.body for stored in store.read()
        ]

    def test_empty_batch_is_a_no_op(
        self, store: SqliteStore, fill: AppendBatches, actor: Actor
    ) -> None:
        """Appending no events returns nothing and moves neither seq nor batch."""
        fill(store, [2])
        before = store.head()
        assert [] == store.append([], at=AT, actor=actor)
        assert before == store.head()
        [[third]] = fill(store, [1], start=3)
        assert (3, 2) == (third.entry.seq, third.entry.batch)

    def test_head_of_an_empty_store(self, store: SqliteStore) -> None:
        """A new store's head is seq 0, no hash, batch 0."""
        assert Head(seq=0, content_hash=None, batch=0) == store.head()

    def test_head_names_the_last_event(self, store: SqliteStore, fill: AppendBatches) -> None:
        """The head holds the last event's seq, content hash and batch."""
        batches = fill(store, [1, 2])
        last = batches[-1][-1].entry
        assert Head(seq=3, content_hash=last.content_hash, batch=2) == store.head()

    def test_indexed_columns_come_from_the_event(
        self, store: SqliteStore, command: MakeCommand, cause: MakeCause, actor: Actor
    ) -> None:
        """The row's indexed columns repeat what the stored bytes say."""
        event = command(4, run_id="run-x", client_id="client-z")
        store.append([event], at=AT, actor=actor, cause=cause(event))
        row = store.connection.execute(
            "SELECT seq, batch, type, at, run_id, session_id, request_id, client_id,"
            " idempotency_key, prev_hash FROM events"
        ).fetchone()
        expected = (1, 1, "command.recorded", AT, "run-x", None, "req-4", "client-z", "idem-4")
        assert (*expected, None) == row

    def test_batch_without_cause_leaves_request_columns_empty(
        self, store: SqliteStore, actor: Actor
    ) -> None:
        """Events without a cause have no request, client or idempotency columns."""
        store.append([_refused(1)], at=AT, actor=actor)
        row = store.connection.execute(
            "SELECT request_id, client_id, idempotency_key FROM events"
        ).fetchone()
        assert (None, None, None) == row
        assert "cause" not in json.loads(next(store.read()).body)


class TestRead:
    """Reading ranges and typed entries back."""

    def test_read_streams_a_range_in_order(self, store: SqliteStore, fill: AppendBatches) -> None:
        """``read(first, last)`` yields exactly that inclusive range in seq order."""
        fill(store, [2, 3, 1])
        stream = store.read(2, 4)
        assert isinstance(stream, Iterator)
        assert [2, 3, 4] == [stored.seq for stored in stream]

    def test_read_without_last_runs_to_the_end(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """Without ``last`` the range runs to the head."""
        fill(store, [3, 2])
        assert [4, 5] == [stored.seq for stored in store.read(4)]

    def test_read_outside_the_log_is_empty(self, store: SqliteStore, fill: AppendBatches) -> None:
        """A range past the head, or an inverted one, yields nothing."""
        fill(store, [2])
        assert [] == list(store.read(3))
        assert [] == list(store.read(2, 1))

    def test_read_of_an_empty_store_is_empty(self, store: SqliteStore) -> None:
        """An empty log reads as nothing."""
        assert [] == list(store.read())

    def test_entries_are_typed_events(
        self, store: SqliteStore, command: MakeCommand, cause: MakeCause, actor: Actor
    ) -> None:
        """``entries`` gives back the very events appended, typed, with their envelope."""
        first, second = command(1), command(2)
        store.append([first, second], at=AT, actor=actor, cause=cause(first))
        store.append([_refused(3)], at=AT + 1, actor=actor)
        entries = list(store.entries())
        assert [first, second, _refused(3)] == [entry.event for entry in entries]
        assert [CommandRecorded, CommandRecorded, CommandRefused] == [
            type(entry.event) for entry in entries
        ]
        assert [cause(first), cause(first), None] == [entry.cause for entry in entries]
        assert [actor] * 3 == [entry.actor for entry in entries]

    def test_entries_take_a_range(self, store: SqliteStore, fill: AppendBatches) -> None:
        """``entries(first, last)`` is the typed view of ``read(first, last)``."""
        fill(store, [4])
        assert [2, 3] == [entry.seq for entry in store.entries(2, 3)]


class TestFind:
    """Looking events up by their indexed columns."""

    @pytest.fixture
    def mixed(self, store: SqliteStore, command: MakeCommand, cause: MakeCause, actor: Actor):
        """Seq 1-2 batch 1 (run-a, client-a), seq 3 refused (batch 2), seq 4-5 batch 3 (run-b)."""
        one, two = command(1, run_id="run-a"), command(2, run_id="run-a")
        store.append([one, two], at=AT, actor=actor, cause=cause(one))
        store.append([_refused(3)], at=AT + 1, actor=actor)
        four = command(4, run_id="run-b", client_id="client-b", idempotency_key="idem-1")
        five = command(5, run_id="run-b", client_id="client-b")
        store.append([four, five], at=AT + 2, actor=actor, cause=cause(four))
        return store

    @pytest.mark.parametrize(
        ("where", "expected"),
        [
            ({"type": "command.recorded"}, [1, 2, 4, 5]),
            ({"type": "command.refused"}, [3]),
            ({"type": "no.such.type"}, []),
            ({"run_id": "run-a"}, [1, 2]),
            ({"run_id": "run-b"}, [4, 5]),
            ({"request_id": "req-1"}, [1, 2]),
            ({"request_id": "req-4"}, [4, 5]),
            ({"request_id": "req-2"}, []),
            ({"client_id": "client-a"}, [1, 2]),
            ({"client_id": "client-a", "idempotency_key": "idem-1"}, [1, 2]),
            ({"client_id": "client-b", "idempotency_key": "idem-1"}, [4, 5]),
            ({"client_id": "client-b", "idempotency_key": "idem-5"}, []),
            ({"batch": 1}, [1, 2]),
            ({"batch": 2}, [3]),
            ({"batch": 3}, [4, 5]),
            ({"type": "command.recorded", "batch": 3, "run_id": "run-b"}, [4, 5]),
            ({"type": "command.refused", "run_id": "run-a"}, []),
            ({}, [1, 2, 3, 4, 5]),
        ],
    )
    def test_find_by_indexed_columns(
        self, mixed: SqliteStore, where: dict[str, Any], expected: list[int]
    ) -> None:
        """``find`` yields, in seq order, the events whose columns equal every given value."""
        assert expected == _seqs(mixed, **where)

    def test_find_yields_the_stored_bytes(self, mixed: SqliteStore) -> None:
        """Found events carry the exact stored bytes."""
        assert [s.body for s in mixed.read(4, 5)] == [s.body for s in mixed.find(batch=3)]

    def test_find_by_session_id(self, store: SqliteStore, actor: Actor) -> None:
        """An event that names a session is found by it."""
        store.append([SessionNoted(session_id="s-1")], at=AT, actor=actor)
        store.append([SessionNoted(session_id="s-2")], at=AT, actor=actor)
        assert [2] == _seqs(store, session_id="s-2")

    def test_idempotency_key_without_client_id_is_an_input_error(self, mixed: SqliteStore) -> None:
        """An idempotency key only means something together with its client id."""
        with pytest.raises(InputError, match="client id"):
            list(mixed.find(idempotency_key="idem-1"))


class TestFiles:
    """The database file: permissions, pragmas and what may be opened."""

    def test_database_file_is_private(self, store: SqliteStore, fill: AppendBatches) -> None:
        """The database and its WAL companions are readable by the owner only (0600)."""
        fill(store, [1])
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE(Path(f"{store.path}{suffix}").stat().st_mode)
            assert (suffix, 0o600) == (suffix, mode)

    def test_new_parent_directory_is_private(self, store: SqliteStore) -> None:
        """A parent directory the store had to create is owner-only (0700)."""
        assert 0o700 == stat.S_IMODE(store.path.parent.stat().st_mode)

    def test_existing_parent_directory_is_left_alone(self, tmp_path: Path) -> None:
        """An existing directory keeps its permissions."""
        tmp_path.chmod(0o755)
        with SqliteStore(tmp_path / "pwf.db", create=True):
            pass
        assert 0o755 == stat.S_IMODE(tmp_path.stat().st_mode)

    def test_wal_and_synchronous_full_by_default(self, store: SqliteStore) -> None:
        """The store runs in WAL mode with synchronous=FULL (2)."""
        assert ("wal",) == store.connection.execute("PRAGMA journal_mode").fetchone()
        assert (2,) == store.connection.execute("PRAGMA synchronous").fetchone()

    def test_synchronous_normal_when_asked(self, db_path: Path) -> None:
        """``synchronous="NORMAL"`` is applied (1)."""
        with SqliteStore(db_path, create=True, synchronous="NORMAL") as store:
            assert (1,) == store.connection.execute("PRAGMA synchronous").fetchone()
            assert ("wal",) == store.connection.execute("PRAGMA journal_mode").fetchone()

    def test_busy_timeout_is_applied(self, db_path: Path) -> None:
        """The busy timeout given in milliseconds reaches SQLite."""
        with SqliteStore(db_path, create=True, busy_timeout_ms=1234) as store:
            assert (1234,) == store.connection.execute("PRAGMA busy_timeout").fetchone()

    def test_missing_database_without_create_is_an_input_error(self, db_path: Path) -> None:
        """Opening a database that does not exist refuses and creates nothing."""
        with pytest.raises(InputError, match="pwf init"):
            SqliteStore(db_path)
        assert not db_path.exists()
        assert not db_path.parent.exists()

    def test_foreign_sqlite_file_is_a_store_error(self, tmp_path: Path) -> None:
        """An SQLite database pwf did not create is refused."""
        path = tmp_path / "other.db"
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE notes (x)")
        other.close()
        with pytest.raises(StoreError, match="not a pwf database"):
            SqliteStore(path)

    def test_empty_file_is_a_store_error(self, tmp_path: Path) -> None:
        """An empty file is an empty SQLite database, not a pwf one."""
        path = tmp_path / "empty.db"
        path.touch()
        with pytest.raises(StoreError, match="not a pwf database"):
            SqliteStore(path)

    def test_file_that_is_not_sqlite_is_a_store_error(self, tmp_path: Path) -> None:
        """A file that is not SQLite at all is refused with one line."""
        path = tmp_path / "notes.txt"
        path.write_bytes(b"these are not the pages you are looking for\n" * 200)
        with pytest.raises(StoreError) as caught:
            SqliteStore(path)
        assert "\n" not in str(caught.value)
        assert str(path) in str(caught.value)

    def test_reopening_keeps_the_log(self, store: SqliteStore, fill: AppendBatches) -> None:
        """Opening again, with or without ``create``, sees the same log."""
        fill(store, [2, 1])
        head = store.head()
        with SqliteStore(store.path) as again:
            assert head == again.head()
        with SqliteStore(store.path, create=True) as again:
            assert head == again.head()
            assert again.verify().ok

    def test_create_refuses_a_foreign_database(self, tmp_path: Path) -> None:
        """``create`` makes a new database or reopens a pwf one; it never adopts another's."""
        path = tmp_path / "other.db"
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE notes (x)")
        other.close()
        with pytest.raises(StoreError, match="not a pwf database"):
            SqliteStore(path, create=True).close()


class TestTransaction:
    """Write transactions: several batches commit together or not at all."""

    def test_error_inside_rolls_back(
        self, store: SqliteStore, fill: AppendBatches, command: MakeCommand
    ) -> None:
        """An exception inside the transaction appends nothing and leaves the head."""
        fill(store, [2])
        before = store.head()
        with pytest.raises(Abort):
            _append_then_abort(store, [command(10)], [command(11)])
        assert before == store.head()
        assert [1, 2] == [stored.seq for stored in store.read()]
        assert 2 == _count(store.path)

    def test_several_appends_make_several_batches(
        self, store: SqliteStore, command: MakeCommand, actor: Actor
    ) -> None:
        """Each append inside one transaction is its own batch, sealed against the moving head."""
        with store.transaction() as tx:
            assert Head(0, None, 0) == tx.head
            first = tx.append([command(1), command(2)], at=AT, actor=actor)
            assert Head(2, first[-1].entry.content_hash, 1) == tx.head
            second = tx.append([command(3)], at=AT, actor=actor)
        assert first[-1].entry.content_hash == second[0].entry.prev_hash
        assert [1, 1, 2] == [entry.batch for entry in store.entries()]
        assert store.verify().ok

    def test_nothing_is_visible_to_others_before_commit(
        self, store: SqliteStore, command: MakeCommand, actor: Actor
    ) -> None:
        """Another connection sees the batch only once the transaction commits."""
        with store.transaction() as tx:
            tx.append([command(1)], at=AT, actor=actor)
            assert 0 == _count(store.path)
        assert 1 == _count(store.path)

    def test_transaction_head_reads_the_committed_tip(
        self, store: SqliteStore, fill: AppendBatches, db_path: Path
    ) -> None:
        """A transaction seals against what another writer committed before it began."""
        with SqliteStore(db_path) as other:
            fill(other, [3])
        with store.transaction() as tx:
            assert 3 == tx.head.seq
        [[fourth]] = fill(store, [1], start=4)
        assert (4, 2) == (fourth.entry.seq, fourth.entry.batch)
        assert store.verify().ok


class TestHooks:
    """Append hooks run inside the append transaction."""

    def test_hook_sees_the_sealed_batch_inside_the_transaction(
        self, db_path: Path, fill: AppendBatches
    ) -> None:
        """The hook gets the store's connection mid-transaction and the batch just written."""
        seen: list[tuple[bool, list[int], int]] = []

        def hook(connection: object, batch: Sequence[Sealed]) -> None:
            assert isinstance(connection, sqlite3.Connection)
            seen.append(
                (connection.in_transaction, [item.entry.seq for item in batch], _count(db_path))
            )

        with SqliteStore(db_path, create=True, hooks=[hook]) as store:
            fill(store, [2, 1])
        assert [(True, [1, 2], 0), (True, [3], 2)] == seen

    def test_hook_that_raises_leaves_nothing_appended(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """A failing hook rolls the whole batch back."""
        fill(store, [1])
        before = store.head()

        def hook(connection: object, batch: Sequence[Sealed]) -> None:
            raise ValueError("projection failed")

        store.hooks.append(hook)
        with pytest.raises(ValueError, match="projection failed"):
            fill(store, [2], start=2)
        assert before == store.head()
        assert 1 == _count(store.path)

    def test_hook_rows_commit_with_the_batch(
        self, store: SqliteStore, fill: AppendBatches, command: MakeCommand
    ) -> None:
        """Rows a hook writes commit with the batch and roll back with it."""
        store.connection.execute("CREATE TABLE seen (seq INTEGER PRIMARY KEY) STRICT")

        def hook(connection: object, batch: Sequence[Sealed]) -> None:
            assert isinstance(connection, sqlite3.Connection)
            connection.executemany(
                "INSERT INTO seen (seq) VALUES (?)", [(item.entry.seq,) for item in batch]
            )

        store.hooks.append(hook)
        fill(store, [2, 1])
        with pytest.raises(Abort):
            _append_then_abort(store, [command(9)])
        assert 3 == _count(store.path, "seen")
        assert [(1,), (2,), (3,)] == store.connection.execute("SELECT seq FROM seen").fetchall()


class Requests:
    """A small test projection: one row per recorded request."""

    NAME: str = "test_requests"
    VERSION: int = 1
    DDL: tuple[str, ...] = (
        (
            "CREATE TABLE IF NOT EXISTS test_requests (request_id TEXT PRIMARY KEY,"
            " outcome TEXT NOT NULL, seq INTEGER NOT NULL) STRICT"
        ),
    )

    def apply(self, entry: Entry) -> list[Sql]:
        """Insert a row per ``command.recorded``; ignore everything else."""
        event = entry.event
        if isinstance(event, CommandRecorded):
            return [
                Sql(
                    "INSERT INTO test_requests (request_id, outcome, seq) VALUES (?, ?, ?)",
                    (event.request_id, event.outcome, entry.seq),
                )
            ]
        return []


class RequestsV2(Requests):
    """The same projection at a newer version."""

    VERSION: int = 2


class Broken(Requests):
    """A projection whose statement SQLite refuses."""

    NAME: str = "test_broken"

    def apply(self, entry: Entry) -> list[Sql]:
        """Emit a statement against a table that does not exist."""
        return [Sql("INSERT INTO no_such_table VALUES (?)", (entry.seq,))]


def _install(store: SqliteStore, read_model: ReadModel) -> None:
    with store.transaction() as tx:
        read_model.install(tx.connection)
    store.hooks.append(read_model)


def _checkpoint(connection: sqlite3.Connection, name: str = "test_requests") -> tuple[int, int]:
    row = connection.execute(
        "SELECT version, last_seq FROM _pwf_checkpoint WHERE projection = ?", (name,)
    ).fetchone()
    assert row is not None
    return (row[0], row[1])


class TestReadModel:
    """The read model projects each batch and moves its checkpoint in the append transaction."""

    def test_install_creates_tables_and_a_checkpoint_at_zero(self, store: SqliteStore) -> None:
        """Installing runs the DDL and records the projection at its version, seq 0."""
        _install(store, ReadModel([Requests()]))
        assert (1, 0) == _checkpoint(store.connection)
        assert [] == store.connection.execute("SELECT * FROM test_requests").fetchall()

    def test_checkpoint_advances_to_the_last_seq(
        self, store: SqliteStore, fill: AppendBatches, actor: Actor
    ) -> None:
        """After each append the projection holds its rows and the checkpoint the last seq."""
        _install(store, ReadModel([Requests()]))
        fill(store, [2])
        assert (1, 2) == _checkpoint(store.connection)
        store.append([_refused(3)], at=AT, actor=actor)
        assert (1, 3) == _checkpoint(store.connection)
        rows = store.connection.execute(
            "SELECT request_id, seq FROM test_requests ORDER BY seq"
        ).fetchall()
        assert [("req-1", 1), ("req-2", 2)] == rows

    def test_checkpoint_moves_once_at_the_commit(
        self, store: SqliteStore, fill: AppendBatches, command: MakeCommand, actor: Actor
    ) -> None:
        """Rows are projected at once; checkpoint and head move just before COMMIT (ADR 0033)."""
        _install(store, ReadModel([Requests()]))
        fill(store, [1])
        other = sqlite3.connect(store.path)
        statements: list[str] = []
        try:
            with store.transaction() as tx:
                tx.append([command(2)], at=AT, actor=actor)
                tx.append([command(3)], at=AT, actor=actor)
                rows = tx.connection.execute("SELECT seq FROM test_requests").fetchall()
                assert [(1,), (2,), (3,)] == rows
                assert (1, 1) == _checkpoint(tx.connection)
                tx.connection.set_trace_callback(statements.append)
            tx.connection.set_trace_callback(None)
            assert (1, 3) == _checkpoint(other)
            assert 3 == store.head().seq
            assert 1 == sum("_pwf_checkpoint" in statement for statement in statements)
            assert 1 == sum("_pwf_head" in statement for statement in statements)
        finally:
            other.close()

    def test_a_transaction_that_writes_nothing_moves_nothing(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        _install(store, ReadModel([Requests()]))
        fill(store, [1])
        statements: list[str] = []
        with store.transaction() as tx:
            tx.connection.set_trace_callback(statements.append)
        store.connection.set_trace_callback(None)
        assert ["COMMIT"] == statements

    def test_rows_and_checkpoint_roll_back_with_the_batch(
        self, store: SqliteStore, fill: AppendBatches, command: MakeCommand
    ) -> None:
        """A transaction that fails leaves projection rows and checkpoint where they were."""
        _install(store, ReadModel([Requests()]))
        fill(store, [1])
        with pytest.raises(Abort):
            _append_then_abort(store, [command(2)])
        assert (1, 1) == _checkpoint(store.connection)
        assert [(1,)] == store.connection.execute("SELECT seq FROM test_requests").fetchall()

    def test_failing_projection_appends_nothing(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """A statement SQLite refuses rolls back the batch and surfaces as a StoreError."""
        _install(store, ReadModel([Requests(), Broken()]))
        with pytest.raises(StoreError, match="no such table"):
            fill(store, [2])
        assert Head(0, None, 0) == store.head()
        assert (1, 0) == _checkpoint(store.connection)
        assert [] == store.connection.execute("SELECT * FROM test_requests").fetchall()

    def test_install_again_at_the_same_version_keeps_the_checkpoint(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """Re-installing the same version changes nothing."""
        _install(store, ReadModel([Requests()]))
        fill(store, [2])
        with store.transaction() as tx:
            ReadModel([Requests()]).install(tx.connection)
        assert (1, 2) == _checkpoint(store.connection)

    def test_version_mismatch_on_install_is_a_store_error(
        self, store: SqliteStore, fill: AppendBatches
    ) -> None:
        """A database projected by another version is refused: it must be rebuilt."""
        _install(store, ReadModel([Requests()]))
        fill(store, [1])
        with pytest.raises(StoreError, match="rebuild"), store.transaction() as tx:
            ReadModel([RequestsV2()]).install(tx.connection)
        assert (1, 1) == _checkpoint(store.connection)


@pytest.mark.parametrize("name", ["a#b.db", "c%41.db", "d?mode=ro.db", "e f.db"])
def test_a_path_with_uri_characters_opens_that_very_file(tmp_path: Path, name: str) -> None:
    """``#``, ``?`` and ``%`` in a path are the file's name, not parts of an SQLite URI."""
    path = tmp_path / name
    with SqliteStore(path, create=True) as store:
        assert store.head() == Head(0, None, 0)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        name
    ]
    with SqliteStore(path, read_only=True) as store:
        assert store.verify().ok


def test_the_read_model_checkpoint_table_is_the_store_schemas() -> None:
    """Scratch files create ``_pwf_checkpoint`` from the read model; live files from the schema."""
    assert CHECKPOINT_TABLE in SCHEMA
