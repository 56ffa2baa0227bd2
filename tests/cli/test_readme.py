"""The README a newcomer finishes (ADR 0082): short, and every link in it leads somewhere.

The pages under ``docs/`` are checked by ``make docs`` (MkDocs ``--strict``);
the README lies outside the site, so its links are checked here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def test_the_readme_is_at_most_250_lines_and_16_kb() -> None:
    data = README.read_bytes()
    assert len(data.splitlines()) <= 250
    assert len(data) <= 16 * 1024


def test_every_relative_link_of_the_readme_exists() -> None:
    targets = [t for t in _LINK.findall(README.read_text(encoding="utf-8")) if "://" not in t]
    assert targets
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert [] == missing


def test_the_readme_keeps_its_two_commands_and_the_tour() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo   # " in text
    assert "make test   # " in text
    tour = text[text.index("## A five-minute tour") :]
    steps = ["pwf status", "pwf explain", "pwf replay", "pwf verify", "pwf diff"]
    assert sorted(steps, key=tour.index) == steps
