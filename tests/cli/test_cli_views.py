"""The file as other tools see it: pwf's application_id and the readable views."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.cli import cli
from pwf.commands.prune import iso_utc
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import one_line
    from tests.cli.test_cli_explain import RUN, START, Pwf
else:
    from _cli import one_line
    from test_cli_explain import RUN, START, Pwf

PWF_APPLICATION_ID = 0x70776631
"""The bytes "pwf1", as docs/reference.md and ADR 0035 document it."""
T0 = 1_785_600_000_250


@pytest.fixture
def pwf(tmp_path: Path) -> Pwf:
    driver = Pwf(tmp_path / "state.db")
    driver.request("run.start", START, T0, runId=RUN)
    return driver


def _sql(path: str | Path, query: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()


class TestApplicationId:
    def test_init_sets_it(self, pwf: Pwf) -> None:
        assert [(PWF_APPLICATION_ID,)] == _sql(pwf.db, "PRAGMA application_id")

    def test_replay_backup_and_import_keep_it(self, pwf: Pwf, tmp_path: Path) -> None:
        assert 0 == pwf("replay", "--out", str(tmp_path / "r.db")).exit_code
        assert 0 == pwf("state", "backup", str(tmp_path / "b.db")).exit_code
        exported = pwf("log", "export").stdout_bytes
        imported = pwf.runner.invoke(
            cli, ["log", "import", "--db", str(tmp_path / "i.db")], input=exported
        )
        assert 0 == imported.exit_code, imported.output
        for name in ("r.db", "b.db", "i.db"):
            assert [(PWF_APPLICATION_ID,)] == _sql(tmp_path / name, "PRAGMA application_id"), name

    def test_a_database_without_it_still_opens(self, pwf: Pwf) -> None:
        connection = sqlite3.connect(pwf.db)
        connection.execute("PRAGMA application_id = 0")
        connection.close()
        assert 0 == pwf("log", "verify").exit_code
        assert 0 == pwf("verify").exit_code
        assert [(0,)] == _sql(pwf.db, "PRAGMA application_id")

    def test_another_programs_id_is_not_a_pwf_database(self, pwf: Pwf) -> None:
        connection = sqlite3.connect(pwf.db)
        connection.execute("PRAGMA application_id = 1234")
        connection.close()
        result = pwf("log", "show")
        assert 2 == result.exit_code
        assert "not a pwf database (application_id 1234" in one_line(result.stderr)


class TestReadableViews:
    def test_hashes_are_hex_and_times_iso(self, pwf: Pwf) -> None:
        [listed] = json.loads(pwf("query", "runs", "--json").stdout)
        [(run_id, created, input_hash)] = _sql(
            pwf.db, "SELECT run_id, created_at, input_hash FROM readable_runs"
        )
        assert (RUN, iso_utc(T0), listed["input_hash"]) == (run_id, created, input_hash)
        assert "2026-08-01T16:00:00.250Z" == created
        events = [json.loads(line) for line in pwf("log", "show", "--json").stdout.splitlines()]
        rows = _sql(pwf.db, "SELECT seq, at, content_hash, body FROM readable_events ORDER BY seq")
        assert [(e["seq"], iso_utc(e["at"]), e["contentHash"]) for e in events] == [
            row[:3] for row in rows
        ]
        assert [json.loads(str(row[3])) for row in rows] == events

    def test_every_projection_table_has_one(self, pwf: Pwf) -> None:
        tables = {
            row[0]
            for row in _sql(
                pwf.db,
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE '\\_pwf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite%'",
            )
        }
        views = {
            row[0] for row in _sql(pwf.db, "SELECT name FROM sqlite_master WHERE type = 'view'")
        }
        log = {"events"}  # the log is a view since format pwf.store.v2 (ADR 0102), and has one
        assert {f"readable_{name}" for name in tables | log} | log == views

    def test_views_are_read_only(self, pwf: Pwf) -> None:
        connection = sqlite3.connect(pwf.db)
        try:
            with pytest.raises(sqlite3.OperationalError, match="cannot modify"):
                connection.execute("UPDATE readable_runs SET status = 'x'")
        finally:
            connection.close()

    def test_diff_digest_verify_and_rebuild_ignore_them(self, pwf: Pwf, tmp_path: Path) -> None:
        replayed = str(tmp_path / "r.db")
        assert 0 == pwf("replay", "--out", replayed).exit_code
        assert [("events",)] == _sql(replayed, "SELECT name FROM sqlite_master WHERE type = 'view'")
        assert 0 == pwf("verify").exit_code
        diff = pwf.runner.invoke(cli, ["diff", pwf.db, replayed])
        assert 0 == diff.exit_code, diff.output
        digests = [pwf.runner.invoke(cli, ["digest", path]).stdout for path in (pwf.db, replayed)]
        assert digests[0] == digests[1]
        schema = _sql(pwf.db, "SELECT type, name, sql FROM sqlite_master ORDER BY rowid")
        assert 0 == pwf("rebuild").exit_code
        assert schema == _sql(pwf.db, "SELECT type, name, sql FROM sqlite_master ORDER BY rowid")
        assert 0 == pwf("verify").exit_code
        with SqliteStore(pwf.db, read_only=True) as store:
            assert store.verify().ok
