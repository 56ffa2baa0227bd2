"""The contract of a log with its projections (``pwf.store.EventStore``), on every implementation.

A SQLite file that is its own log, and a host's local file mirroring a
shared log in PostgreSQL (ADR 0038), keep the same promises to the host:
deciders read their own staged writes through the transaction's reader
(ADR 0008), committed reads see whole commands only (ADR 0005), racing
hosts with one client + key execute it once (DOMAIN §7.2), and file
maintenance applies only where the file is the log of record.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from pwf.events import Actor
from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.readmodel import ReadModel
from pwf.store import EventStore
from pwf.store.sqlite import SqliteStore
from pwf.store.unit import OnceOnly, Repeatable

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests._tamper import editable, pg_editable

    from pwf.store import EventLog
    from pwf.store.mirror import MirroredStore
    from pwf.store.unit import Work

else:
    from _tamper import editable, pg_editable

KINDS = ("sqlite", "mirrored")
AT = 1_764_403_200_000
ACTOR = Actor(type="session", id="session-main")
START = {
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSourceRef": "builtin:echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "definitionDigest": "d1",
    "definitionSnapshot": {},
    "input": {},
    "originSessionId": "s-1",
}


class Stores:
    """Hosts' stores of one log: ``open(n)`` is host ``n``'s (its own file when mirrored)."""

    def __init__(self, kind: str, folder: Path, url: str | None) -> None:
        """Stores of ``kind`` kept in ``folder`` (on the shared log at ``url`` when mirrored)."""
        self.kind = kind
        self.folder = folder
        self.url = url
        self.opened: list[SqliteStore | MirroredStore] = []

    def open(self, host: int = 0) -> SqliteStore | MirroredStore:
        """Host ``host``'s store, with the read model; closed after the test."""
        store = self.connect(host)
        self.opened.append(store)
        return store

    def connect(self, host: int = 0) -> SqliteStore | MirroredStore:
        """Host ``host``'s store, with the read model, for the caller to close."""
        model = ReadModel()
        store: SqliteStore | MirroredStore
        if self.kind == "sqlite":
            store = SqliteStore(self.folder / "state.db", create=True, hooks=[model])
            store.install(model.install)
        else:
            from pwf.store.mirror import MirroredStore  # noqa: PLC0415 - optional extra
            from pwf.store.postgres import PostgresStore  # noqa: PLC0415

            assert self.url is not None
            log = PostgresStore(self.url, create=True)
            store = MirroredStore(
                self.folder / f"host-{host}.db", log, hooks=[model], install=model.install
            )
            store.catch_up()
        return store

    def close(self) -> None:
        """Close every store the test opened."""
        for store in self.opened:
            store.close()


@pytest.fixture(params=KINDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Each implementation in turn, on an empty log."""
    url = request.getfixturevalue("pg_url") if request.param == "mirrored" else None
    made = Stores(request.param, tmp_path, url)
    yield made
    made.close()


def _start(request_id: str) -> ClientRequest:
    return ClientRequest(
        request_id=request_id,
        client_id="cli-A",
        operation="run.start",
        idempotency_key="start-race",
        payload=START,
        run_id="run-1",
    )


def test_every_implementation_keeps_the_protocols(stores: Stores) -> None:
    """Statically (mypy) and at run time, the store is an EventStore and an EventLog."""
    store: EventStore = stores.open()
    log: EventLog = store
    assert (0, True) == (log.head().seq, store.projections_file.path.exists())
    # The port is a log and its projections file; a path is the file's (ADR 0088).
    assert not hasattr(EventStore, "path")
    if stores.kind == "mirrored":
        assert not hasattr(store, "path")
        from pwf.store.postgres import PostgresStore  # noqa: PLC0415 - optional extra

        assert stores.url is not None
        shared: EventLog = PostgresStore(stores.url)
        try:
            assert shared.head() == log.head()
        finally:
            shared.close()


def test_the_transaction_reader_sees_its_own_staged_writes(stores: Stores, command: Any) -> None:
    """Inside the write transaction the decider reads what it staged (ADR 0008 D3)."""
    store = stores.open()
    with store.transaction() as tx:
        tx.stage([command(1)], at=AT, actor=ACTOR)
        seen = tx.reader().one("SELECT count(*) AS n FROM events")
        assert seen is not None
        assert 1 == seen["n"]
        tx.new_batch()
        tx.stage([command(2)], at=AT, actor=ACTOR)
    assert [1, 2] == [entry.batch for entry in store.entries()]


def test_a_snapshot_reads_committed_state_only(stores: Stores, command: Any) -> None:
    """Another host's store sees a command only once it committed (ADR 0005)."""
    store, other = stores.open(0), stores.open(1)
    with store.transaction() as tx:
        tx.append([command(1)], at=AT, actor=ACTOR)
        other.catch_up()
        with other.snapshot() as reader:
            assert [] == reader.all("SELECT seq FROM events")
    other.catch_up()
    with other.snapshot() as reader:
        assert [1] == [row["seq"] for row in reader.all("SELECT seq FROM events")]


def test_file_maintenance_applies_only_to_a_log_of_record(stores: Stores) -> None:
    """The capability that replaces guessing: the SQLite log is its own file, a mirror has none."""
    store = stores.open()
    expected = store if stores.kind == "sqlite" else None
    assert expected is store.log_file
    assert (stores.kind == "mirrored") is (store.log_name != str(store.projections_file.path))


def test_racing_hosts_execute_one_client_key_once(stores: Stores) -> None:
    """Four hosts race ``run.start`` with one client + key: one accepted, three adopted."""
    hosts = 4
    stores.open().close()  # the log and the first file exist before the race
    start = threading.Barrier(hosts)
    outcomes: list[str] = []
    failures: list[BaseException] = []

    def send(index: int) -> None:
        try:
            with stores.connect(index) as store:
                start.wait(timeout=60)
                outcomes.append(Host(store).request(_start(f"r-{index}"), AT).outcome)
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            failures.append(error)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(hosts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [] == failures
    assert ["accepted", "adopted", "adopted", "adopted"] == sorted(outcomes)
    store = stores.open()
    assert 1 == len(list(store.find(type="command.recorded")))
    assert store.verify().ok


def test_verify_reads_the_log_of_record(stores: Stores, command: Any) -> None:
    """A fault in the log of record is found through the store, at its seq."""
    store = stores.open()
    for number in range(3):
        store.append([command(number)], at=AT, actor=ACTOR)
    _tamper(stores, "UPDATE events SET run_id = 'run-x' WHERE seq = 2")
    report = store.verify()
    assert (2, 1) == (report.first_bad_seq, report.events)


def test_a_verify_after_a_proven_head_says_what_a_whole_walk_says(
    stores: Stores, command: Any
) -> None:
    """``after`` may shorten the walk, never change its report, on every store."""
    store = stores.open()
    store.append([command(0)], at=AT, actor=ACTOR)
    first = store.verify()
    for number in range(1, 4):
        store.append([command(number)], at=AT, actor=ACTOR)
    assert store.verify(after=first.head) == store.verify()
    assert store.verify(after=first.head).ok
    _tamper(stores, "UPDATE events SET run_id = 'run-x' WHERE seq = 3")
    report = store.verify(after=first.head)
    assert report == store.verify()
    assert (3, 2) == (report.first_bad_seq, report.events)


def _tamper(stores: Stores, sql: str) -> None:
    """Change the log of record behind the store's back (``events`` as v1's table)."""
    if stores.kind == "sqlite":
        import sqlite3  # noqa: PLC0415

        connection = editable(sqlite3.connect(stores.folder / "state.db"))
        with connection:
            connection.execute(sql)
        connection.close()
        return
    import psycopg  # noqa: PLC0415 - optional extra

    assert stores.url is not None
    with psycopg.connect(stores.url, autocommit=True) as pg, pg_editable(pg):
        pg.execute(sql)


# ---------------------------------------------------------------- the files (ADR 0059)


def _damage_an_index(path: Path) -> None:
    """Make ``_pwf_events_type`` index other columns than its rows were indexed by (a bad disk)."""
    import sqlite3  # noqa: PLC0415

    connection = sqlite3.connect(path, isolation_level=None)
    try:
        [(version,)] = connection.execute("PRAGMA schema_version").fetchall()
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute(
            "UPDATE sqlite_master"
            " SET sql = 'CREATE INDEX _pwf_events_type ON _pwf_events (run_id, seq)'"
            " WHERE name = '_pwf_events_type'"
        )
        connection.execute(f"PRAGMA schema_version = {version + 1}")
    finally:
        connection.close()


def test_the_projection_file_passes_sqlite_s_checks_until_it_is_damaged(
    stores: Stores, command: Any
) -> None:
    """``integrity_check`` is None on a sound file and names what SQLite found on a damaged one."""
    store = stores.open()
    for number in range(3):
        store.append([command(number)], at=AT, actor=ACTOR)
    file = store.projections_file
    assert file.integrity_check() is None
    _damage_an_index(file.path)
    found = file.integrity_check()
    assert found is not None
    assert "_pwf_events_type" in found


def test_the_projection_file_checkpoints_its_write_ahead_log(stores: Stores, command: Any) -> None:
    """After ``checkpoint`` the file holds every commit and its write-ahead log is empty."""
    store = stores.open()
    store.append([command(1)], at=AT, actor=ACTOR)
    file = store.projections_file
    wal = file.path.with_name(file.path.name + "-wal")
    assert wal.stat().st_size > 0
    file.checkpoint()
    assert 0 == wal.stat().st_size
    with store.snapshot() as reader:
        assert [1] == [row["seq"] for row in reader.all("SELECT seq FROM events")]
    assert file.busy_timeout_ms == 5_000
    assert file.synchronous_level in {1, 2}  # NORMAL for a mirror, FULL for a log file


def test_a_log_file_copies_one_committed_state_of_itself(
    stores: Stores, command: Any, tmp_path: Path
) -> None:
    """``backup_to`` copies what is committed, not what a writer holds open; a mirror has none."""
    store = stores.open()
    log = store.log_file
    if stores.kind == "mirrored":
        assert log is None  # backup and prune refuse there (tests/postgres/test_hosts.py)
        return
    assert log is not None
    store.append([command(1)], at=AT, actor=ACTOR)
    target = tmp_path / "copy.db"
    target.touch()
    with stores.open(1).transaction() as tx:  # another writer's open transaction
        tx.append([command(2)], at=AT, actor=ACTOR)
        log.backup_to(target)
    with SqliteStore(target, read_only=True) as copy:
        assert copy.verify().ok
        assert [1] == [stored.seq for stored in copy.read()]
        assert copy.integrity_check() is None
    assert 2 == store.head().seq


def test_a_log_file_s_shape_is_pwf_s(stores: Stores) -> None:
    """``shape`` gives the file's marks and schema, which a compacted image copies."""
    from pwf.store.sqlite_schema import APPLICATION_ID  # noqa: PLC0415

    log = stores.open().log_file
    if log is None:
        assert stores.kind == "mirrored"
        return
    shape = log.shape()
    assert ("application_id", APPLICATION_ID) in shape.marks
    tables = {"_pwf_events", "_pwf_batches", "_pwf_whole", "_pwf_head", "_pwf_meta", "runs"}
    assert tables | {"_pwf_checkpoint"} <= {
        name for kind, name, _table, _sql in shape.schema if kind == "table"
    }
    assert ("view", "events") in {(kind, name) for kind, name, _table, _sql in shape.schema}


class _RefusedError(Exception):
    """A decision's refusal after it staged an event."""


def test_a_group_commits_once_and_a_failing_work_rolls_back_alone(
    stores: Stores, command: Any
) -> None:
    """The unit of work of ADR 0087 on every store: each work its batch, failures alone."""
    store = stores.open()
    runs: list[int] = []

    def decide(n: int, *, fail: bool = False) -> Any:
        def work(tx: Any) -> int:
            runs.append(n)
            tx.stage([command(n)], at=AT, actor=ACTOR)
            if fail:
                raise _RefusedError(n)
            return n

        return work

    works: list[Work[object]] = [
        Repeatable(decide(1)),
        OnceOnly(decide(3)),
        Repeatable(decide(2, fail=True)),
    ]
    outcomes = store.run_group(iter(works))
    assert [1, 3, None] == [outcome.value for outcome in outcomes]
    assert isinstance(outcomes[2].error, _RefusedError)
    assert [(1, 1), (3, 2)] == [
        (int(entry.event.request_id.split("-")[1]), entry.batch)  # type: ignore[attr-defined]
        for entry in store.entries()
    ]
    assert 1 == runs.count(3), "once-only work ran twice"


def test_one_decision_is_one_unit(stores: Stores, command: Any) -> None:
    """``run`` commits the decision before it returns, marked either way."""
    store = stores.open()
    assert 1 == store.run(Repeatable(lambda tx: len(tx.stage([command(1)], at=AT, actor=ACTOR))))
    assert 1 == store.run(OnceOnly(lambda tx: len(tx.stage([command(2)], at=AT, actor=ACTOR))))
    assert [1, 2] == [entry.batch for entry in store.entries()]
