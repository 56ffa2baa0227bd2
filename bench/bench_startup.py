"""Whole-process start-up of the hot verbs against ``python -c "import sqlite3, json"``.

Each round runs, one after the other and each round starting one case
later, the floor (the interpreter importing sqlite3 and json),
``pwf --version``, a one-line ``pwf request`` (``run.status`` of a run that
does not exist, so every round does the same work without growing the log),
``pwf query runs`` (a reading verb) and, when the installed pwf has
``call`` and ``serve``, a one-line ``pwf call`` to a ``pwf serve`` of
another database that the benchmark starts and stops (``pwf request`` is
refused while a host serves its database).  A second floor, the
interpreter importing the libraries every verb stands on (sqlite3, json,
hashlib, pathlib, click and msgspec), shows how much of a start is pwf's
own.  The ratio of each to the floor is taken within the round and the
median over rounds is reported, so a busy neighbour slows numerator and
floor alike.

Start-up is measured on a regular (non-editable) install: an editable one
has no compiled bytecode when ``PYTHONDONTWRITEBYTECODE`` is set, which adds
tens of milliseconds to every start.  ``make bench`` runs this with the
interpreter of such an install (``.venv-bench``); run with another one, the
report says which kind of install it measured.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

__all__ = ["main", "run"]

OUT: Final = Path(__file__).resolve().parent / "out"
_STATUS: Final = (
    b'{"clientId":"bench","idempotencyKey":"k","operation":"run.status","payload":{},'
    b'"requestId":"r","runId":"run-none","schema":"pi-workflows.client.v1","type":"request"}\n'
)


_LIBRARIES: Final = "import sqlite3, json, hashlib, pathlib, click, msgspec"
"""What every pwf verb imports before any of pwf's own code: a second floor."""


def _install_kind(python: str) -> str:
    """``regular`` when pwf is installed with compiled bytecode, else ``editable``."""
    probe = "import pathlib, pwf; print(pathlib.Path(pwf.__file__).parent)"
    where = Path(
        subprocess.run([python, "-c", probe], capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )
    compiled = (where / "__pycache__").is_dir()
    return "regular" if compiled and "site-packages" in where.parts else "editable"


def _timed(argv: list[str], stdin: bytes, cwd: Path) -> tuple[float, float]:
    """Wall seconds from spawn to exit of one process, and its CPU seconds (user + system).

    The CPU time is what the process itself spent, so it moves less than the
    wall time when neighbours keep the processors busy.  Fails on a non-zero exit.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    finished = subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd, check=False)
    elapsed = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"{argv} exited {finished.returncode}: {finished.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _served(pwf: str, db: Path, environment: dict[str, str]) -> subprocess.Popen[bytes] | None:
    """A ``pwf serve`` of ``db`` that answers ``pwf call``, when this pwf has both verbs."""
    helped = subprocess.run([pwf, "--help"], capture_output=True, check=True).stdout
    if b"\n  call " not in helped or b"\n  serve " not in helped:
        return None
    subprocess.run([pwf, "init", "--db", str(db)], capture_output=True, check=True, env=environment)
    server = subprocess.Popen(
        [pwf, "serve", "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        probe = [pwf, "call", "--db", str(db), "--retry-for", "0"]
        if subprocess.run(probe, input=_STATUS, capture_output=True, check=False).returncode == 0:
            return server
        time.sleep(0.2)
    server.terminate()
    server.wait()
    raise RuntimeError("pwf serve did not answer pwf call within 30 s")


def _cases(
    python: str, pwf: str, db: Path, served: Path | None
) -> dict[str, tuple[list[str], bytes]]:
    cases = {
        "floor": ([python, "-c", "import sqlite3, json"], b""),
        "libraries": ([python, "-c", _LIBRARIES], b""),
        "pwf --version": ([pwf, "--version"], b""),
        "pwf request": ([pwf, "request", "--db", str(db)], _STATUS),
        "pwf query runs": ([pwf, "query", "runs", "--db", str(db)], b""),
    }
    if served is not None:
        cases["pwf call"] = ([pwf, "call", "--db", str(served)], _STATUS)
    return cases


def run(rounds: int, python: str | None = None) -> list[str]:
    """Report lines: median milliseconds of each case and its median ratio to the floor."""
    python = python or sys.executable
    pwf = str(Path(python).with_name("pwf"))
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=OUT))
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}
    server = None
    try:
        db = workdir / "state.db"
        subprocess.run(
            [pwf, "init", "--db", str(db)], capture_output=True, check=True, env=environment
        )
        server = _served(pwf, workdir / "served.db", environment)
        cases = _cases(python, pwf, db, None if server is None else workdir / "served.db")
        for argv, stdin in cases.values():  # warm the page cache once
            _timed(argv, stdin, workdir)
        times: dict[str, list[float]] = {name: [] for name in cases}
        ratios: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        order = list(cases)
        for round_no in range(rounds):
            turn = round_no % len(order)
            sample = {name: _timed(*cases[name], workdir) for name in order[turn:] + order[:turn]}
            for name, (seconds, cpu) in sample.items():
                times[name].append(seconds)
                ratios[name].append(seconds / sample["floor"][0])
                cpus[name].append(cpu / sample["floor"][1])
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    lines = [
        (
            f"start-up, whole process ({_install_kind(python)} install, {rounds} rounds;"
            " wall time, and CPU time in brackets):"
        )
    ]
    for name in cases:
        ms = statistics.median(times[name]) * 1000
        shown = (
            ""
            if name == "floor"
            else f"  {statistics.median(ratios[name]):.2f}x floor"
            f"  [CPU {statistics.median(cpus[name]):.2f}x]"
        )
        label = {
            "floor": 'python -c "import sqlite3, json"',
            "libraries": "libraries (below)",
        }.get(name, name)
        lines.append(f"  {label:34} {ms:6.1f} ms{shown}")
    lines.append(f'  libraries: python -c "{_LIBRARIES}"')
    return lines


def main() -> int:
    """Run a short measurement from the command line."""
    for line in run(15):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
