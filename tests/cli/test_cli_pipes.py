"""Pipes and errors: a closed stdout ends quietly, bad --db paths say what they are."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from click.testing import Result
    from tests.cli._cli import one_line

    from pwf.store.sqlite import SqliteStore
else:
    from _cli import one_line


@pytest.fixture
def big(store: SqliteStore, fill: Callable[..., object]) -> str:
    """A log of 3 000 events: more than a pipe holds in every output form."""
    fill(store, [100] * 30)
    return str(store.path)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}


@pytest.mark.parametrize(
    "verb",
    [
        "log show",
        "log export",
        "log show --json",
        "log show --nl",
        "log show --csv",
        "log tail -n 3000",
    ],
)
def test_head_closes_the_pipe_and_pwf_exits_0_quietly(big: str, verb: str) -> None:
    """``pwf log show | head -1``: head's one line, then pwf's exit 0 and an empty stderr."""
    assert shutil.which("head") is not None
    pwf = f"{sys.executable} -m pwf {verb} --db {big}"
    script = f"{pwf} 2>err | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}; cat err"
    done = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        check=True,
        env=_env(),
        cwd=Path(big).parent,
    )
    assert b"0\n" == done.stdout
    assert b"" == done.stderr


class TestBadDatabasePaths:
    """A directory, a foreign SQLite file and a non-SQLite file: one line each, one exit code."""

    @pytest.mark.parametrize("verb", [["log", "show"], ["init"], ["status"], ["log", "import"]])
    def test_a_directory_says_so(
        self, run: Callable[..., Result], tmp_path: Path, verb: list[str]
    ) -> None:
        result = run(*verb, "--db", str(tmp_path), stdin=b"")
        assert 2 == result.exit_code
        assert f"Error: {tmp_path} is a directory, not a database file" == one_line(result.stderr)

    @pytest.mark.parametrize(
        "args",
        [
            ["log", "show", "--db"],
            ["log", "verify", "--db"],
            ["status", "--db"],
            ["query", "runs", "--db"],
            ["digest"],
            ["explain", "run", "r", "--db"],
        ],
    )
    @pytest.mark.parametrize("kind", ["foreign", "garbage"])
    def test_not_a_pwf_database_is_exit_2_everywhere(
        self, run: Callable[..., Result], tmp_path: Path, args: list[str], kind: str
    ) -> None:
        path = tmp_path / "other.db"
        if kind == "foreign":
            with sqlite3.connect(path) as other:
                other.execute("CREATE TABLE notes (x)")
            other.close()
        else:
            path.write_bytes(b"not a database\n" * 300)
        result = run(*args, str(path))
        assert 2 == result.exit_code, result.output
        assert "not a pwf database" in one_line(result.stderr)

    def test_no_errno_text(self, run: Callable[..., Result], tmp_path: Path) -> None:
        run("init", "--db", str(tmp_path / "s.db"))
        out = tmp_path / "nowhere" / "x.jsonl"
        result = run("log", "export", "--db", str(tmp_path / "s.db"), "--out", str(out))
        assert 3 == result.exit_code
        line = one_line(result.stderr)
        assert "[Errno" not in line
        assert f"Error: No such file or directory: {out}" == line


class TestExplainInsideABatch:
    """--at inside a batch names the seq actually reached."""

    def test_missing_at_a_seq_inside_a_batch(
        self, run: Callable[..., Result], tmp_path: Path
    ) -> None:
        db = str(tmp_path / "s.db")
        run("init", "--db", db)
        line = {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": "r-1",
            "clientId": "cli-A",
            "operation": "run.start",
            "idempotencyKey": "k-1",
            "runId": "run-1",
            "payload": {
                "projectPath": "/p",
                "workflowName": "echo",
                "workflowSourceRef": "builtin:echo",
                "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
                "definitionDigest": "d1",
                "definitionSnapshot": {},
                "input": {},
                "originSessionId": "s-1",
            },
        }
        from pwf import canonical  # noqa: PLC0415

        run("request", "--db", db, "--at", "1000", stdin=canonical.encode(line) + b"\n")
        events = [
            json.loads(x) for x in run("log", "show", "--db", db, "--json").stdout.splitlines()
        ]
        assert [1, 1] == [event["batch"] for event in events]
        result = run("explain", "run", "run-1", "--db", db, "--at", "1")
        assert 2 == result.exit_code
        assert (
            "Error: no run run-1 in the log at seq 0 (seq 1 is inside a batch,"
            " so the log is read up to the batch before it)"
        ) == one_line(result.stderr)
        ok = run("explain", "run", "run-1", "--db", db, "--at", "2")
        assert ok.stdout.startswith("run run-1 at seq 2 ")


def _closed_reader_exit(*args: str, cwd: Path) -> tuple[int, bytes]:
    """Run ``pwf ARGS`` with stdout a pipe whose reader has already gone: exit code, stderr."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pwf", *args],
            stdout=writer,
            stderr=subprocess.PIPE,
            check=False,
            env=_env(),
            cwd=cwd,
        )
    finally:
        os.close(writer)
    return done.returncode, done.stderr


class TestVerdictsSurviveAClosedStdout:
    """``pwf diff a b | head``: a verb whose exit code is a verdict keeps it (ADR 0079)."""

    @pytest.fixture
    def pair(self, run: Callable[..., Result], tmp_path: Path, client_line: Any) -> tuple[str, str]:
        a, b = tmp_path / "a.db", tmp_path / "b.db"
        for path, count in ((a, 3), (b, 2)):
            assert 0 == run("init", "--db", str(path)).exit_code
            lines = b"".join(client_line(number) for number in range(1, count + 1))
            assert 0 == run("request", "--db", str(path), "--at", "1000", stdin=lines).exit_code
        return str(a), str(b)

    @pytest.mark.parametrize(
        "verb", [["diff"], ["diff", "--json"], ["log", "diff"], ["log", "diff", "--json"]]
    )
    def test_a_difference_is_exit_1(self, pair: tuple[str, str], verb: list[str]) -> None:
        code, err = _closed_reader_exit(*verb, *pair, cwd=Path(pair[0]).parent)
        assert (1, b"") == (code, err)

    def test_equal_is_exit_0(self, pair: tuple[str, str]) -> None:
        code, err = _closed_reader_exit("diff", pair[0], pair[0], cwd=Path(pair[0]).parent)
        assert (0, b"") == (code, err)

    def test_verify_and_status_keep_their_verdicts(self, pair: tuple[str, str]) -> None:
        db = pair[0]
        with sqlite3.connect(db) as connection:
            connection.execute("UPDATE runs SET status = 'running' WHERE run_id = 'run-1'")
        connection.close()
        for verb in (["verify"], ["verify", "--json"], ["status"], ["status", "--json"]):
            code, err = _closed_reader_exit(*verb, "--db", db, cwd=Path(db).parent)
            assert (1, b"") == (code, err), verb
        code, _ = _closed_reader_exit("log", "verify", "--json", "--db", db, cwd=Path(db).parent)
        assert 0 == code  # the chain is intact: the hand edit touched a projection only
