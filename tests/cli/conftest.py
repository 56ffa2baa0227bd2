"""Fixtures the command-line tests share: a scratch directory and ``pwf`` in-process.

Request lines (``client_line``) come from ``tests/conftest.py``, shared with
the PostgreSQL tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

from pwf.cli import cli

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No $PWF_DB from outside, and a scratch working directory for the default path."""
    monkeypatch.delenv("PWF_DB", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def run() -> Callable[..., Result]:
    """Invoke ``pwf`` in-process with the given arguments, stdin bytes and environment."""
    runner = CliRunner()

    def invoke(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Result:
        """Run ``pwf *args``; errors must become exit codes, never escape."""
        return runner.invoke(
            cli, list(args), input=stdin, env=env, catch_exceptions=False, prog_name="pwf"
        )

    return invoke
