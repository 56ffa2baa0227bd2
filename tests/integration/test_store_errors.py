"""SQLite's errors become pwf's by their result code, never by the words of the message."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.errors import NotPwfDatabaseError, StoreBusyError, StoreError
from pwf.store.sqlite import SqliteStore, translate_error

if TYPE_CHECKING:
    from pathlib import Path


def _raised(connection: sqlite3.Connection, sql: str) -> sqlite3.Error:
    with pytest.raises(sqlite3.Error) as caught:
        connection.execute(sql)
    return caught.value


def test_a_held_write_lock_is_busy_by_its_code(tmp_path: Path) -> None:
    """SQLITE_BUSY from a real second writer: :class:`StoreBusyError`."""
    path = tmp_path / "state.db"
    SqliteStore(path, create=True).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        error = _raised(other, "BEGIN IMMEDIATE")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        other.close()
    assert isinstance(translate_error(error, path), StoreBusyError)


def test_words_in_a_message_decide_nothing(tmp_path: Path) -> None:
    """A constraint whose message says "locked" and "read-only" is neither busy nor read-only."""
    connection = sqlite3.connect(":memory:")
    connection.execute('CREATE TABLE t (x INTEGER CONSTRAINT "locked read-only" CHECK (x > 0))')
    error = _raised(connection, "INSERT INTO t VALUES (0)")
    assert "locked read-only" in str(error)
    translated = translate_error(error, tmp_path)
    assert type(translated) is StoreError
    assert str(translated) == f"{tmp_path}: {error}"


def test_a_file_that_is_not_a_database_by_its_code(tmp_path: Path) -> None:
    """SQLITE_NOTADB: :class:`NotPwfDatabaseError`."""
    path = tmp_path / "text.db"
    path.write_bytes(b"not a database at all, but long enough to have a header" * 20)
    connection = sqlite3.connect(path)
    error = _raised(connection, "SELECT * FROM sqlite_master")
    connection.close()
    assert isinstance(translate_error(error, path), NotPwfDatabaseError)


def test_an_error_of_the_module_itself_has_no_code(tmp_path: Path) -> None:
    """A closed connection's error carries no SQLite code: a plain :class:`StoreError`."""
    connection = sqlite3.connect(":memory:")
    connection.close()
    error = _raised(connection, "SELECT 1")
    assert type(translate_error(error, tmp_path)) is StoreError
