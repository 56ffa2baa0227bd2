"""Every directory pwf creates is 0700 and every file 0600, even under ``umask 000``."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

Run = Callable[..., Result]


@pytest.fixture(autouse=True)
def _permissive() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _private(top: Path, below: Path) -> None:
    """Every directory from ``top`` (exclusive) down to ``below`` is 0700."""
    here = below
    while here != top:
        assert 0o700 == _mode(here), here
        here = here.parent


def test_init_import_backup_prune_and_export_are_private(
    run: Run, tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    db = tmp_path / "a" / "b" / "state.db"
    assert 0 == run("init", "--db", str(db)).exit_code
    _private(tmp_path, db.parent)
    assert 0o600 == _mode(db)
    assert 0 == run("request", "--db", str(db), stdin=client_line(1, at=1000)).exit_code

    backup = tmp_path / "c" / "d" / "copy.sqlite"
    assert 0 == run("state", "backup", str(backup), "--db", str(db)).exit_code
    _private(tmp_path, backup.parent)
    assert 0o600 == _mode(backup)

    pruned = tmp_path / "e" / "f" / "pruned.sqlite"
    args = ("--before", "2026-01-01", "--apply", "--backup", str(pruned))
    assert 0 == run("state", "prune", "--db", str(db), *args).exit_code
    _private(tmp_path, pruned.parent)
    assert 0o600 == _mode(pruned)

    exported = tmp_path / "log.jsonl"
    assert 0 == run("log", "export", "--db", str(db), "--out", str(exported)).exit_code
    assert 0o600 == _mode(exported)
    exported.chmod(0o644)
    assert 0 == run("log", "export", "--db", str(db), "--out", str(exported)).exit_code
    assert 0o600 == _mode(exported)

    imported = tmp_path / "g" / "h" / "copy.db"
    assert 0 == run("log", "import", "--db", str(imported), str(exported)).exit_code
    _private(tmp_path, imported.parent)
    assert 0o600 == _mode(imported)
