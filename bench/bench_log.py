"""Whole-log throughput: rebuild, replay, verify, check, diff and digest of a generated log.

The log is a realistic mix from the domain: :class:`Traffic` from
``scripts/demo_traffic.py`` drives runs through the real command path
(start, claim, park on an agent step, submit, sometimes reject, finish,
retried status requests), about 31 events per run.  That path writes only a
few thousand events per second, so the log is generated once per size and
seed into ``bench/out/log-{events}-{seed}.db`` (git-ignored) and reused
while its head reaches the size asked for; the report says which it was.
A fresh 1 000 000-event log takes several minutes to generate; later runs
reuse it.

Every measurement runs in its own fresh Python process, so its peak memory
(``VmHWM`` of that child) belongs to that task alone; the processes a task
forks to share its work (split folds, verify's range walkers) are reported
apart, as the largest one's high-water mark:

* **floor, read+parse**: plain :mod:`sqlite3`, ``SELECT body FROM events
  ORDER BY seq`` and ``msgspec.json.decode`` of each body;
* **floor, read+hash**: the same read and ``hashlib.sha256`` of each body;
* **floor, write rows**: ``executemany`` of the final projection rows (those
  the log's live projections hold, rowids included) into fresh tables as a
  fold creates them, timing the inserts only: the least any fold of this log
  must write, reported as events of the log per second; with read+parse it
  gives the raw-SQLite cost of reading the log and writing its result once;
* **rebuild**: ``pwf.fold.rebuild.rebuild`` on a copy of the log (the copy is made
  before the clock starts); **rebuild-one**, the same with its fold kept in one
  process (shown per CPU-second only: what the forked process's share costs);
* **replay**: ``pwf.fold.replay.replay`` of the whole log into a new file;
* **verify**: ``SqliteStore.verify`` (the chain, from the stored bytes, every event
  parsed and its indexed columns checked);
* **chain**: ``SqliteStore.verify(deep=False)`` (``pwf log verify --chain-only``: the
  chain from the bytes alone);
* **check**: ``pwf.verify.check`` (the chain, then a rebuild compared with
  the live projections);
* **diff** / **log diff** / **digest**: ``pwf.diff.diff_databases`` and
  ``diff_logs`` of the log against the rebuilt copy, ``digest_database`` of
  the log (seconds).

Floors and pwf run on the same file in the same round, warm in the page
cache alike, with the garbage collector on as in the CLI.  Rates are
events/s medians [min-max] over the rounds, each with its ratio to the floor
of the same run; the issue's targets are printed beside them, never as a
pass/fail test.  Each task's timed sections are also charged in processor
time (user and system, of the task's process and of the processes it forked
and waited for), so rebuild, replay and deep verify are also given in
events per CPU-second beside the read+parse and read+hash floors' (issue
31: a split fold or walk spends more processor time than wall time).
A round at 1 000 000 events takes minutes, so from 500 000 events one
round is the default; ``bench/run.py --quick`` uses
100 000 events (three rounds, about a minute once the log is cached).

Usage, from the repository root::

    .venv/bin/python bench/bench_log.py [--events N] [--seed S] [--rounds R]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from unittest import mock

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Rates, fmt_rate
from bench.targets import Target, summary

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["EVENTS", "OUT", "cached_log", "main", "run"]

EVENTS: Final = 1_000_000
"""Default log size."""
EVENTS_PER_RUN: Final = 31
"""About how many events one generated run writes."""
LONG: Final = 500_000
"""From this size on, one round is the default."""

REBUILD_RATE: Final = 100_000
"""Wanted rebuild events/s."""
REBUILD_RATIO: Final = 0.5
"""Wanted rebuild rate over the read-and-parse floor."""
VERIFY_RATIO: Final = 0.8
"""Wanted verify rate over the read-and-hash floor."""
REBUILD_CPU_RATIO: Final = 0.2
"""Issue 31: wanted rebuild events per CPU-second over the read-and-parse floor's."""
PEAK_MB: Final = 150
"""Wanted peak memory of any pwf task, MB."""

ROOT: Final = Path(__file__).resolve().parents[1]
OUT: Final = ROOT / "bench" / "out"
TRAFFIC: Final = ROOT / "scripts" / "demo_traffic.py"
_BODIES: Final = "SELECT body FROM events ORDER BY seq"


# --------------------------------------------------------------------------- the log


def _head_seq(path: Path) -> int:
    """The head seq of a pwf database, or -1 when it cannot be read."""
    try:
        connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT seq FROM _pwf_head").fetchone()
        finally:
            connection.close()
    except sqlite3.Error:
        return -1
    return int(row[0]) if row else 0


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _traffic_class() -> Any:  # noqa: ANN401 - a script's class, loaded by path
    spec = importlib.util.spec_from_file_location("demo_traffic", TRAFFIC)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Traffic


def generate(path: Path, events: int, seed: int) -> int:
    """Write runs through the command path until the log holds ``events``; return its head seq.

    The file is built under a temporary name and renamed into place when whole.
    """
    from pwf.readmodel import ReadModel  # noqa: PLC0415 - only the generator needs pwf here
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    partial = path.with_name(f"{path.name}.partial")
    _remove(partial)
    model = ReadModel()
    with SqliteStore(partial, create=True, hooks=[model]) as store, store.transaction() as tx:
        model.install(tx.connection)
    traffic = _traffic_class()(str(partial), seed)
    store = traffic.store
    # The bytes do not depend on durability; a half-written file is thrown away.
    store.connection.execute("PRAGMA synchronous = OFF")
    runs = math.ceil(events / EVENTS_PER_RUN)
    index = 0
    while index < runs or store.head().seq < events:
        index += 1
        traffic.run(index)
    head = int(store.head().seq)
    store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    _remove(path)
    partial.replace(path)
    _remove(partial)
    return head


def cached_log(events: int, seed: int) -> tuple[Path, int, str]:
    """The log for ``events`` and ``seed``: its path, head seq and how it was obtained."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"log-{events}-{seed}.db"
    head = _head_seq(path) if path.exists() else -1
    if head >= events:
        return path, head, "cached"
    started = time.perf_counter()
    head = generate(path, events, seed)
    elapsed = time.perf_counter() - started
    return path, head, f"generated in {elapsed:.0f} s ({fmt_rate(head / elapsed)} events/s)"


# --------------------------------------------------------------------------- child tasks


def _floor(path: Path, per_body: Callable[[bytes], object]) -> int:
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    count = 0
    try:
        for (body,) in connection.execute(_BODIES):
            per_body(body)
            count += 1
    finally:
        connection.close()
    return count


class _Timer:
    """The timed sections of this process's task: wall seconds each, processor seconds summed.

    Processor time is user plus system time of this process and of the
    children it waited for (the processes a split fold or walk forks), so a
    task that shares its work is charged for all of it.
    """

    def __init__(self) -> None:
        self.cpu = 0.0
        self._cpu_started = 0.0

    @staticmethod
    def _cpu() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def start(self) -> float:
        """Open a timed section; the wall clock's reading."""
        self._cpu_started = self._cpu()
        return time.perf_counter()

    def stop(self, started: float) -> float:
        """Close the section opened at ``started``; its wall seconds (processor time is kept)."""
        elapsed = time.perf_counter() - started
        self.cpu += self._cpu() - self._cpu_started
        return elapsed


TIMER: Final = _Timer()
"""The timer of the one task a child process runs."""


def _task_floor_parse(db: Path, _work: Path) -> tuple[float, int, str]:
    import msgspec  # noqa: PLC0415 - imported in the child only

    decode = msgspec.json.decode
    started = TIMER.start()
    count = _floor(db, decode)
    return TIMER.stop(started), count, ""


def _task_floor_hash(db: Path, _work: Path) -> tuple[float, int, str]:
    sha256 = hashlib.sha256
    started = TIMER.start()
    count = _floor(db, lambda body: sha256(body).digest())
    return TIMER.stop(started), count, ""


_WRITE_BATCH: Final = 5_000
"""Rows read (untimed) and then inserted (timed) per step of the write floor."""


def _task_floor_write(db: Path, work: Path) -> tuple[float, int, str]:
    """Insert the log's final projection rows into fresh tables: the least a fold must write.

    The rows are the ones the live projections hold, read table by table in
    rowid order (untimed) and inserted with ``executemany``, rowids included,
    into a new file with every projection's tables as a fold creates them:
    no journal, no fsync, secondary indexes, CHECK constraints and triggers
    left out.
    Only the inserts are timed; the result is events of the log per second of
    inserting, so it compares with the rebuild's rate directly.
    """
    from pwf._sqlite import projection_tables  # noqa: PLC0415
    from pwf.fold.bulk import BulkFold  # noqa: PLC0415
    from pwf.readmodel import CHECKPOINT_TABLE  # noqa: PLC0415

    out = work / "written.db"
    _remove(out)
    source = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(out, isolation_level=None)
    elapsed, rows = 0.0, 0
    try:
        target.execute("PRAGMA journal_mode = OFF")
        target.execute("PRAGMA synchronous = OFF")
        target.execute(CHECKPOINT_TABLE)
        BulkFold().install(target)
        # The final rows already hold what the triggers keep (ADR 0094's totals row among them).
        triggers = target.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'")
        for (trigger,) in triggers.fetchall():
            target.execute(f'DROP TRIGGER "{trigger}"')
        target.execute("BEGIN")
        for table in projection_tables(source):
            columns = [row[1] for row in source.execute(f"PRAGMA table_info({table})")]
            marks = ", ".join("?" * (len(columns) + 1))
            insert = f"INSERT INTO {table} (rowid, {', '.join(columns)}) VALUES ({marks})"  # noqa: S608 - names from the schema
            cursor = source.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid")  # noqa: S608 - same
            while batch := cursor.fetchmany(_WRITE_BATCH):
                started = TIMER.start()
                target.executemany(insert, batch)
                elapsed += TIMER.stop(started)
                rows += len(batch)
        started = TIMER.start()
        target.execute("COMMIT")
        elapsed += TIMER.stop(started)
    finally:
        source.close()
        target.close()
        _remove(out)
    return elapsed, _head_seq(db), f"{rows} rows"


def _open(db: Path, *, read_only: bool) -> Any:  # noqa: ANN401 - a SqliteStore
    from pwf.readmodel import ReadModel  # noqa: PLC0415 - imported in the child only
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    return SqliteStore(db, hooks=[ReadModel()], read_only=read_only)


def _task_rebuild(db: Path, work: Path) -> tuple[float, int, str]:
    from pwf.fold.rebuild import rebuild  # noqa: PLC0415 - imported in the child only

    copy = work / "rebuilt.db"
    _remove(copy)
    shutil.copy(db, copy)
    with _open(copy, read_only=False) as store:
        started = TIMER.start()
        report = rebuild(store)
        elapsed = TIMER.stop(started)
    return elapsed, report.events, f"{report.tables} tables"


def _task_rebuild_one(db: Path, work: Path) -> tuple[float, int, str]:
    """The rebuild with its fold in one process: its cost without the forked process's share.

    ``pwf rebuild`` splits a long fold on a machine with two processors
    (ADR 0013): less wall time for more processor time, since the forked
    process reads and decodes the log a second time.
    """
    from pwf.fold import parallel  # noqa: PLC0415 - imported in the child only

    with mock.patch.object(parallel, "SPLIT_FROM", 2**62):
        return _task_rebuild(db, work)


def _task_replay(db: Path, work: Path) -> tuple[float, int, str]:
    from pwf.fold.replay import replay  # noqa: PLC0415 - imported in the child only

    out = work / "replayed.db"
    _remove(out)
    with _open(db, read_only=True) as store:
        started = TIMER.start()
        report = replay(store, out)
        elapsed = TIMER.stop(started)
    _remove(out)
    return elapsed, report.head.seq, f"{report.tables} tables"


def _task_verify(db: Path, _work: Path) -> tuple[float, int, str]:
    with _open(db, read_only=True) as store:
        started = TIMER.start()
        report = store.verify()
        elapsed = TIMER.stop(started)
    return elapsed, report.events, "ok" if report.ok else f"BAD at {report.first_bad_seq}"


def _task_chain(db: Path, _work: Path) -> tuple[float, int, str]:
    with _open(db, read_only=True) as store:
        started = TIMER.start()
        report = store.verify(deep=False)
        elapsed = TIMER.stop(started)
    return elapsed, report.events, "ok" if report.ok else f"BAD at {report.first_bad_seq}"


def _task_check(db: Path, _work: Path) -> tuple[float, int, str]:
    from pwf import verify  # noqa: PLC0415 - imported in the child only

    with _open(db, read_only=True) as store:
        started = TIMER.start()
        report = verify.check(store)
        elapsed = TIMER.stop(started)
    return elapsed, report.chain.events, "ok" if report.ok else "DIFFERS"


def _task_diff(db: Path, work: Path) -> tuple[float, int, str]:
    from pwf.diff import diff_databases  # noqa: PLC0415 - imported in the child only

    started = TIMER.start()
    found = diff_databases(db, work / "rebuilt.db")
    elapsed = TIMER.stop(started)
    return elapsed, _head_seq(db), "equal" if found.equal else f"{found.count} differences"


def _task_log_diff(db: Path, work: Path) -> tuple[float, int, str]:
    from pwf.diff import diff_logs  # noqa: PLC0415 - imported in the child only

    started = TIMER.start()
    found = diff_logs(db, work / "rebuilt.db")
    elapsed = TIMER.stop(started)
    return elapsed, found.common, "identical" if found.identical else "DIFFER"


def _task_digest(db: Path, _work: Path) -> tuple[float, int, str]:
    from pwf.diff import digest_database  # noqa: PLC0415 - imported in the child only

    started = TIMER.start()
    digest = digest_database(db)
    elapsed = TIMER.stop(started)
    return elapsed, _head_seq(db), f"{len(digest.tables)} tables"


def _task_baseline(_db: Path, _work: Path) -> tuple[float, int, str]:
    import pwf.diff  # noqa: PLC0415 - the imports every pwf task pays for
    import pwf.fold.rebuild  # noqa: PLC0415
    import pwf.fold.replay  # noqa: PLC0415, F401

    return 0.0, 0, ""


TASKS: Final[dict[str, Callable[[Path, Path], tuple[float, int, str]]]] = {
    "floor-parse": _task_floor_parse,
    "floor-hash": _task_floor_hash,
    "floor-write": _task_floor_write,
    "baseline": _task_baseline,
    "rebuild": _task_rebuild,
    "rebuild-one": _task_rebuild_one,
    "replay": _task_replay,
    "verify": _task_verify,
    "chain": _task_chain,
    "check": _task_check,
    "diff": _task_diff,
    "log-diff": _task_log_diff,
    "digest": _task_digest,
}


def peak_kib() -> int:
    """This process's peak resident set size, KiB.

    Linux's ``VmHWM`` belongs to the process image since its ``exec``; on
    Linux ``ru_maxrss`` also keeps the parent's high-water mark from before
    the ``fork``, so it serves only where ``/proc`` is missing.
    """
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1])


def _child(task: str, db: Path, work: Path) -> None:
    """Run one task in this process and print its result as one JSON line."""
    seconds, events, note = TASKS[task](db, work)
    peak = peak_kib()
    # A forked walker or folder counts too; Linux reports the largest finished child's
    # high-water mark, which includes the pages it shared with this process at the fork.
    forked = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = {"seconds": seconds, "cpu": TIMER.cpu, "events": events, "note": note}
    result["peak_kib"] = peak
    print(json.dumps(result | {"forked_kib": forked}))


def measure(task: str, db: Path, work: Path) -> dict[str, Any]:
    """Run ``task`` in a fresh interpreter; return its seconds, events, note and peak KiB."""
    command = [sys.executable, str(Path(__file__).resolve()), "--task", task]
    command += ["--db", str(db), "--work", str(work)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{task} failed:\n{done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --------------------------------------------------------------------------- the report


RATES: Final = ("rebuild", "replay", "verify", "chain", "check")
TIMES: Final = ("diff", "log-diff", "digest")
ORDER: Final = ("floor-parse", "floor-hash", "floor-write", *RATES, "rebuild-one", *TIMES)


def _mb(kib: float) -> str:
    return f"{kib / 1024:.0f} MB"


def run(
    events: int = EVENTS,
    rounds: int | None = None,
    seed: int = 7,
    targets: list[Target] | None = None,
) -> list[str]:
    """Measure every task over ``rounds`` rounds on a log of ``events``; report lines.

    The issue 31 figures this run measures (rebuild, replay and deep verify
    per CPU-second beside their floors) are appended to ``targets``.
    """
    rounds = rounds if rounds is not None else (1 if events >= LONG else 3)
    db, head, obtained = cached_log(events, seed)
    rates = {task: Rates(()) for task in ORDER}
    per_cpu = {task: Rates(()) for task in ORDER}
    seconds: dict[str, list[float]] = {task: [] for task in ORDER}
    peaks: dict[str, list[int]] = {task: [] for task in (*ORDER, "baseline")}
    forked: dict[str, list[int]] = {task: [] for task in ORDER}
    notes: dict[str, str] = {}
    work = Path(tempfile.mkdtemp(prefix="log-", dir=OUT))
    try:
        peaks["baseline"].append(measure("baseline", db, work)["peak_kib"])
        for _ in range(rounds):
            for task in ORDER:
                result = measure(task, db, work)
                seconds[task].append(result["seconds"])
                peaks[task].append(result["peak_kib"])
                forked[task].append(result["forked_kib"])
                notes[task] = result["note"]
                if result["events"] != head:
                    notes[task] = f"{result['note']}; {result['events']} events, not {head}"
                rates[task] = rates[task].add(head / result["seconds"])
                per_cpu[task] = per_cpu[task].add(head / result["cpu"])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    parse, hashing = rates["floor-parse"].median, rates["floor-hash"].median
    written = rates["floor-write"].median
    both = 1 / (1 / parse + 1 / written)
    size_mb = db.stat().st_size / 1e6

    def ratio(task: str, floor: float) -> float:
        return rates[task].median / floor

    def peak(task: str) -> str:
        return _mb(max(peaks[task]))

    def verdict(ok: bool) -> str:
        return "ok" if ok else "BELOW"

    counted = f"{rounds} round{'s' if rounds > 1 else ''}"
    if rounds == 1 and events >= LONG:
        counted += " (a round at this size is long: one by default)"
    worst = max(max(peaks[task]) for task in (*RATES, *TIMES)) / 1024
    worst_forked = max(max(forked[task]) for task in (*RATES, *TIMES)) / 1024
    lines = [
        (
            f"whole log: {fmt_rate(head)} events ({size_mb:.0f} MB file, seed {seed},"
            f" {obtained}); events/s median [min-max] of {counted}, each task in a fresh process"
        ),
        f"  floor read+parse  {rates['floor-parse'].summary()}  peak {peak('floor-parse')}",
        f"  floor read+hash   {rates['floor-hash'].summary()}  peak {peak('floor-hash')}",
        (
            f"  floor write rows  {rates['floor-write'].summary()}  peak {peak('floor-write')};"
            f" {notes['floor-write']} inserted into fresh tables"
        ),
        (
            f"  floor read+parse, then write rows, one process: {fmt_rate(both)}/s"
            f" (the two medians combined)"
        ),
        (
            f"  rebuild  {rates['rebuild'].summary()}  {ratio('rebuild', parse):.2f} x parse floor,"
            f" {ratio('rebuild', both):.2f} x parse+write;"
            f" peak {peak('rebuild')}; target >= {fmt_rate(REBUILD_RATE)}/s"
            f" {verdict(rates['rebuild'].median >= REBUILD_RATE)}, >= {REBUILD_RATIO} x"
            f" {verdict(ratio('rebuild', parse) >= REBUILD_RATIO)}; {notes['rebuild']}"
        ),
        (
            f"  replay   {rates['replay'].summary()}  {ratio('replay', parse):.2f} x parse floor;"
            f" peak {peak('replay')}; {notes['replay']}"
        ),
        (
            f"  verify   {rates['verify'].summary()}  {ratio('verify', hashing):.2f} x hash floor;"
            f" peak {peak('verify')}; target >= {VERIFY_RATIO} x"
            f" {verdict(ratio('verify', hashing) >= VERIFY_RATIO)}; {notes['verify']}"
        ),
        (
            f"  chain    {rates['chain'].summary()}  {ratio('chain', hashing):.2f} x hash floor;"
            f" peak {peak('chain')}; target >= {VERIFY_RATIO} x"
            f" {verdict(ratio('chain', hashing) >= VERIFY_RATIO)}; {notes['chain']}"
        ),
        (
            f"  check    {rates['check'].summary()}  {ratio('check', parse):.2f} x parse floor;"
            f" peak {peak('check')}; {notes['check']}"
        ),
    ]
    lines += [
        f"  {task:<8} {statistics.median(seconds[task]):.2f} s  [{min(seconds[task]):.2f}-"
        f"{max(seconds[task]):.2f}]; peak {peak(task)}; {notes[task]}"
        for task in TIMES
    ]
    lines += _per_cpu(per_cpu, targets)
    lines += [
        (
            f"  peak memory: worst pwf task {worst:.0f} MB (interpreter + pwf imports alone"
            f" {peak('baseline')}); target < {PEAK_MB} MB {verdict(worst < PEAK_MB)};"
            f" worst forked process {worst_forked:.0f} MB"
        ),
    ]
    return lines


def _per_cpu(per_cpu: dict[str, Rates], targets: list[Target] | None) -> list[str]:
    """Events per CPU-second of rebuild, replay and deep verify beside their floors'."""
    parse, hashing = per_cpu["floor-parse"].median, per_cpu["floor-hash"].median
    floors = {"rebuild": parse, "rebuild-one": parse, "replay": parse, "verify": hashing}
    names = dict.fromkeys(floors, "read+parse") | {"verify": "read+hash"}
    shown = {"verify": "deep verify", "rebuild-one": "rebuild in one process"}
    if targets is not None:
        targets += [
            Target(
                f"{shown.get(task, task)} events per CPU-second",
                fmt_rate(per_cpu[task].median),
                f"floor {names[task]} {fmt_rate(floors[task])}",
                per_cpu[task].median / floors[task],
                f">= {REBUILD_CPU_RATIO} x floor" if task == "rebuild" else None,
                per_cpu[task].median / floors[task] >= REBUILD_CPU_RATIO
                if task == "rebuild"
                else None,
            )
            for task in floors
        ]
    return [
        "  events per CPU-second (user + system, forked processes included), medians [min-max]:",
        f"    floor read+parse  {per_cpu['floor-parse'].summary('')}",
        f"    floor read+hash   {per_cpu['floor-hash'].summary('')}",
        *(
            f"    {task:<11}       {per_cpu[task].summary('')}"
            f"  {per_cpu[task].median / floors[task]:.2f} x {names[task]} floor"
            + (f" (target >= {REBUILD_CPU_RATIO})" if task == "rebuild" else "")
            for task in floors
        ),
    ]


def main() -> int:
    """Run this benchmark alone (or, with ``--task``, one measurement as a child)."""
    parser = argparse.ArgumentParser(description="whole-log throughput against raw-SQLite floors")
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=None, help="default 3, 1 from 500 000")
    parser.add_argument("--task", choices=sorted(TASKS), help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.task:
        _child(args.task, args.db, args.work)
        return 0
    targets: list[Target] = []
    print("\n".join(run(args.events, args.rounds, args.seed, targets)), flush=True)
    print("\n".join(summary(targets)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
