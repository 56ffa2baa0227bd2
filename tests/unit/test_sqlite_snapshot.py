"""``begin_snapshot`` holds a read-only connection on one committed moment."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from pwf._sqlite import begin_snapshot

if TYPE_CHECKING:
    from pathlib import Path


def _database(tmp_path: Path) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    path = tmp_path / "db.sqlite"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.execute("INSERT INTO t VALUES (1)")
    reader = sqlite3.connect(path, isolation_level=None)
    return writer, reader


def test_reads_after_the_first_see_one_moment(tmp_path: Path) -> None:
    """A write committed after the snapshot's first read stays unseen until the snapshot ends."""
    writer, reader = _database(tmp_path)
    try:
        begin_snapshot(reader)
        assert [(1,)] == reader.execute("SELECT x FROM t").fetchall()
        writer.execute("INSERT INTO t VALUES (2)")
        assert [(1,)] == reader.execute("SELECT x FROM t ORDER BY x").fetchall()
        reader.execute("COMMIT")
        assert [(1,), (2,)] == reader.execute("SELECT x FROM t ORDER BY x").fetchall()
    finally:
        writer.close()
        reader.close()


def test_inside_an_open_transaction_it_joins_it(tmp_path: Path) -> None:
    """On a connection already in a transaction it begins nothing (and does not raise)."""
    writer, reader = _database(tmp_path)
    try:
        reader.execute("BEGIN")
        begin_snapshot(reader)
        assert reader.in_transaction
        reader.execute("COMMIT")
        assert not reader.in_transaction
    finally:
        writer.close()
        reader.close()
