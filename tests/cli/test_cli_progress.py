"""Progress on a terminal, silence in pipes, and ``log import`` that is all or nothing on disk."""

from __future__ import annotations

import io
import os
import pty
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.cli._progress import activity

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from pathlib import Path

    from tests.cli.test_cli_explain import RUN, START, Pwf

    from pwf.store.sqlite import SqliteStore
else:
    from test_cli_explain import RUN, START, Pwf


@pytest.fixture
def exported(store: SqliteStore, fill: Callable[..., object], tmp_path: Path) -> bytes:
    """The JSONL export of a 600-event log."""
    fill(store, [20] * 30)
    done = subprocess.run(
        [sys.executable, "-m", "pwf", "log", "export", "--db", str(store.path)],
        capture_output=True,
        check=True,
        env=_env(),
    )
    return done.stdout


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}


def _start_import(target: Path, stderr: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pwf", "log", "import", "--db", str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=_env(),
    )


def _wait_for_scratch(target: Path) -> list[Path]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [
            path
            for path in sorted(target.parent.glob(f"{target.name}.tmp-*"))
            if not path.name.endswith(("-wal", "-shm", "-journal"))
        ]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("the import never made its scratch file")


def _drain(leader: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


class TestImport:
    def test_a_killed_import_leaves_no_database(self, exported: bytes, tmp_path: Path) -> None:
        """SIGKILL halfway: nothing under the target's name; the next import sweeps the scratch."""
        target = tmp_path / "copy" / "state.db"
        process = _start_import(target, subprocess.DEVNULL)
        assert process.stdin is not None
        lines = exported.splitlines(keepends=True)
        process.stdin.write(b"".join(lines[:300]))
        process.stdin.flush()
        [scratch] = _wait_for_scratch(target)
        assert not target.exists()
        process.send_signal(signal.SIGKILL)
        process.communicate()
        assert not target.exists()
        assert scratch.exists()
        old = scratch.stat().st_mtime - 120
        for left in target.parent.glob(f"{scratch.name}*"):
            os.utime(left, (old, old))  # left a minute before now: an orphan to sweep
        again = subprocess.run(
            [sys.executable, "-m", "pwf", "log", "import", "--db", str(target)],
            input=exported,
            capture_output=True,
            check=False,
            env=_env(),
        )
        assert (0, b"") == (again.returncode, again.stderr)
        assert target.exists()
        assert [] == sorted(target.parent.glob(f"{target.name}.tmp-*"))
        assert b"imported 600 events" in again.stdout

    def test_a_refused_import_leaves_nothing(self, exported: bytes, tmp_path: Path) -> None:
        target = tmp_path / "new" / "state.db"
        bad = exported.replace(b'"seq":300,', b'"seq":301,', 1)
        done = subprocess.run(
            [sys.executable, "-m", "pwf", "log", "import", "--db", str(target)],
            input=bad,
            capture_output=True,
            check=False,
            env=_env(),
        )
        assert 2 == done.returncode
        assert [] == list(target.parent.iterdir())

    def test_progress_on_a_terminal(self, exported: bytes, tmp_path: Path) -> None:
        """stderr on a pty shows the import's progress while it waits for input, then clears it."""
        leader, follower = pty.openpty()
        process = _start_import(tmp_path / "state.db", follower)
        os.close(follower)
        assert process.stdin is not None
        lines = exported.splitlines(keepends=True)
        process.stdin.write(b"".join(lines[:300]))
        process.stdin.flush()
        _wait_for_scratch(tmp_path / "state.db")
        time.sleep(0.6)
        process.stdin.write(b"".join(lines[300:]))
        out, _ = process.communicate(timeout=60)
        shown = _drain(leader)
        os.close(leader)
        assert 0 == process.returncode
        assert b"importing" in shown
        assert shown.endswith(b"\r\x1b[K")
        assert b"imported 600 events" in out

    def test_no_progress_in_a_pipe(self, exported: bytes, tmp_path: Path) -> None:
        process = _start_import(tmp_path / "state.db", subprocess.PIPE)
        _, err = process.communicate(exported, timeout=60)
        assert (0, b"") == (process.returncode, err)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_activity_draws_on_a_terminal_and_clears(monkeypatch: pytest.MonkeyPatch) -> None:
    """The line shows the label, the fraction and the seconds; the end clears it."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with activity("folding") as tell:
        tell(1, 4)
        time.sleep(0.45)
    assert "\rfolding: 25% (1/4), 0s\x1b[K" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\x1b[K")


def test_no_activity_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    with activity("folding") as tell:
        tell(1, 4)
        time.sleep(0.3)
    assert "" == quiet.getvalue()


@pytest.mark.parametrize(
    ("module", "args", "label"),
    [
        ("pwf.cli.diff", ["diff", "{db}", "{db}"], "comparing"),
        ("pwf.cli.diff", ["digest", "{db}"], "digesting"),
        ("pwf.cli.state", ["state", "backup", "{dir}/b.db", "--db", "{db}"], "backing up"),
        (
            "pwf.cli.state",
            [
                *("state", "prune", "--before", "2020-01-01", "--apply"),
                *("--backup", "{dir}/p.db", "--db", "{db}"),
            ],
            "pruning",
        ),
        ("pwf.cli.explain", ["explain", "run", RUN, "--at", "2", "--db", "{db}"], "folding"),
        ("pwf.cli.log", ["log", "verify", "--db", "{db}"], "verifying the chain"),
        (
            "pwf.cli._import",
            ["log", "import", "--db", "{dir}/i.db", "{dir}/log.jsonl"],
            "importing",
        ),
    ],
)
def test_long_verbs_show_progress(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module: str, args: list[str], label: str
) -> None:
    """Each verb that can take seconds runs inside an activity named after what it does."""
    driver = Pwf(tmp_path / "state.db")
    driver.request("run.start", START, 1000, runId=RUN)
    (tmp_path / "log.jsonl").write_bytes(driver("log", "export").stdout_bytes)
    seen: list[str] = []

    def spy(text: str) -> AbstractContextManager[Callable[[int, int], None]]:
        seen.append(text)
        return activity(text)

    monkeypatch.setattr(f"{module}.activity", spy)
    filled = [arg.format(db=driver.db, dir=tmp_path) for arg in args]
    result = CliRunner().invoke(cli, filled, catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    assert [text for text in seen if text.startswith(label)]
