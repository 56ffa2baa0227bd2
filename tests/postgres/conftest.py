"""Tests of the PostgreSQL store; collected only where psycopg (the ``postgres`` extra) is.

Without psycopg the contract suite's ``postgresql`` cases skip (and fail
under CI), so a missing extra is still reported.  :class:`Hosts` runs pwf's
command line as several hosts, each with its own local projection file, on
one shared log.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

from pwf.cli import cli

if TYPE_CHECKING:
    from pathlib import Path

collect_ignore_glob = [] if importlib.util.find_spec("psycopg") else ["test_*.py"]


class Hosts:
    """``pwf`` as host ``name`` (its own ``NAME.db``) on the shared log at ``url``."""

    def __init__(self, url: str, folder: Path) -> None:
        """Hosts keep their projection files in ``folder``."""
        self.url = url
        self.folder = folder

    def db(self, name: str) -> Path:
        """Host ``name``'s local projection file."""
        return self.folder / f"{name}.db"

    def __call__(self, name: str, *args: str, stdin: bytes | None = None) -> Result:
        """Run ``pwf ARGS --db NAME.db --store URL`` in this process."""
        return CliRunner().invoke(
            cli,
            [*args, "--db", str(self.db(name)), "--store", self.url],
            input=stdin,
            catch_exceptions=False,
        )


@pytest.fixture
def hosts(pg_url: str, tmp_path: Path) -> Hosts:
    """Hosts on a fresh shared log (``pwf init --store`` already run by host ``a``)."""
    made = Hosts(pg_url, tmp_path)
    assert 0 == made("a", "init").exit_code
    return made
