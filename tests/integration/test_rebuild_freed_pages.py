"""What a rebuild's swap leaves in the pages of the tables it drops (ADR 0013's addendum).

The dropped tables are a fold of the log the file keeps, so their pages are
freed as they are, without being overwritten with zeros first.  While a shared
log's prune is owed its refold (ADR 0107), the old ``blobs`` rows may hold a
value the log no longer has: then the pages are zeroed, whatever SQLite's
build does by default.  Each test plants a value only the ``blobs`` table
holds and looks for its bytes in the file after the rebuild.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from pwf.cli._options import open_store
from pwf.fold.rebuild import rebuild
from pwf.store.log_writes import owe_refold, refold_owed
from pwf.store.sqlite import SqliteStore
from pwf.verify import check

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.conftest import AppendBatches

_PLANTED = b'{"only":"the blobs table holds this value","pad":"' + b"x" * 64 + b'"}'
"""A JSON value no event carries, small enough to stay whole in one page."""


@pytest.fixture
def log(tmp_path: Path, fill: AppendBatches) -> Path:
    """A pwf database with its projections, a value planted in ``blobs``, all in the main file."""
    path = tmp_path / "state.db"
    with SqliteStore(path, create=True) as store:
        fill(store, [1, 3, 2, 5])
    with open_store(str(path)) as store:
        rebuild(store)
    with _bare(path) as connection:
        connection.execute(
            "INSERT INTO blobs (blob_hash, media_type, byte_length, content, created_at)"
            " VALUES (?, 'application/json', ?, ?, 0)",
            (hashlib.sha256(_PLANTED).digest(), len(_PLANTED), _PLANTED),
        )
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert _PLANTED in path.read_bytes()
    return path


def _bare(path: Path) -> contextlib.closing[sqlite3.Connection]:
    """A plain connection to ``path`` in autocommit, closed after its ``with``."""
    return contextlib.closing(sqlite3.connect(path, isolation_level=None))


def _file_bytes(path: Path) -> Iterator[bytes]:
    """The database file and what is beside it, after the rebuild's own checkpoint."""
    for suffix in ("", "-wal"):
        beside = path.with_name(path.name + suffix)
        if beside.exists():
            yield beside.read_bytes()


def _rebuilt(path: Path, *, owed: bool, secure_delete: bool) -> None:
    """Rebuild ``path``, on connections whose SQLite build zeroes freed pages or not."""
    if owed:
        with _bare(path) as connection:
            owe_refold(connection, 1)
            assert refold_owed(connection)
    connect = sqlite3.connect

    def built(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.execute(f"PRAGMA secure_delete = {'ON' if secure_delete else 'OFF'}")
        return connection

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", built)
        with open_store(str(path)) as store:
            rebuild(store)
    with open_store(str(path), read_only=True) as store:
        assert check(store).ok  # the planted row is gone: the projections are the log's fold


@pytest.mark.parametrize("secure_delete", [True, False], ids=["zeroing-build", "plain-build"])
def test_an_owed_refold_zeroes_the_dropped_rows_whatever_the_build(
    log: Path, *, secure_delete: bool
) -> None:
    """The value no event carries is not left in a freed page of the file."""
    _rebuilt(log, owed=True, secure_delete=secure_delete)
    assert not any(_PLANTED in content for content in _file_bytes(log))


def test_otherwise_the_dropped_rows_are_freed_as_they_are(log: Path) -> None:
    """Without a refold owed nothing is zeroed: even a zeroing build leaves the freed pages be.

    What shows the pages were not written again: the planted value is still in the
    file, in a free page, where a fold of the log would have put nothing.
    """
    _rebuilt(log, owed=False, secure_delete=True)
    assert any(_PLANTED in content for content in _file_bytes(log))
