"""Run every pwf benchmark and print a compact plain-text report (``make bench``).

Measures nothing itself: it runs :mod:`bench.bench_canonical` (canonical
encode + SHA-256 per second on one core) and :mod:`bench.bench_append`
(append batches/s against a raw-SQLite floor) and :mod:`bench.bench_command`
(recorded client requests/s through the command path against a floor) and prints their lines under a
header naming the interpreter, SQLite, msgspec and the CPU count.  Each
benchmark repeats its measurement and reports medians with min-max, since
machines are shared and noisy; these are never pass/fail tests.

Usage, from the repository root::

    .venv/bin/python bench/run.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
from bench import bench_append, bench_canonical, bench_command


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; ``--quick`` runs fewer, shorter rounds."""
    parser = argparse.ArgumentParser(description="run the pwf benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    args = parser.parse_args(argv)
    canonical_rounds, seconds = (3, 0.1) if args.quick else (7, 0.25)
    append_rounds, appends = (3, 1000) if args.quick else (7, 2000)

    started = time.perf_counter()
    print(
        f"pwf benchmarks{' (quick)' if args.quick else ''}: Python {platform.python_version()},"
        f" SQLite {sqlite3.sqlite_version}, msgspec {msgspec.__version__},"
        f" {os.cpu_count()} CPUs, {platform.machine()}"
    )
    print()
    for line in bench_canonical.run(canonical_rounds, seconds):
        print(line, flush=True)
    print()
    for line in bench_append.run(append_rounds, appends):
        print(line, flush=True)
    print()
    for line in bench_command.run(append_rounds, appends // 2):
        print(line, flush=True)
    print()
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
