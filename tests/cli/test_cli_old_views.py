"""A database made before the readable views gains them at its first writing command.

The views (ADR 0035) were made only by ``pwf init``; a database made before
them, or before a projection table gained a column, gets the current ones
the first time pwf opens it for writing (ADR 0049).  Nothing else changes:
the log and every projection table keep their bytes, so ``pwf digest`` and
``pwf log export`` print what they printed before.  A database whose views
are current is not written at all, and another program's file is refused
before anything is written (``tests/cli/test_cli_foreign_file.py``).
"""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pwf.sqlviews import views_current

if TYPE_CHECKING:
    from collections.abc import Callable

    from click.testing import Result

    Run = Callable[..., Result]

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _views(path: Path) -> list[str]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'view' AND name LIKE 'readable\\_%'"
            " ESCAPE '\\' ORDER BY name"
        ).fetchall()
        return [row[0] for row in rows]
    finally:
        connection.close()


def _current(path: Path) -> bool:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return views_current(connection)
    finally:
        connection.close()


def _execute(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            connection.execute(statement)
    finally:
        connection.close()


def _seen(run: Run, path: Path) -> tuple[str, bytes]:
    """What ``pwf digest`` and ``pwf log export`` print for the database."""
    digest = run("digest", str(path))
    export = run("log", "export", "--db", str(path))
    assert (0, 0) == (digest.exit_code, export.exit_code), digest.output + export.output
    return digest.stdout, export.stdout_bytes


@pytest.fixture
def without_views(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    """A database with two runs whose views were dropped, as one made before them."""
    path = tmp_path / "old.db"
    assert 0 == run("init", "--db", str(path)).exit_code
    lines = client_line(1, at=1_785_600_000_000) + client_line(2, at=1_785_600_000_250)
    assert 0 == run("request", "--db", str(path), stdin=lines).exit_code
    names = _views(path)
    assert "readable_runs" in names
    _execute(path, *(f'DROP VIEW "{name}"' for name in names))
    assert [] == _views(path)
    return path


def test_the_first_writing_command_adds_them(run: Run, without_views: Path) -> None:
    """An empty ``pwf request`` appends nothing, yet the views are there afterwards."""
    before = _seen(run, without_views)
    done = run("request", "--db", str(without_views), stdin=b"")
    assert (0, "") == (done.exit_code, done.stderr)
    assert "readable_events" in _views(without_views)
    assert "readable_runs" in _views(without_views)
    assert _current(without_views)
    assert before == _seen(run, without_views)


def test_they_read_the_tables(run: Run, without_views: Path) -> None:
    assert 0 == run("session", "expire", "--at", "5", "--db", str(without_views)).exit_code
    connection = sqlite3.connect(without_views)
    try:
        rows = connection.execute(
            "SELECT run_id, created_at FROM readable_runs ORDER BY run_id"
        ).fetchall()
    finally:
        connection.close()
    assert [("run-1", "2026-08-01T16:00:00.000Z"), ("run-2", "2026-08-01T16:00:00.250Z")] == rows


def test_reading_commands_leave_the_file_alone(run: Run, without_views: Path) -> None:
    """``query``, ``log show`` and ``verify`` open the file read-only: no views, same bytes."""
    before = without_views.read_bytes()
    for command in (("query", "runs"), ("log", "show"), ("verify",), ("status",)):
        done = run(*command, "--db", str(without_views))
        assert done.exit_code in (0, 1), done.output
    assert [] == _views(without_views)
    assert before == without_views.read_bytes()


def test_a_view_missing_a_column_is_made_again(run: Run, without_views: Path) -> None:
    """A view written for an older table (here: fewer columns) is replaced by the current one."""
    assert 0 == run("request", "--db", str(without_views), stdin=b"").exit_code
    _execute(
        without_views,
        'DROP VIEW "readable_runs"',
        'CREATE VIEW "readable_runs" AS SELECT "run_id" FROM "runs"',
    )
    assert not _current(without_views)
    assert 0 == run("request", "--db", str(without_views), stdin=b"").exit_code
    assert _current(without_views)


def test_current_views_are_not_written_again(run: Run, without_views: Path) -> None:
    """Once they are current, a writing command that appends nothing leaves every byte."""
    assert 0 == run("request", "--db", str(without_views), stdin=b"").exit_code
    before = without_views.read_bytes()
    assert 0 == run("request", "--db", str(without_views), stdin=b"").exit_code
    assert before == without_views.read_bytes()


def test_a_database_from_before_the_views_gains_them(run: Run, tmp_path: Path) -> None:
    """The database pwf wrote at commit 62dba64 (``test_legacy_log.py``) had no views.

    Its first writing command gives it views over the tables it has, and
    the rebuild that adds the projections made since covers those too.
    """
    path = tmp_path / "legacy.db"
    path.write_bytes(gzip.decompress((GOLDEN / "main-before-0033.db.gz").read_bytes()))
    assert 0 == run("log", "migrate", "--db", str(path)).exit_code  # ADR 0102
    assert [] == _views(path)
    before = _seen(run, path)
    done = run("request", "--db", str(path), stdin=b"")
    assert (0, "") == (done.exit_code, done.stderr)
    assert _current(path)
    assert "readable_events" in _views(path)
    assert before == _seen(run, path)
    assert 0 == run("rebuild", "--db", str(path)).exit_code
    assert _current(path)
