"""Another program's SQLite file is byte for byte unchanged by every pwf command that refuses it.

The file is in rollback-journal mode, as most programs leave theirs; a pwf
that switched it to WAL (or wrote anything) before checking its format
would change its header.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import one_line
else:
    from _cli import one_line

Run = Callable[..., Result]


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    path = tmp_path / "other.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    connection.execute("INSERT INTO notes (text) VALUES ('mine')")
    connection.commit()
    connection.close()
    return path


COMMANDS = [
    ("init",),
    ("log", "verify"),
    ("log", "verify", "--chain-only"),
    ("log", "show"),
    ("log", "export"),
    ("query", "runs"),
    ("verify",),
    ("rebuild",),
    ("session", "expire", "--at", "5"),
    ("state", "prune", "--before", "2026-01-01"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_refused_foreign_file_is_unchanged(
    run: Run, foreign: Path, command: tuple[str, ...]
) -> None:
    """A one-line refusal, and ``cmp`` would find no difference."""
    before = foreign.read_bytes()
    done = run(*command, "--db", str(foreign))
    assert done.exit_code != 0
    assert "not a pwf database" in one_line(done.stderr)
    assert before == foreign.read_bytes()
    assert not foreign.with_name(foreign.name + "-wal").exists()


def test_a_refused_request_leaves_it_unchanged(
    run: Run, foreign: Path, client_line: Callable[..., bytes]
) -> None:
    """``pwf request`` too."""
    before = foreign.read_bytes()
    done = run("request", "--db", str(foreign), stdin=client_line(1))
    assert done.exit_code != 0
    assert before == foreign.read_bytes()


def test_a_foreign_pwf_meta_is_refused_by_init(run: Run, tmp_path: Path) -> None:
    """A table named like pwf's with another format is not taken over."""
    path = tmp_path / "odd.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE _pwf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    connection.execute("INSERT INTO _pwf_meta VALUES ('format', 'other.v9')")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    done = run("init", "--db", str(path))
    assert done.exit_code != 0
    assert before == path.read_bytes()


@pytest.mark.parametrize(
    "args",
    [
        ("status", "--db"),
        ("log", "show", "--db"),
        ("request", "--db"),
        ("verify", "--db"),
        ("digest",),
    ],
)
def test_a_newer_format_is_named_not_called_foreign(
    run: Run, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """A database a newer pwf wrote says its format and the one this pwf reads (ADR 0079)."""
    path = tmp_path / "newer.db"
    assert 0 == run("init", "--db", str(path)).exit_code
    connection = sqlite3.connect(path)
    connection.execute("UPDATE _pwf_meta SET value = 'pwf.store.v3' WHERE key = 'format'")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    result = run(*args, str(path), stdin=b"")
    assert 2 == result.exit_code
    assert (
        f"Error: {path}: a pwf database in format pwf.store.v3, which this pwf does not read"
        " (it reads pwf.store.v2); open it with the pwf that wrote it or a newer one"
    ) == one_line(result.stderr)
    assert before == path.read_bytes()
