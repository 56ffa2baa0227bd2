"""``PWF_SEED``: two runs of the demo script give the same log, byte for byte.

Two whole runs of ``scripts/demo.sh`` with the same seed must export the
same log.  That another seed gives another log is proved on the first
run's log instead of a third run (ADR 0058): every id the host minted in
it is the one the seed ``demo`` derives (``docs/scripting.md``: from the
seed and the log's head), so another seed changes each of them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from pwf.cli._seed import seeded_epochs, seeded_id

ROOT = Path(__file__).resolve().parents[2]
MINTED: Final = re.compile(
    rb'"(\w+)":"[^"]*?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"'
)
"""A member whose value ends UUID-shaped (coordinator epochs and request ids carry a prefix)."""
NUL: Final = "\x00"
PYTHON_REPR: Final = re.compile(r"\{'|\bNone\b|\bTrue\b|\bFalse\b")
"""What a Python ``repr`` of a dict, None or a bool looks like in the demo's output."""


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
    reprs = [line for line in done.stdout.decode().splitlines() if PYTHON_REPR.search(line)]
    assert [] == reprs  # the demo prints JSON and sentences, never Python reprs
    # The demo prunes: the backup holds every event's bytes up to the prune (ADR 0103),
    # the live log the ones after it.
    backup = directory / "backups" / "before-prune.sqlite"
    with sqlite3.connect(f"{backup.as_uri()}?mode=ro", uri=True) as connection:
        (last,) = connection.execute("SELECT max(seq) FROM events").fetchone()
    logs = []
    for db, first in ((backup, 1), (directory / "host.db", last + 1)):
        logs.append(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pwf",
                    "log",
                    "export",
                    "--db",
                    str(db),
                    "--from",
                    f"{first}",
                ],
                env=env,
                capture_output=True,
                check=True,
            ).stdout
        )
    return b"".join(logs)


def _shaped(text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _derived(seed: str, last_seq: int) -> set[str]:
    """Every id ``seed`` can mint at a head up to ``last_seq``: epochs and maintenance ids."""
    kinds = ("state.prune", "state.backup")
    return {
        _shaped(text)
        for seq in range(last_seq + 1)
        for text in (
            *(f"{seed}{NUL}epoch{NUL}{seq}{NUL}{count}" for count in range(4)),
            *(f"{seed}{NUL}{kind}{NUL}{seq}" for kind in kinds),
        )
    }


@pytest.mark.slow
def test_two_seeded_demo_runs_give_identical_logs(tmp_path: Path) -> None:
    """Same seed, same script, same directory: the same log, and every minted id is the seed's."""
    assert shutil.which("bash") is not None
    first = _demo(tmp_path / "demo", "demo")
    second = _demo(tmp_path / "demo", "demo")
    assert first == second
    minted = {(name, value.decode()) for name, value in MINTED.findall(first)}
    names = {name for name, _ in minted}
    assert {b"workerEpoch", b"coordinatorEpoch"} <= names, names
    last_seq = first.count(b"\n") + 1_000  # a prune compacted the log: seqs run past its lines
    derived = _derived("demo", last_seq)
    assert {value for _, value in minted} <= derived, "an id the seed did not make"
    assert not {value for _, value in minted} & _derived("another", last_seq)


class _Head:
    """A store as the seeded ids read it: only its head seq."""

    def __init__(self, seq: int) -> None:
        self.seq = seq

    def head(self) -> _Head:
        return self


def test_another_seed_mints_other_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ids follow the seed: another seed, other epochs and ids; no seed, none derived."""
    store = _Head(42)
    minted = {}
    for seed in ("demo", "another"):
        monkeypatch.setenv("PWF_SEED", seed)
        epochs = seeded_epochs(store)  # type: ignore[arg-type]
        assert epochs is not None
        minted[seed] = (epochs(), epochs(), seeded_id(store, "state.prune"))  # type: ignore[arg-type]
    assert minted["demo"] == (
        _shaped(f"demo{NUL}epoch{NUL}42{NUL}0"),
        _shaped(f"demo{NUL}epoch{NUL}42{NUL}1"),
        _shaped(f"demo{NUL}state.prune{NUL}42"),
    )
    assert not set(minted["demo"]) & set(minted["another"])
    monkeypatch.delenv("PWF_SEED")
    assert seeded_epochs(store) is None  # type: ignore[arg-type]
    assert seeded_id(store, "state.prune") is None  # type: ignore[arg-type]
