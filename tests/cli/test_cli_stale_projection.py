"""A reader of a database written before a projection's version moved names the cure.

A database written before ``runs`` became version 2 (ADR 0094) has no
``runs_totals`` until ``pwf rebuild``; a reading verb that fails on it says
which projection is at which version and to run ``pwf rebuild``, in one line
(exit 3), where it said only that a table was missing.  The hint is read on
the error's path alone.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from pwf.projections import runs

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from click.testing import Result

    Run = Callable[..., Result]


def _execute(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            connection.execute(statement)
    finally:
        connection.close()


def _made(run: Run, tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    assert 0 == run("init", "--db", str(path)).exit_code
    return path


def test_a_stale_projection_is_named_with_its_cure(run: Run, tmp_path: Path) -> None:
    path = _made(run, tmp_path)
    _execute(
        path,
        "DROP TABLE runs_totals",
        "UPDATE _pwf_checkpoint SET version = 1 WHERE projection = 'runs'",
    )
    before = path.read_bytes()
    done = run("status", "--db", str(path))
    assert 3 == done.exit_code
    wanted = (
        "Error: database error: no such table: runs_totals"
        f" (runs is at version 1, this pwf reads version {runs.VERSION}: run `pwf rebuild`)"
    )
    assert [wanted] == done.stderr.splitlines()
    assert before == path.read_bytes()
    assert 0 == run("rebuild", "--db", str(path)).exit_code
    assert 0 == run("status", "--db", str(path)).exit_code


def test_a_missing_table_at_current_versions_gets_no_hint(run: Run, tmp_path: Path) -> None:
    path = _made(run, tmp_path)
    _execute(path, "DROP TABLE runs_totals")
    done = run("status", "--db", str(path))
    assert 3 == done.exit_code
    assert ["Error: database error: no such table: runs_totals"] == done.stderr.splitlines()
