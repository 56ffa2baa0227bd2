"""A store opened for serving: savepoint journals in memory, checkpoints on their own thread."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from typing import TYPE_CHECKING

from pwf.events import Actor, CommandRefused
from pwf.store.sqlite import SqliteStore
from pwf.store.sqlite_checkpoint import BOUND_PAGES, Checkpointer

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

ACTOR = Actor(type="host", id="h")
AT = 1_764_403_200_000


def _event(n: int) -> CommandRefused:
    return CommandRefused(
        request_id=f"req-{n}",
        client_id="client-b",
        operation="run.start",
        idempotency_key=f"idem-{n}",
        fingerprint=hashlib.sha256(f"request {n}".encode()).hexdigest(),
        outcome="conflict",
        error="idempotency key reused with a different request",
    )


def _commit(store: SqliteStore, count: int) -> None:
    for n in range(count):
        with store.transaction() as tx, tx.savepoint():
            tx.append([_event(n + 1)], at=AT, actor=ACTOR)


def _in_file(path: Path) -> int:
    """Events the database file itself holds, ignoring its write-ahead log.

    The read takes no lock, so while a checkpoint is writing the file it may
    see a torn page: that counts as -1 (not yet), and the caller reads again.
    """
    connection = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
    try:
        return int(connection.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.DatabaseError:
        return -1
    finally:
        connection.close()


def _until(condition: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_serving_store_keeps_savepoint_journals_in_memory(tmp_path: Path) -> None:
    plain = SqliteStore(tmp_path / "a.db", create=True)
    serving = SqliteStore(tmp_path / "b.db", create=True, serving=True)
    try:
        assert plain.connection.execute("PRAGMA temp_store").fetchone()[0] == 0
        assert serving.connection.execute("PRAGMA temp_store").fetchone()[0] == 2  # MEMORY
    finally:
        plain.close()
        serving.close()


def test_commits_reach_the_file_without_the_writer_checkpointing(tmp_path: Path) -> None:
    plain = SqliteStore(tmp_path / "plain.db", create=True)
    serving = SqliteStore(tmp_path / "serving.db", create=True, serving=True)
    try:
        assert serving.connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == BOUND_PAGES
        assert serving.checkpointer is not None
        rounds: list[str] = []
        serving.checkpointer.observe = rounds.append
        _commit(plain, 20)
        _commit(serving, 20)
        _until(lambda: _in_file(serving.path) == 20)
        assert rounds[:1] == ["round"]
        assert _in_file(plain.path) == 0  # a plain store's 20 small commits are in its log only
    finally:
        plain.close()
        serving.close()


def test_closing_stops_the_thread_and_leaves_no_log(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db", create=True, serving=True)
    _commit(store, 3)
    store.close()
    assert not [thread for thread in threading.enumerate() if thread.name == "pwf-checkpoint"]
    assert not (tmp_path / "s.db-wal").exists()
    reopened = SqliteStore(tmp_path / "s.db")
    try:
        assert reopened.head().seq == 3
    finally:
        reopened.close()


def test_a_read_only_store_starts_no_thread(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "s.db", create=True).close()
    store = SqliteStore(tmp_path / "s.db", read_only=True, serving=True)
    try:
        assert store.checkpointer is None
    finally:
        store.close()


class _Failing:
    def __init__(self) -> None:
        self.calls = 0

    def execute(self, _sql: str) -> object:
        self.calls += 1
        raise sqlite3.OperationalError("database is locked")

    def close(self) -> None:
        pass


def test_a_failed_checkpoint_is_logged_and_the_next_commit_tries_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    SqliteStore(tmp_path / "s.db", create=True).close()
    checkpointer = Checkpointer(tmp_path / "s.db", 2)
    real = checkpointer._connection
    failing = _Failing()
    checkpointer._connection = failing  # type: ignore[assignment]
    try:
        with caplog.at_level("INFO", logger="pwf.store"):
            checkpointer.committed()
            _until(lambda: failing.calls == 1)
            checkpointer.committed()
            _until(lambda: failing.calls == 2)
        assert "background checkpoint failed: database is locked" in caplog.text
    finally:
        checkpointer.close()
        real.close()
