"""``PWF_SEED``: two runs of the demo script give the same log, byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _demo(directory: Path, seed: str | None) -> bytes:
    """Run scripts/demo.sh (two traffic runs) into ``directory``; its log as JSONL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env |= {"PWF_DEMO_DIR": str(directory), "PWF_DEMO_RUNS": "2"}
    if seed is not None:
        env["PWF_SEED"] = seed
    done = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=ROOT, env=env, capture_output=True, check=False
    )
    assert 0 == done.returncode, done.stdout.decode()[-3000:] + done.stderr.decode()[-2000:]
    return subprocess.run(
        [sys.executable, "-m", "pwf", "log", "export", "--db", str(directory / "host.db")],
        env=env,
        capture_output=True,
        check=True,
    ).stdout


@pytest.mark.slow
def test_two_seeded_demo_runs_give_identical_logs(tmp_path: Path) -> None:
    """Same seed, same script, same directory: the same log (worker epochs included)."""
    assert shutil.which("bash") is not None
    first = _demo(tmp_path / "demo", "demo")
    second = _demo(tmp_path / "demo", "demo")
    assert first == second
    assert b"workerEpoch" in first
    other = _demo(tmp_path / "demo", "another")
    assert first != other, "the seed must reach the minted ids"
