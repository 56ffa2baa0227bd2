"""``pwf replay``, ``pwf rebuild`` and ``pwf verify`` on a database built through the command line.

The live database gets three ``run.start`` requests through ``pwf request``,
at clock 1 000, 2 000 and 3 000; each is one batch of two events (seqs 1-2,
3-4, 5-6).  Damage is done by hand with plain SQL, outside pwf.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

import pwf.cli.replay
from pwf import canonical
from pwf._sqlite import projection_tables

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import edit, one_line
else:
    from _cli import edit, one_line

Run = Callable[..., Result]
RUNS = 3


def _tables(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        return len(projection_tables(connection))
    finally:
        connection.close()


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    """Three started runs, one batch of two events each, built through the command line."""
    path = tmp_path / "live.db"
    assert 0 == run("init", "--db", str(path)).exit_code
    lines = b"".join(client_line(number, at=number * 1000) for number in range(1, RUNS + 1))
    done = run("request", "--db", str(path), stdin=lines)
    assert (0, RUNS) == (done.exit_code, done.stdout.count('"outcome":"accepted"'))
    return path


class TestReplay:
    """``pwf replay --until SEQ | --until-time MS --out FILE``."""

    def test_until_a_batch_end(self, run: Run, live: Path, tmp_path: Path) -> None:
        """The whole batches up to the seq, and a one-line report of where it stopped."""
        out = tmp_path / "out.db"
        result = run("replay", "--db", str(live), "--until", "4", "--out", str(out))
        expected = (
            f"replayed 4 events into {out} ({_tables(live)} tables): reached seq 4, batch 2\n"
        )
        assert (0, expected, "") == (result.exit_code, result.stdout, result.stderr)

    def test_until_inside_a_batch_says_where_it_stopped(
        self, run: Run, live: Path, tmp_path: Path
    ) -> None:
        """Seq 3 opens batch 2, so the replay stops at seq 2 and says why."""
        out = tmp_path / "out.db"
        result = run("replay", "--db", str(live), "--until", "3", "--out", str(out))
        expected = (
            f"replayed 2 events into {out} ({_tables(live)} tables): reached seq 2, batch 1;"
            " seq 3 is inside batch 2, which is folded whole or not at all\n"
        )
        assert (0, expected) == (result.exit_code, result.stdout)

    def test_until_past_the_end(self, run: Run, live: Path, tmp_path: Path) -> None:
        """A seq past the head folds the whole log and says where the log ends."""
        out = tmp_path / "out.db"
        result = run("replay", "--db", str(live), "--until", "99", "--out", str(out))
        assert 0 == result.exit_code
        assert result.stdout.endswith("reached seq 6, batch 3; the log ends at seq 6\n")

    def test_until_time_as_json(self, run: Run, live: Path, tmp_path: Path) -> None:
        """``--until-time 2500`` keeps the batches stamped 1 000 and 2 000."""
        out = tmp_path / "out.db"
        result = run(
            "replay", "--db", str(live), "--until-time", "2500", "--out", str(out), "--json"
        )
        report = json.loads(result.stdout)
        expected = {"events": 4, "seq": 4, "batch": 2, "requestedSeq": 4, "logSeq": 6}
        assert (0, expected) == (result.exit_code, {key: report[key] for key in expected})
        assert (str(out), _tables(live)) == (report["out"], report["tables"])

    @pytest.mark.parametrize(
        ("when", "reached"),
        [
            ("1999", (2, 1)),
            ("2000", (4, 2)),
            ("2001", (4, 2)),
            ("1970-01-01T00:00:02Z", (4, 2)),
            ("2999", (4, 2)),
            ("3000", (6, 3)),
        ],
    )
    def test_until_time_keeps_a_batch_stamped_at_the_time(
        self, run: Run, live: Path, tmp_path: Path, when: str, reached: tuple[int, int]
    ) -> None:
        """Kept: the events before the first one stamped after TIME (ADR 0013).

        So the batch stamped exactly TIME is in, and one stamped a millisecond later is out.
        """
        out = tmp_path / "out.db"
        result = run("replay", "--db", str(live), "--until-time", when, "--out", str(out), "--json")
        report = json.loads(result.stdout)
        seq, batch = reached
        expected = {"events": seq, "seq": seq, "batch": batch, "requestedSeq": seq}
        assert (0, expected) == (result.exit_code, {key: report[key] for key in expected})

    @pytest.mark.parametrize(
        "when", ["1970-01-01T00:00:02.500Z", "1970-01-01T01:00:02.5+01:00", "1970-01-01T00:00:02.5"]
    )
    def test_until_time_in_iso_8601(
        self, run: Run, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
    ) -> None:
        """An ISO time cuts where its milliseconds do; without a zone it is local time, warned."""
        monkeypatch.setenv("TZ", "UTC")
        time.tzset()
        try:
            out = tmp_path / "out.db"
            result = run("replay", "--db", str(live), "--until-time", when, "--out", str(out))
        finally:
            monkeypatch.undo()
            time.tzset()
        assert (0, True) == (result.exit_code, result.stdout.startswith("replayed 4 events"))
        warned = "warning: --until-time 1970-01-01T00:00:02.5 has no time zone" in result.stderr
        assert warned == (not when.endswith(("Z", "+01:00")))

    @pytest.mark.parametrize("when", ["yesterday", "2026-02-30", "-5", "1e3", "١٢٣"])
    def test_a_bad_until_time_is_one_line(
        self, run: Run, live: Path, tmp_path: Path, when: str
    ) -> None:
        """Neither digits nor ISO 8601: exit 2, one line, no file."""
        out = tmp_path / "out.db"
        result = run("replay", "--db", str(live), "--until-time", when, "--out", str(out))
        assert (2, False) == (result.exit_code, out.exists())
        assert "--until-time takes epoch milliseconds or an ISO 8601 time" in one_line(
            result.stderr
        )

    def test_the_output_is_a_database_pwf_reads(self, run: Run, live: Path, tmp_path: Path) -> None:
        """``pwf log verify`` and ``pwf query`` accept the replayed file."""
        out = tmp_path / "out.db"
        assert 0 == run("replay", "--db", str(live), "--until", "4", "--out", str(out)).exit_code
        verified = run("log", "verify", "--db", str(out))
        assert (0, "ok: 4 events, chain intact, head seq 4\n") == (
            verified.exit_code,
            verified.stdout,
        )
        listed = run("query", "runs", "--db", str(out), "--json")
        runs = [row["run_id"] for row in json.loads(listed.stdout)]
        assert (0, ["run-1", "run-2"]) == (listed.exit_code, sorted(runs))

    def test_an_existing_output_is_refused(self, run: Run, live: Path, tmp_path: Path) -> None:
        """Exit 2 and one line; the file is left as it was."""
        out = tmp_path / "out.db"
        out.write_bytes(b"keep")
        result = run("replay", "--db", str(live), "--out", str(out))
        assert 2 == result.exit_code
        assert f"Error: {out} already exists; replay writes a new file" == one_line(result.stderr)
        assert b"keep" == out.read_bytes()

    def test_both_limits_are_a_usage_error(self, run: Run, live: Path, tmp_path: Path) -> None:
        """``--until`` and ``--until-time`` exclude each other (exit 2, nothing written)."""
        out = tmp_path / "out.db"
        result = run(
            "replay", "--db", str(live), "--until", "2", "--until-time", "9", "--out", str(out)
        )
        assert (2, False) == (result.exit_code, out.exists())
        assert "--until and --until-time exclude each other" in result.stderr

    def test_a_terminal_gets_a_progress_bar(
        self, run: Run, live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """On a terminal the bar goes to stderr; stdout keeps the one-line report."""
        monkeypatch.setattr(pwf.cli.replay, "_progress", pwf.cli.replay._Bar)
        out = tmp_path / "out.db"
        result = run("replay", "--db", str(live), "--out", str(out))
        assert 0 == result.exit_code
        assert "replaying" in result.stderr
        assert result.stdout.startswith("replayed 6 events")

    def test_out_is_required(self, run: Run, live: Path) -> None:
        """Without ``--out`` there is nowhere to write (exit 2)."""
        assert 2 == run("replay", "--db", str(live)).exit_code


class TestRebuild:
    """``pwf rebuild``."""

    def test_reports_events_and_tables(self, run: Run, live: Path) -> None:
        """One line: how many events were folded into how many tables."""
        result = run("rebuild", "--db", str(live))
        expected = f"rebuilt 6 events up to seq 6 into {_tables(live)} tables\n"
        assert (0, expected, "") == (result.exit_code, result.stdout, result.stderr)

    def test_sweeps_the_scratch_files_a_killed_fold_left(self, run: Run, live: Path) -> None:
        """Unheld scratch files over a minute old are deleted, each with a warning line."""
        left = [live.with_name(f"{live.name}.rebuild-abcd1234{end}") for end in ("", "-journal")]
        left.append(live.with_name(f"{live.name}.verify-abcd1234.part-efgh5678"))
        for path in left:
            path.write_bytes(b"left by a killed fold")
            os.utime(path, (path.stat().st_mtime - 3600,) * 2)
        result = run("rebuild", "--db", str(live))
        assert (0, [False] * 3) == (result.exit_code, [path.exists() for path in left])
        warned = [json.loads(line) for line in result.stderr.splitlines()]
        assert sorted(str(path) for path in left) == sorted(line["path"] for line in warned)
        assert {"scratch.orphan_removed"} == {line["event"] for line in warned}

    def test_fixes_a_corrupted_row(self, run: Run, live: Path) -> None:
        """After a hand edit ``verify`` fails; after ``rebuild`` it passes."""
        edit(live, "UPDATE runs SET status = 'running' WHERE run_id = 'run-2'")
        assert 1 == run("verify", "--db", str(live)).exit_code
        assert 0 == run("rebuild", "--db", str(live)).exit_code
        assert 0 == run("verify", "--db", str(live)).exit_code

    def test_as_json(self, run: Run, live: Path) -> None:
        """``--json`` gives the same numbers."""
        result = run("rebuild", "--db", str(live), "--json")
        shown = {"events": 6, "seq": 6, "tables": _tables(live)}
        expected = canonical.encode(shown).decode() + "\n"
        assert (0, expected) == (result.exit_code, result.stdout)


class TestVerify:
    """``pwf verify``: exit 0 sound, 1 a bad chain or a differing table, 2 bad input."""

    def test_ok(self, run: Run, live: Path) -> None:
        """Chain and projections both hold."""
        result = run("verify", "--db", str(live))
        expected = (
            f"ok: chain intact, projections equal the log (6 events, {_tables(live)} tables)\n"
        )
        assert (0, expected) == (result.exit_code, result.stdout)

    def test_a_corrupted_cell_names_table_key_and_values(self, run: Run, live: Path) -> None:
        """Exit 1: the table, the row's key, the column and both values."""
        edit(live, "UPDATE runs SET status = 'running' WHERE run_id = 'run-2'")
        result = run("verify", "--db", str(live))
        expected = (
            "bad: table runs: rows differ from the log's rebuild\n"
            '  changed: runs[run_id="run-2"].status: live "running", rebuilt "queued"\n'
        )
        assert (1, expected) == (result.exit_code, result.stdout)

    def test_a_deleted_row_as_json(self, run: Run, live: Path) -> None:
        """``--json`` names the row only the rebuild has."""
        edit(live, "DELETE FROM run_queue WHERE run_id = 'run-3'")
        result = run("verify", "--db", str(live), "--json")
        report = json.loads(result.stdout)
        assert (1, False, "run_queue") == (result.exit_code, report["ok"], report["table"])
        assert [{"columns": {}, "key": {"run_id": "run-3"}, "kind": "onlyInRebuild"}] == report[
            "rows"
        ]

    def test_a_tampered_body_names_its_seq(self, run: Run, live: Path) -> None:
        """Exit 1 at the first bad seq of the chain."""
        edit(
            live,
            "UPDATE events SET body = CAST(replace(body, 'run-2', 'run-7') AS BLOB) WHERE seq = 3",
        )
        result = run("verify", "--db", str(live))
        assert 1 == result.exit_code
        assert one_line(result.stdout).startswith("bad: seq 3: ")
        report = json.loads(run("verify", "--db", str(live), "--json").stdout)
        assert (False, 3, None) == (report["ok"], report["firstBadSeq"], report["table"])

    def test_a_missing_database_is_bad_input(self, run: Run, tmp_path: Path) -> None:
        """Exit 2 and one line."""
        result = run("verify", "--db", str(tmp_path / "nope.db"))
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith("Error: no state database at ")
