"""``pwf diff``, ``pwf digest`` and ``pwf log diff`` on databases built through the command line.

The live database gets three ``run.start`` requests through ``pwf request``;
its twin is ``pwf log export | pwf log import``, which re-projects the log.
Corruptions are made by hand with plain SQL, outside pwf.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

from pwf import canonical

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import edit, one_line
else:
    from _cli import edit, one_line

Run = Callable[..., Result]
RUNS = 3
HEX_LINE = re.compile(r"^[0-9a-f]{64}  [a-z_]+$")


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    """A database with three started runs, built through ``pwf init`` and ``pwf request``."""
    path = tmp_path / "live.db"
    assert 0 == run("init", "--db", str(path)).exit_code
    lines = b"".join(client_line(number) for number in range(1, RUNS + 1))
    done = run("request", "--db", str(path), "--at", "1000", stdin=lines)
    assert (0, RUNS) == (done.exit_code, done.stdout.count('"outcome":"accepted"'))
    return path


def _reimport(run: Run, source: Path, target: Path, *limits: str) -> Path:
    exported = run("log", "export", "--db", str(source), *limits)
    assert 0 == exported.exit_code
    assert 0 == run("log", "import", "--db", str(target), stdin=exported.stdout_bytes).exit_code
    return target


@pytest.fixture
def copy(run: Run, live: Path, tmp_path: Path) -> Path:
    """``pwf log export | pwf log import`` of the live database."""
    return _reimport(run, live, tmp_path / "copy.db")


def _events(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        [count] = connection.execute("SELECT count(*) FROM events").fetchone()
    finally:
        connection.close()
    return int(count)


class TestDiff:
    """``pwf diff A B``: exit 0 equal, 1 different, 2 bad input."""

    def test_a_reimport_is_equal(self, run: Run, live: Path, copy: Path) -> None:
        """Independent projections of one log compare equal."""
        result = run("diff", str(live), str(copy))
        assert (0, "equal\n") == (result.exit_code, result.stdout)

    def test_a_changed_cell_is_reported_exactly(self, run: Run, live: Path, copy: Path) -> None:
        """Table, key, column and both values, then the total."""
        edit(copy, "UPDATE runs SET status = 'running' WHERE run_id = 'run-1'")
        result = run("diff", str(live), str(copy))
        expected = (
            "runs: 1 difference\n"
            '  changed: runs[run-1].status: "queued" -> "running"\n'
            # running beside a queued entry: the runs' kept totals count it (ADR 0094)
            "runs_totals: 1 difference\n"
            "  changed: runs_totals[1].contradictions: 0 -> 1\n"
            "2 differences in 2 tables\n"
        )
        assert (1, expected) == (result.exit_code, result.stdout)

    def test_a_changed_cell_as_json(self, run: Run, live: Path, copy: Path) -> None:
        """``--json`` prints one canonical object with every difference."""
        edit(copy, "UPDATE runs SET status = 'running' WHERE run_id = 'run-1'")
        result = run("diff", str(live), str(copy), "--json")
        change = {"key": ["run-1"], "column": "status", "a": "queued", "b": "running"}
        counted = {"key": [1], "column": "contradictions", "a": 0, "b": 1}  # ADR 0094
        expected = {
            "equal": False,
            "tables": {
                "runs": {"onlyInA": [], "onlyInB": [], "changed": [change]},
                "runs_totals": {"onlyInA": [], "onlyInB": [], "changed": [counted]},
            },
        }
        assert 1 == result.exit_code
        assert canonical.encode(expected).decode() + "\n" == result.stdout

    def test_equal_as_json(self, run: Run, live: Path, copy: Path) -> None:
        """Equal databases print ``equal: true`` and no tables."""
        result = run("diff", str(live), str(copy), "--json")
        assert (0, '{"equal":true,"tables":{}}\n') == (result.exit_code, result.stdout)

    def test_rows_only_on_one_side(self, run: Run, live: Path, copy: Path) -> None:
        """A deleted row is only in A, an added one only in B, each by key."""
        edit(
            copy,
            "DELETE FROM run_bindings WHERE run_id = 'run-2'",
            "INSERT INTO run_bindings VALUES ('run-9', 's-9', 'interactive', 1)",
        )
        result = run("diff", str(live), str(copy))
        expected = (
            "run_bindings: 2 differences\n"
            "  only in A: run_bindings[run-2]\n"
            "  only in B: run_bindings[run-9]\n"
            "2 differences in 1 table\n"
        )
        assert (1, expected) == (result.exit_code, result.stdout)
        data = json.loads(run("diff", str(live), str(copy), "--json").stdout)
        assert {"onlyInA": [["run-2"]], "onlyInB": [["run-9"]], "changed": []} == data["tables"][
            "run_bindings"
        ]

    def test_many_differences_are_cut_but_counted(self, run: Run, live: Path, copy: Path) -> None:
        """Fifty lines per table, then how many more; ``--json`` lists them all."""
        connection = sqlite3.connect(copy)
        with connection:
            connection.executemany(
                "INSERT INTO run_bindings VALUES (?, 's', 'headless', 1)",
                [(f"extra-{n:02}",) for n in range(60)],
            )
        connection.close()
        result = run("diff", str(live), str(copy))
        lines = result.stdout.splitlines()
        assert 1 == result.exit_code
        assert "run_bindings: 60 differences" == lines[0]
        assert "  only in B: run_bindings[extra-49]" == lines[50]
        assert ["  … 10 more", "60 differences in 1 table"] == lines[51:]
        data = json.loads(run("diff", str(live), str(copy), "--json").stdout)
        assert 60 == len(data["tables"]["run_bindings"]["onlyInB"])

    def test_long_values_are_cut_in_the_table_only(self, run: Run, live: Path, copy: Path) -> None:
        """A long BLOB is shown as cut hex; ``--json`` carries it whole."""
        edit(
            copy,
            "UPDATE blobs SET content = zeroblob(200), byte_length = 200"
            " WHERE blob_hash = (SELECT min(blob_hash) FROM blobs)",
        )
        result = run("diff", str(live), str(copy))
        [line] = [line for line in result.stdout.splitlines() if ".content: " in line]
        assert line.endswith(f' -> "{"0" * 99}… (402 characters)')
        data = json.loads(run("diff", str(live), str(copy), "--json").stdout)
        [content] = [c for c in data["tables"]["blobs"]["changed"] if c["column"] == "content"]
        assert "00" * 200 == content["b"]

    def test_table_restricts_the_comparison(self, run: Run, live: Path, copy: Path) -> None:
        """``--table`` compares only the named tables."""
        edit(copy, "UPDATE runs SET status = 'running' WHERE run_id = 'run-1'")
        result = run("diff", str(live), str(copy), "--table", "run_bindings", "--table", "blobs")
        assert (0, "equal\n") == (result.exit_code, result.stdout)
        assert 1 == run("diff", str(live), str(copy), "--table", "runs").exit_code

    @pytest.mark.parametrize(
        ("statement", "message"),
        [
            (
                "UPDATE _pwf_checkpoint SET version = 2 WHERE projection = 'blobs'",
                "A has projection blobs at version 1, B at version 2",
            ),
            ("CREATE TABLE extra (x TEXT PRIMARY KEY)", "table extra is only in B"),
            (
                "ALTER TABLE run_bindings ADD COLUMN note TEXT",
                (
                    "table run_bindings has columns (run_id, origin_session_id, execution_mode,"
                    " created_at) in A, (run_id, origin_session_id, execution_mode, created_at,"
                    " note) in B"
                ),
            ),
        ],
        ids=["version", "table", "columns"],
    )
    def test_schema_mismatch_exits_2_naming_it(
        self, run: Run, live: Path, copy: Path, statement: str, message: str
    ) -> None:
        """Different versions, tables or columns: exit 2, one line naming the difference."""
        edit(copy, statement)
        result = run("diff", str(live), str(copy))
        assert (2, "") == (result.exit_code, result.stdout)
        assert f"Error: {message}" == one_line(result.stderr)

    def test_a_missing_file_exits_2(self, run: Run, live: Path, tmp_path: Path) -> None:
        """A path that does not exist is named, and not created."""
        missing = tmp_path / "nope.db"
        result = run("diff", str(live), str(missing))
        assert 2 == result.exit_code
        assert f"Error: no such database: {missing}" == one_line(result.stderr)
        assert not missing.exists()

    def test_not_a_pwf_database_exits_2(self, run: Run, live: Path, tmp_path: Path) -> None:
        """A SQLite file of another program is refused."""
        other = tmp_path / "other.db"
        edit(other, "CREATE TABLE t (x)")
        result = run("diff", str(other), str(live))
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith(f"Error: not a pwf database: {other} ")

    def test_an_unknown_table_exits_2(self, run: Run, live: Path, copy: Path) -> None:
        """``--table`` must name a projection table."""
        result = run("diff", str(live), str(copy), "--table", "events")
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith("Error: no projection table events (tables: ")


class TestDigest:
    """``pwf digest DB``: one SHA-256 per projection table, then ``all``."""

    def test_lines_per_table_then_all(self, run: Run, live: Path) -> None:
        """``HEX  TABLE`` lines in table-name order, ending with ``HEX  all``."""
        result = run("digest", str(live))
        lines = result.stdout.splitlines()
        names = [line.split("  ")[1] for line in lines]
        assert 0 == result.exit_code
        assert all(HEX_LINE.match(line) for line in lines), lines
        assert (sorted(names[:-1]), "all") == (names[:-1], names[-1])
        assert {"runs", "run_bindings", "blobs"} <= set(names)
        assert "events" not in names

    def test_a_reimport_digests_alike(self, run: Run, live: Path, copy: Path) -> None:
        """A live database and a re-projection of its log print the same lines."""
        assert run("digest", str(live)).stdout == run("digest", str(copy)).stdout

    def test_a_corrupted_cell_moves_its_table_and_all(
        self, run: Run, live: Path, copy: Path
    ) -> None:
        """Only the corrupted table's line and ``all`` change."""
        edit(copy, "UPDATE runs SET status = 'running' WHERE run_id = 'run-1'")
        before = run("digest", str(live)).stdout.splitlines()
        after = run("digest", str(copy)).stdout.splitlines()
        moved = [b.split("  ")[1] for a, b in zip(before, after, strict=True) if a != b]
        assert ["runs", "runs_totals", "all"] == moved  # the kept totals count it (ADR 0094)

    def test_json_matches_the_lines(self, run: Run, live: Path) -> None:
        """``--json`` prints ``{"all": HEX, "tables": {TABLE: HEX}}``."""
        data = json.loads(run("digest", str(live), "--json").stdout)
        lines = run("digest", str(live)).stdout.splitlines()
        expected = [f"{data['tables'][name]}  {name}" for name in data["tables"]]
        assert [*expected, f"{data['all']}  all"] == lines

    def test_a_missing_file_exits_2(self, run: Run, tmp_path: Path) -> None:
        """A path that does not exist is named."""
        result = run("digest", str(tmp_path / "nope.db"))
        assert 2 == result.exit_code
        assert f"Error: no such database: {tmp_path / 'nope.db'}" == one_line(result.stderr)


class TestLogDiff:
    """``pwf log diff A B``: the first seq where two logs diverge."""

    def test_identical_logs(self, run: Run, live: Path, copy: Path) -> None:
        """Exit 0 and the number of events."""
        result = run("log", "diff", str(live), str(copy))
        assert (0, f"identical: {_events(live)} events\n") == (result.exit_code, result.stdout)

    def test_a_tampered_body(self, run: Run, live: Path, copy: Path) -> None:
        """Exit 1 and the first seq whose stored bytes differ."""
        edit(copy, "UPDATE events SET body = CAST(body || ' ' AS BLOB) WHERE seq >= 3")
        result = run("log", "diff", str(live), str(copy))
        assert (1, "first divergence at seq 3\n") == (result.exit_code, result.stdout)

    def test_a_prefix_names_the_shorter_side(self, run: Run, live: Path, tmp_path: Path) -> None:
        """When one log ends early, the shorter side and its last seq are named."""
        short = _reimport(run, live, tmp_path / "short.db", "--to", "2")
        result = run("log", "diff", str(live), str(short))
        expected = "first divergence at seq 3\nB ends at seq 2, A continues\n"
        assert (1, expected) == (result.exit_code, result.stdout)
        result = run("log", "diff", str(short), str(live), "--json")
        data = {
            "common": 2,
            "firstDivergence": 3,
            "identical": False,
            "shorter": "A",
            "shorterEndsAt": 2,
        }
        assert (1, canonical.encode(data).decode() + "\n") == (result.exit_code, result.stdout)

    def test_identical_as_json(self, run: Run, live: Path, copy: Path) -> None:
        """``--json`` of identical logs."""
        result = run("log", "diff", str(live), str(copy), "--json")
        data = {
            "common": _events(live),
            "firstDivergence": None,
            "identical": True,
            "shorter": None,
            "shorterEndsAt": None,
        }
        assert (0, canonical.encode(data).decode() + "\n") == (result.exit_code, result.stdout)

    def test_a_missing_file_exits_2(self, run: Run, live: Path, tmp_path: Path) -> None:
        """A path that does not exist is named."""
        result = run("log", "diff", str(tmp_path / "nope.db"), str(live))
        assert 2 == result.exit_code
        assert f"Error: no such database: {tmp_path / 'nope.db'}" == one_line(result.stderr)


class TestServedAgainstDirect:
    """``host_state`` exists only once a database was served: absent, it compares as empty."""

    def test_an_ever_served_database_is_compared_row_by_row(
        self, run: Run, live: Path, copy: Path
    ) -> None:
        from pwf.projections.host import TABLE  # noqa: PLC0415

        edit(live, TABLE[0], "INSERT INTO host_state (id, epoch) VALUES (1, 3)")
        result = run("diff", str(live), str(copy))
        assert 1 == result.exit_code, result.output
        assert "host_state: 1 difference\n  only in A: host_state[1]\n" in result.stdout
        assert "is only in" not in result.output
        back = run("diff", str(copy), str(live), "--json")
        assert 1 == back.exit_code
        assert [[1]] == json.loads(back.stdout)["tables"]["host_state"]["onlyInB"]

    def test_a_released_claim_on_both_sides_is_equal(
        self, run: Run, live: Path, copy: Path
    ) -> None:
        from pwf.projections.host import TABLE  # noqa: PLC0415

        for path in (live, copy):
            edit(path, TABLE[0], "INSERT INTO host_state (id, epoch) VALUES (1, 3)")
        assert 0 == run("diff", str(live), str(copy)).exit_code
