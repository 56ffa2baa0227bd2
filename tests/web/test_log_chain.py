"""The log page's chain line: the whole log walked once, then only what was appended since.

At a million events a whole deep walk costs some twenty seconds of processor
time; the page of a live host, whose head moves between two views, walked it
every time.  Now the first view walks the whole log and every later one only
the events after the head the last walk found intact, and a page whose head
has not moved walks nothing.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.store.opening import open_file
from pwf.store.sqlite_reads import SqliteReads
from pwf.web._source import Database

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pwf.store import Head, VerifyReport

WHOLE = SqliteReads.verify
"""The verify the tests spy on."""


def _copy(source: Path, target: Path) -> Path:
    """``source`` with what its write-ahead log holds, as one file."""
    into, out = sqlite3.connect(source), sqlite3.connect(target)
    try:
        into.backup(out)
    finally:
        into.close()
        out.close()
    return target


def _append(db: Path, client_line: Callable[..., bytes], number: int) -> None:
    done = CliRunner().invoke(cli, ["request", "--db", str(db)], input=client_line(number))
    assert done.exit_code == 0, done.output


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Head | None]:
    """The ``after`` of each verify of a SQLite log, in order."""
    found: list[Head | None] = []

    def counted(self: SqliteReads, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
        found.append(after)
        return WHOLE(self, deep=deep, after=after)

    monkeypatch.setattr(SqliteReads, "verify", counted)
    return found


def test_a_moved_head_walks_only_the_events_after_the_last_walk(
    world_db: Path, tmp_path: Path, asked: list[Head | None], client_line: Callable[..., bytes]
) -> None:
    db = _copy(world_db, tmp_path / "live.db")
    database = Database(db)
    try:
        with database.view(None) as view:
            first = database.chain(view)
        with database.view(None) as view:
            assert database.chain(view) == first
        assert asked == [None]  # the head did not move: nothing walked again
        _append(db, client_line, 900)
        with database.view(None) as view:
            moved = database.chain(view)
        assert asked == [None, first.head]
        assert moved.head.seq > first.head.seq
        with open_file(db, read_only=True) as store:
            assert moved.report == WHOLE(store, after=None)  # what a whole walk says
        assert database._scratch is None  # no replay asked for: no scratch directory made
    finally:
        database.close()


def test_a_broken_chain_is_walked_whole_when_its_head_moves(
    world_db: Path, tmp_path: Path, asked: list[Head | None], client_line: Callable[..., bytes]
) -> None:
    db = _copy(world_db, tmp_path / "live.db")
    connection = sqlite3.connect(db)
    try:
        with connection:
            connection.execute("UPDATE _pwf_tree SET hash = zeroblob(32) WHERE pos = 0")
    finally:
        connection.close()
    database = Database(db)
    try:
        with database.view(None) as view:
            assert not database.chain(view).report.ok
        _append(db, client_line, 901)
        with database.view(None) as view:
            assert not database.chain(view).report.ok
        assert asked == [None, None]
    finally:
        database.close()
