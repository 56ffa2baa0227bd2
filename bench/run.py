"""Run every pwf benchmark and print a compact plain-text report (``make bench``).

Measures nothing itself: it runs :mod:`bench.bench_canonical` (canonical
encode + SHA-256 per second on one core) and :mod:`bench.bench_append`
(append batches/s against a raw-SQLite floor) and :mod:`bench.bench_tree` (the
Merkle tree's CPU per request and bytes per event beside the same run without it, the
upgrade of a log without it, proofs at 10**3 and 10**6 leaves) and :mod:`bench.bench_command`
(recorded client requests/s through the command path against a floor) and
:mod:`bench.bench_durable` (durable ``run.start`` requests/s in-process and
through ``pwf request`` against a raw floor and the ``eventsourcing``
library, bytes on disk per event, WAL bytes per request) and
:mod:`bench.bench_postgres` (durable recorded requests/s on a throwaway
PostgreSQL with 1 and 3 hosts, against a raw psycopg floor and the
``eventsourcing`` library) and :mod:`bench.bench_startup` (whole-process
start-up of the hot verbs against
``python -c "import sqlite3, json"``) and :mod:`bench.bench_serve` (durable
requests/s and p50/p99 latency through a served host at 1, 4, 16 and 64 clients
beside ``pwf request`` and a raw-SQLite floor) and :mod:`bench.bench_flood` (a polite
client's p50/p99 beside eight flooding connections against its own alone) and
:mod:`bench.bench_metrics` (the
served host's processor time per request with and without ``--metrics``, as a
ratio in the same run) and :mod:`bench.bench_log` (rebuild,
replay, verify, check, diff and digest of a generated log of
``--log-events`` events, 1 000 000 by default, against raw-SQLite read
floors) and :mod:`bench.bench_maintenance` (the longest wait of a writer
through a backup and a prune of the 100 000-event log) and
:mod:`bench.bench_shared_maintenance` (the same for a backup of that log
shared in PostgreSQL, against the writer's longest wait without it) and prints their
lines under a header naming the interpreter, SQLite, msgspec and the CPU count,
then one block, "issue 31 targets", listing each target of issue 31 with
the measured value, its floor from the same run, their ratio and whether it
is met (:mod:`bench.targets`).  Each
benchmark repeats its measurement and reports medians with min-max, since
machines are shared and noisy; these are never pass/fail tests.  The first
run at a log size generates that log through the command path (several
minutes for 1 000 000 events) and caches it in ``bench/out/``; later runs
reuse it.  One round of the log section at 1 000 000 events then takes a few
minutes (the rebuild, replay and check each read the whole log); ``--quick``
keeps the whole run to a few minutes.

``make bench`` runs it with ``.venv-bench``, a regular (non-editable)
install of the working tree with the ``bench`` and ``metrics`` extras, so start-up is
measured as users have it.  Usage, from the repository root::

    .venv-bench/bin/python bench/run.py [--quick] [--log-events N]
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
from bench import (
    bench_append,
    bench_canonical,
    bench_command,
    bench_durable,
    bench_flood,
    bench_log,
    bench_maintenance,
    bench_metrics,
    bench_migrate,
    bench_postgres,
    bench_serve,
    bench_shared_maintenance,
    bench_startup,
    bench_tree,
)
from bench.targets import Target, summary


def main(argv: list[str] | None = None) -> int:  # noqa: C901, PLR0912 - one section per benchmark
    """Run the benchmarks; ``--quick`` runs fewer, shorter rounds."""
    parser = argparse.ArgumentParser(description="run the pwf benchmarks")
    parser.add_argument(
        "--quick", action="store_true", help="fewer, shorter rounds; a 100 000-event log"
    )
    parser.add_argument(
        "--log-events",
        type=int,
        default=None,
        help="size of the generated log (default 1 000 000, 100 000 with --quick)",
    )
    args = parser.parse_args(argv)
    log_events = args.log_events or (100_000 if args.quick else bench_log.EVENTS)
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
    tree = (3, 500, 100, 99) if args.quick else (5, 1000, 1000, 99)
    for line in bench_tree.run(*tree):
        print(line, flush=True)
    print()
    targets: list[Target] = []
    durable = (3, 200) if args.quick else (5, 500)
    for line in bench_durable.run(*durable, targets=targets):
        print(line, flush=True)
    print()
    for line in bench_startup.run(11 if args.quick else 21):
        print(line, flush=True)
    print()
    for line in bench_serve.run(*((2, 1.5) if args.quick else (3, 3.0)), targets=targets):
        print(line, flush=True)
    print()
    for line in bench_flood.run(*((2, 5.0) if args.quick else (3, 10.0))):
        print(line, flush=True)
    print()
    for line in bench_metrics.run(*((3, 3000) if args.quick else (5, 6000))):
        print(line, flush=True)
    print()
    for line in bench_log.run(log_events, targets=targets):
        print(line, flush=True)
    print()
    for line in bench_maintenance.run(bench_maintenance.EVENTS):
        print(line, flush=True)
    print()
    for line in bench_migrate.run(log_events, targets=targets):
        print(line, flush=True)
    print()
    for line in bench_shared_maintenance.run(bench_shared_maintenance.EVENTS):
        print(line, flush=True)
    print()
    for line in bench_postgres.run(3, 150 if args.quick else 300):
        print(line, flush=True)
    print()
    print("\n".join(summary(targets)))
    print()
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
