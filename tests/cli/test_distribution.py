"""The distribution's name (ADR 0073): ``pwf`` on the package index is another project.

pwf is installed as ``pwf-host``; the import package and the command stay
``pwf``.  Every install hint, in the errors and in the documentation, names
that distribution and an extra it really has, so following one never
installs a stranger's code.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

from pwf import DISTRIBUTION, __version__
from pwf.cli._options import open_log
from pwf.cli.web import EXTRA_MISSING
from pwf.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
HINT = re.compile(r"pip install (?:-e )?'([^'\[]+)\[([^\]]+)\]'")
"""``pip install 'NAME[EXTRAS]'``: the distribution and the extras a hint names."""


def _hints(text: str) -> list[tuple[str, str]]:
    return HINT.findall(text)


def _psycopg_hint(monkeypatch: pytest.MonkeyPatch) -> str:
    """The error of ``--store`` where psycopg (the ``postgres`` extra) is missing."""
    monkeypatch.setitem(sys.modules, "pwf.store.postgres", None)
    with pytest.raises(ConfigError) as caught:
        open_log("postgresql://pwf@/nowhere")
    return str(caught.value)


def test_the_command_and_the_version_come_from_the_distribution() -> None:
    """The installed ``pwf-host`` carries the ``pwf`` command and the package's version."""
    distribution = importlib.metadata.distribution(DISTRIBUTION)
    scripts = {
        point.name: point.value
        for point in distribution.entry_points
        if point.group == "console_scripts"
    }
    assert {"pwf": "pwf._entry:main"} == scripts
    assert __version__ == distribution.version


def test_the_errors_name_the_distribution_and_an_extra_it_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``pwf web`` and ``--store`` without their extra name ``pwf-host[web]``, ``[postgres]``."""
    extras = set(importlib.metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or [])
    hints = _hints(EXTRA_MISSING) + _hints(_psycopg_hint(monkeypatch))
    assert [(DISTRIBUTION, "web"), (DISTRIBUTION, "postgres")] == hints
    assert {"web", "postgres"} <= extras


def test_the_documentation_names_the_distribution() -> None:
    """Every ``pip install 'NAME[…]'`` in the README and the guides names ``pwf-host`` or ``.``."""
    extras = set(importlib.metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or [])
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [
        (page.name, name, extra)
        for page in pages
        for name, wanted in _hints(page.read_text(encoding="utf-8"))
        for extra in wanted.split(",")
    ]
    assert found, "the README shows how to install the extras"
    assert [] == [hint for hint in found if hint[1] not in {DISTRIBUTION, "."}]
    assert [] == [hint for hint in found if hint[2] not in extras]
