"""A scratch file copied from the process's template is the database its DDL would have made.

The first fold of a process runs the projections' DDL into its scratch file
and keeps the file's bytes; later folds write those bytes into their new
file instead of running the DDL (ADR 0058).  Each test empties the templates
first, so the first fold in it runs the DDL, and compares it with a fold
that must have started from the copy (the DDL is made to fail then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pwf.cli._options import open_store
from pwf.fold import workfile
from pwf.fold.bulk import BulkFold
from pwf.fold.rebuild import rebuild
from pwf.fold.replay import replay
from pwf.readmodel import CHECKPOINT_TABLE
from pwf.store.sqlite import SqliteStore
from pwf.verify import check

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from tests._dbfile import projections
    from tests.conftest import AppendBatches
else:
    from _dbfile import projections


@pytest.fixture
def log(tmp_path: Path, fill: AppendBatches) -> Path:
    """A pwf database with a few batches of realistic events, and no templates in the process."""
    path = tmp_path / "state.db"
    with SqliteStore(path, create=True) as store:
        fill(store, [1, 3, 2, 5])
    workfile.TEMPLATES.clear()
    return path


def _no_ddl(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on a fold that runs the projections' DDL fails."""

    def refused(_model: BulkFold, _connection: sqlite3.Connection) -> None:
        raise AssertionError("the DDL ran although a template was kept")

    monkeypatch.setattr(BulkFold, "install", refused)


def _installed(log: Path, *, copy_events: bool) -> tuple[bytes, BulkFold]:
    """The bytes of a scratch file right after its install, and its fold's model."""
    with (
        SqliteStore(log, read_only=True) as store,
        workfile.scratch_fold(
            store,
            log,
            "verify",
            copy_events=copy_events,
            writable=False,
            progress=None,
            chunk=100,
        ) as scratch,
    ):
        scratch.install()
        return scratch.path.read_bytes(), scratch.model


@pytest.mark.parametrize("copy_events", [True, False], ids=["replay", "rebuild"])
def test_a_copied_scratch_file_is_byte_for_byte_the_ddl_s(
    log: Path, monkeypatch: pytest.MonkeyPatch, *, copy_events: bool
) -> None:
    """Same bytes, same deferred indexes and CHECKs, and the copy skips the DDL."""
    made, by_ddl = _installed(log, copy_events=copy_events)
    assert len(workfile.TEMPLATES) == 1
    _no_ddl(monkeypatch)
    copied, by_copy = _installed(log, copy_events=copy_events)
    assert made == copied
    assert by_ddl.deferred == by_copy.deferred
    assert by_ddl.deferred, "a bulk fold defers the projections' indexes"
    assert by_ddl.unchecked == by_copy.unchecked
    assert by_ddl.unchecked, "a bulk fold defers the projections' CHECKs"


def test_the_template_is_what_a_fresh_ddl_run_makes(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept bytes equal a scratch-like file the DDL is run into outside any fold."""
    import sqlite3  # noqa: PLC0415 - only this test opens a bare connection

    from pwf._sqlite import transaction  # noqa: PLC0415

    _installed(log, copy_events=False)
    (image,) = [template.image for template in workfile.TEMPLATES.values()]
    fresh = tmp_path / "fresh.db"
    connection = sqlite3.connect(fresh, isolation_level=None)
    try:
        for pragma in workfile._SCRATCH_PRAGMAS:
            connection.execute(pragma)
        with transaction(connection):
            connection.execute(CHECKPOINT_TABLE)
            BulkFold().install(connection)
    finally:
        connection.close()
    assert fresh.read_bytes() == image
    _no_ddl(monkeypatch)
    copied, _ = _installed(log, copy_events=False)
    assert copied == image


def test_replays_from_the_template_write_the_same_file(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replays, by DDL and from the copy, write identical files that verify."""
    with open_store(str(log)) as store:
        replay(store, tmp_path / "by-ddl.db", chunk=2)
        _no_ddl(monkeypatch)
        replay(store, tmp_path / "by-copy.db", chunk=2)
    assert (tmp_path / "by-ddl.db").read_bytes() == (tmp_path / "by-copy.db").read_bytes()
    monkeypatch.undo()
    with open_store(str(tmp_path / "by-copy.db"), read_only=True) as replayed:
        assert check(replayed).ok


def test_rebuilds_from_the_template_swap_in_the_same_projections(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rebuilds, by DDL and from the copy, leave the same tables; a verify agrees."""
    other = tmp_path / "other.db"
    other.write_bytes(log.read_bytes())
    with open_store(str(log)) as store:
        rebuild(store, chunk=2)
    _no_ddl(monkeypatch)
    with open_store(str(other)) as store:
        rebuild(store, chunk=2)
    assert projections(other) == projections(log)
    with open_store(str(other)) as store:
        assert check(store).ok
