"""The reliability page is written by ``make reliability-report`` only, never by a test run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from tests.reliability.conftest import PARTS, REPORT, Collector
else:
    from conftest import PARTS, REPORT, Collector


def _finished_whole_run(root: Path) -> Collector:
    collector = Collector()
    collector.figures.ran.update(part.module for part in PARTS)
    session = SimpleNamespace(config=SimpleNamespace(rootpath=root))
    collector.pytest_sessionfinish(session, pytest.ExitCode.OK)  # type: ignore[arg-type]
    return collector


def test_a_whole_run_does_not_write_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when every part ran, plain pytest (``make test``) leaves the tracked page alone."""
    monkeypatch.delenv(REPORT, raising=False)
    (tmp_path / "docs").mkdir()
    collector = _finished_whole_run(tmp_path)
    assert collector.written is None
    assert not (tmp_path / "docs" / "reliability.md").exists()


def test_the_report_target_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the report switch set, a whole run writes the page."""
    monkeypatch.setenv(REPORT, "1")
    (tmp_path / "docs").mkdir()
    collector = _finished_whole_run(tmp_path)
    assert "wrote docs/reliability.md" == collector.written
    page = (tmp_path / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert page.startswith("# Reliability\n")
    assert "make reliability-report" in page


def test_the_makefile_has_the_target() -> None:
    """``make reliability-report`` sets the switch; ``make test`` does not."""
    from pathlib import Path  # noqa: PLC0415 - only this test reads files

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text(encoding="utf-8")
    assert f"reliability-report: install\n\t{REPORT}=1 $(BIN)/pytest tests/reliability" in makefile
    assert REPORT not in makefile.split("reliability-report:")[0]
