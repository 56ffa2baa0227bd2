"""``pwf init --store`` names the shared log and the host's local file (ADR 0037 D5, 0038 D6)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from click.testing import CliRunner

from pwf.cli import cli
from pwf.store.postgres import shown_url

if TYPE_CHECKING:
    from pathlib import Path


def test_init_names_the_shared_log_then_the_local_file(pg_url: str, tmp_path: Path) -> None:
    """The line names the log of record first, the local projections after it."""
    db = tmp_path / "a.db"
    result = CliRunner().invoke(cli, ["init", "--db", str(db), "--store", pg_url])
    assert 0 == result.exit_code, result.output
    expected = f"initialised {shown_url(pg_url)} (pwf.store.v2, 0 events), local projections {db}"
    assert expected == result.output.strip()


def test_init_json_reports_the_store(pg_url: str, tmp_path: Path) -> None:
    """``--json`` carries ``store`` beside ``db`` only on a shared log."""
    db = tmp_path / "a.db"
    result = CliRunner().invoke(cli, ["init", "--json", "--db", str(db), "--store", pg_url])
    assert 0 == result.exit_code, result.output
    report = json.loads(result.output)
    assert {"db": str(db), "events": 0, "format": "pwf.store.v2", "store": shown_url(pg_url)} == (
        report
    )
    alone = CliRunner().invoke(cli, ["init", "--json", "--db", str(tmp_path / "b.db")])
    assert "store" not in json.loads(alone.output)
