"""What the log's Merkle tree costs (ADR 0083): CPU per request, bytes per event, upgrade, proofs.

* **command path**: the CPU time (``time.process_time``) of ``Host.request``
  for ``run.status`` requests (one ``command.recorded`` each, synchronous=NORMAL,
  as :mod:`bench.bench_command`), with the tree and with its upkeep switched
  off in this process, rounds alternating;
* **disk**: the file's size per event with the tree and after dropping it
  and vacuuming, on a log of ``run.start`` and ``run.status`` batches;
* **upgrade**: the first write to that log without its tree (the whole tree
  built from the events, in that write's transaction);
* **proofs**: the time of one inclusion proof and root at the head of a
  synthetic tree of 10**3 and of 10**6 leaves (the stored hash reads each makes).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_command import START, _requests, _seeded, _store
from bench.harness import gc_paused

from pwf import merkle
from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.store import sqlite_transaction
from pwf.store import tree as stored_tree
from pwf.store.sqlite_schema import TREE_DDL

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["main", "run"]

OUT: Final = Path(__file__).resolve().parent / "out"


@contextmanager
def _without_tree() -> Iterator[None]:
    """Switch the tree's upkeep off in this process (the comparison run only)."""
    module: Any = sqlite_transaction
    extend, tree = module.extend, module.SqliteTransaction.tree
    module.extend = lambda _c, kept, *_a, **_k: kept
    module.SqliteTransaction.tree = property(lambda _self: stored_tree.EMPTY_TREE)
    try:
        yield
    finally:
        module.extend = extend
        module.SqliteTransaction.tree = tree


def _cpu_per_request(path: Path, count: int) -> float:
    store = _seeded(path)
    host = Host(store)
    requests = _requests(count)
    with gc_paused():
        began = time.process_time()
        for n, request in enumerate(requests):
            host.request(request, 2_000 + n)
        spent = time.process_time() - began
    store.close()
    return spent / count


def command_path(workdir: Path, rounds: int, count: int) -> list[str]:
    """CPU per request with and without the tree, alternating rounds; the medians."""
    kept, without = [], []
    for round_no in range(rounds):
        kept.append(_cpu_per_request(workdir / f"tree-{round_no}.db", count))
        with _without_tree():
            without.append(_cpu_per_request(workdir / f"none-{round_no}.db", count))
    with_tree, bare = statistics.median(kept), statistics.median(without)
    return [
        f"command path, CPU per recorded run.status ({count} per round, {rounds} rounds):",
        f"  with the tree     {with_tree * 1e6:8.1f} us",
        f"  without the tree  {bare * 1e6:8.1f} us",
        f"  the tree costs    {100 * (with_tree / bare - 1):+.1f} %",
    ]


def _log(path: Path, runs: int, statuses: int) -> int:
    """A log of ``runs`` run.start requests, each followed by ``statuses`` run.status ones."""
    store = _store(path)
    host = Host(store)
    at = 1_000
    for run in range(runs):
        start = ClientRequest(
            request_id=f"start-{run}",
            client_id="coordinator",
            operation="run.start",
            idempotency_key=f"start-{run}",
            payload=START,
            run_id=f"run-{run}",
        )
        host.request(start, at)
        for n in range(statuses):
            at += 1
            status = ClientRequest(
                request_id=f"status-{run}-{n}",
                client_id="coordinator",
                operation="run.status",
                idempotency_key=f"status-{run}-{n}",
                payload=None,
                run_id=f"run-{run}",
            )
            host.request(status, at)
    events = store.head().seq
    store.close()
    return events


def disk_and_upgrade(workdir: Path, runs: int, statuses: int) -> list[str]:
    """Bytes per event the tree adds, and the first write of the same log without its tree."""
    path = workdir / "log.db"
    events = _log(path, runs, statuses)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA journal_mode = DELETE")  # sizes of the file alone
    connection.execute("VACUUM")
    with_tree = path.stat().st_size
    connection.execute("DROP TABLE _pwf_tree")
    connection.execute("VACUUM")
    without = path.stat().st_size
    connection.close()
    store = _store(path)
    head = store.head()
    began = time.perf_counter()
    cpu = time.process_time()
    with store.transaction() as tx:
        built = tx.tree
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    assert built.size == events
    store.close()
    assert head.seq == events
    return [
        f"disk, a log of {events} events ({runs} run.start, {statuses} run.status after each):",
        f"  with the tree     {with_tree / events:8.1f} bytes per event",
        f"  without the tree  {without / events:8.1f} bytes per event",
        f"  the tree costs    {(with_tree - without) / events:8.1f} bytes per event",
        (
            f"upgrade: the first write builds the tree of {events} events in {seconds:.2f} s"
            f" ({cpu_seconds:.2f} s CPU)"
        ),
    ]


def _synthetic(path: Path, leaves: int) -> sqlite3.Connection:
    """A file with ``leaves`` stand-in events (8-byte bodies) and their stored tree."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    connection.execute(  # the leaves a prune kept, read beside the bodies (ADR 0103): none here
        "CREATE TABLE _pwf_pruned (seq INTEGER PRIMARY KEY, leaf BLOB NOT NULL, taken INTEGER)"
    )
    connection.execute(TREE_DDL.format(schema="main"))
    connection.execute("BEGIN")
    connection.executemany(
        "INSERT INTO events VALUES (?, ?)", ((n + 1, n.to_bytes(8, "big")) for n in range(leaves))
    )
    stored_tree.extend(
        connection, stored_tree.EMPTY_TREE, 1, (n.to_bytes(8, "big") for n in range(leaves))
    )
    connection.execute("COMMIT")
    return connection


def proofs(workdir: Path, sizes: tuple[int, ...], samples: int) -> list[str]:
    """One inclusion proof and one root at the head of each size; median time and reads."""
    lines = [f"proofs at the head ({samples} proofs each, median):"]
    medians = []
    for size in sizes:
        connection = _synthetic(workdir / f"tree-{size}.db", size)
        reads = 0
        lookup = stored_tree.lookup(connection, 1)

        def counted(level: int, index: int, lookup: object = lookup) -> bytes:
            nonlocal reads
            reads += 1
            return lookup(level, index)  # type: ignore[operator, no-any-return]

        times = []
        for sample in range(samples):
            index = (sample * 7919) % size
            reads = 0
            began = time.perf_counter()
            path = merkle.inclusion_path(counted, index, size)
            root = merkle.subtree_root(counted, 0, size)
            times.append(time.perf_counter() - began)
            assert merkle.verify_inclusion(
                merkle.leaf_hash(index.to_bytes(8, "big")), index, size, path, root
            )
        connection.close()
        medians.append(statistics.median(times))
        lines.append(f"  {size:>9} leaves  {medians[-1] * 1e6:8.1f} us, {reads} stored hashes read")
    lines.append(f"  ratio largest/smallest {medians[-1] / medians[0]:.2f}")
    return lines


def run(rounds: int = 5, count: int = 1_000, runs: int = 1_000, statuses: int = 99) -> list[str]:
    """Every measurement's report lines."""
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=OUT))
    try:
        return [
            *command_path(workdir, rounds, count),
            *disk_and_upgrade(workdir, runs, statuses),
            *proofs(workdir, (1_000, 1_000_000), 200),
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    """Run the measurements (PWF_BENCH_QUICK=1: smaller ones)."""
    quick = os.environ.get("PWF_BENCH_QUICK") == "1"
    lines = run(3, 300, 100, 9) if quick else run()
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
