"""The served host: durable recorded requests/s and latency at 1, 4, 16 and 64 clients.

Each round starts ``pwf serve`` as a process on a fresh database
(``synchronous=FULL``, the default) and, for each client count, runs that
many client threads for a few seconds, each with its own connection and one
request outstanding at a time (``run.start`` of a new run, recorded): every
request is a full round trip, and only ``accepted`` answers count.  A
client's lines are made from one canonical template by putting the request's
number in (the bytes ``canonical.encode`` gives), so the clients, which share
this process and its interpreter lock, spend little of the machine.  The
host's processor time per request (``/proc``, user and system, all its
threads) is printed beside each client count, and so are the host's write
calls and bytes per request (``/proc/<pid>/io``: ``syscw``, ``wchar``; the
log's frames, the checkpoints' pages, the answers on the sockets), which
depend less on the machine's load than the rates do.  Beside it, in the same round:

* **pwf request**: one process answering 1 000 such lines from stdin, each in
  its own transaction (start-up included);
* **floor**: plain :mod:`sqlite3` at ``synchronous=FULL``, one transaction per
  request writing an event row and a command row: the commit rate of this disk;
* **group floor**: :func:`bench.bench_durable.floor_loop` (two hash-chained
  event rows a request, JSON encoded in the loop) committing 64 requests a
  transaction, as a served group of 64 clients could at best: its requests
  per CPU-second (this process's user and system time) beside the host's
  requests per server CPU-second at 64 clients.

The served rate can pass the floor because many waiting requests share one
commit (group commit, ADR 0028).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_durable import _floor_open, floor_loop, requests
from bench.harness import Rates, fmt_rate
from bench.targets import Target, summary

from pwf import canonical
from pwf.client import HostClient, socket_path, wait_for_host

__all__ = ["main", "run"]

PWF: Final = str(Path(sys.executable).with_name("pwf"))
CLIENTS: Final = (1, 4, 16, 64)
DIRECT_LINES: Final = 1000
GROUP: Final = 64
"""Requests a commit of the group floor, as many as the most clients served."""
GROUP_REQUESTS: Final = 3_200
"""Requests the group floor writes a round (50 commits)."""
CPU_TARGET: Final = 6_000
"""Issue 31: served at 64 clients, at least this many requests per server CPU-second."""


def _start(number: int, client: str) -> bytes:
    return canonical.encode(
        {
            "clientId": client,
            "idempotencyKey": f"k-{number}",
            "operation": "run.start",
            "payload": {
                "definitionDigest": "d1",
                "definitionSnapshot": {"nodes": ["draft"]},
                "input": {"version": "1.0.0", "n": number},
                "originSessionId": f"s-{number}",
                "projectPath": "/srv/project",
                "workflowName": "release-notes",
                "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
                "workflowSourceRef": "builtin:release-notes",
            },
            "requestId": f"r-{number}",
            "runId": f"run-{number}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


_SLOT: Final = 987_654_321
"""A number no request uses: each line is the template with it replaced by the request's."""


def _template(client: str) -> bytes:
    return _start(_SLOT, client)


def _line(template: bytes, number: int) -> bytes:
    """``_start(number, client)``: the number appears only as digits, in ids and ``input.n``."""
    return template.replace(b"%d" % _SLOT, b"%d" % number)


def _cpu_seconds(pid: int) -> float | None:
    """User plus system processor time of a process and all its threads (Linux), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _writes(pid: int) -> tuple[int, int] | None:
    """Write calls and bytes written so far by a process and all its threads (Linux), else None."""
    try:
        fields = dict(
            line.split(": ", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines()
        )
        return int(fields["syscw"]), int(fields["wchar"])
    except (OSError, KeyError, ValueError):
        return None


def _init(db: Path) -> None:
    subprocess.run([PWF, "init", "--db", str(db)], check=True, capture_output=True)


def _served_round(db: Path, clients: int, seconds: float, base: int) -> tuple[float, list[float]]:
    """Requests/s and every latency (s) of ``clients`` threads for ``seconds``."""
    path = socket_path(db)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop = threading.Event()
    failures: list[str] = []

    def work(index: int) -> None:
        template = _template(f"c-{index}")
        with HostClient.connect(path, timeout=30) as client:
            number = base + index * 1_000_000
            start.wait()
            while not stop.is_set():
                number += 1
                line = _line(template, number)
                began = time.perf_counter()
                client.send(line)
                answer = client.response(f"r-{number}")[0]
                latencies[index].append(time.perf_counter() - began)
                if answer["outcome"] != "accepted":
                    failures.append(str(answer))
                    return

    threads = [threading.Thread(target=work, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if failures:
        raise RuntimeError(failures[0])
    every = [value for values in latencies for value in values]
    return len(every) / elapsed, every


def _direct(db: Path) -> float:
    lines = b"\n".join(_start(number, "direct") for number in range(DIRECT_LINES)) + b"\n"
    began = time.perf_counter()
    subprocess.run([PWF, "request", "--db", str(db)], input=lines, check=True, capture_output=True)
    return DIRECT_LINES / (time.perf_counter() - began)


def _floor(db: Path, count: int = 400) -> float:
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    connection.execute("CREATE TABLE commands (request_id TEXT PRIMARY KEY, receipt BLOB)")
    body = _start(0, "floor") * 2
    began = time.perf_counter()
    for number in range(count):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO events (body) VALUES (?)", (body,))
        connection.execute("INSERT INTO commands VALUES (?, ?)", (f"r-{number}", body[:200]))
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - began
    connection.close()
    return count / elapsed


def _group_floor(db: Path, count: int = GROUP_REQUESTS) -> float:
    """Requests per CPU-second of the raw floor committing :data:`GROUP` requests at a time."""
    connection = _floor_open(db)
    batch = requests(count)
    began = time.process_time()
    floor_loop(connection, batch, group=GROUP)
    used = time.process_time() - began
    connection.close()
    return count / used


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run(rounds: int = 3, seconds: float = 3.0, targets: list[Target] | None = None) -> list[str]:
    """Report lines: served rates and latencies per client count, beside direct and floor.

    The issue 31 target this run measures (requests per server CPU-second at
    64 clients) is appended to ``targets``.
    """
    workdir = Path(tempfile.mkdtemp(prefix="pwf-bench-", dir="/tmp"))
    served = {clients: Rates(()) for clients in CLIENTS}
    p50: dict[int, list[float]] = {clients: [] for clients in CLIENTS}
    p99: dict[int, list[float]] = {clients: [] for clients in CLIENTS}
    cpu: dict[int, list[float]] = {clients: [] for clients in CLIENTS}
    calls: dict[int, list[float]] = {clients: [] for clients in CLIENTS}
    kib: dict[int, list[float]] = {clients: [] for clients in CLIENTS}
    loads: list[float] = []
    direct, floor, grouped = Rates(()), Rates(()), Rates(())
    scaling: list[float] = []
    try:
        for round_no in range(rounds):
            floor = floor.add(_floor(workdir / f"floor-{round_no}.db"))
            grouped = grouped.add(_group_floor(workdir / f"group-{round_no}.db"))
            direct_db = workdir / f"direct-{round_no}.db"
            _init(direct_db)
            direct = direct.add(_direct(direct_db))
            db = workdir / f"served-{round_no}" / "state.db"
            db.parent.mkdir()
            _init(db)
            host = subprocess.Popen(
                [PWF, "serve", "--db", str(db)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_for_host(socket_path(db), timeout=60).close()
                rates = {}
                for offset, clients in enumerate(CLIENTS):
                    before, wrote = _cpu_seconds(host.pid), _writes(host.pid)
                    rate, latencies = _served_round(db, clients, seconds, offset * 100_000_000)
                    after, written = _cpu_seconds(host.pid), _writes(host.pid)
                    if before is not None and after is not None:
                        cpu[clients].append((after - before) * 1000 / len(latencies))
                    if wrote is not None and written is not None:
                        calls[clients].append((written[0] - wrote[0]) / len(latencies))
                        kib[clients].append((written[1] - wrote[1]) / 1024 / len(latencies))
                    loads.append(os.getloadavg()[0])
                    rates[clients] = rate
                    served[clients] = served[clients].add(rate)
                    p50[clients].append(_percentile(latencies, 0.50) * 1000)
                    p99[clients].append(_percentile(latencies, 0.99) * 1000)
                scaling.append(rates[16] / rates[1])
            finally:
                host.send_signal(signal.SIGTERM)
                host.wait(120)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    header = (
        f"served host, durable recorded run.start requests (synchronous=FULL, {seconds:g} s"
        f" per client count, {rounds} rounds, medians [min-max]):"
    )
    lines = [header]
    lines.extend(
        f"  {clients:>2} client{'s' if clients > 1 else ' '}  {served[clients].summary()}"
        f"  p50 {statistics.median(p50[clients]):.1f} ms"
        f"  p99 {statistics.median(p99[clients]):.1f} ms"
        f"  ({served[clients].median / floor.median:.2f}x floor)"
        + (f"  host CPU {statistics.median(cpu[clients]):.2f} ms/request" if cpu[clients] else "")
        + (
            f"  writes {statistics.median(calls[clients]):.1f} calls"
            f" {statistics.median(kib[clients]):.0f} KiB/request"
            if calls[clients]
            else ""
        )
        for clients in CLIENTS
    )
    direct_line = (
        f"  pwf request, {DIRECT_LINES} lines in one process  {direct.summary()}"
        f"  ({direct.median / floor.median:.2f}x floor)"
    )
    lines += [
        direct_line,
        f"  floor, raw sqlite3 one transaction per request  {floor.summary()}",
        *_per_cpu(cpu[GROUP], grouped, targets),
        f"  16 clients / 1 client  {statistics.median(scaling):.2f} (median of per-round ratios)",
        (
            f"  load average (1 min) while serving  {min(loads):.2f}-{max(loads):.2f}"
            f" on {os.cpu_count()} processors"
        ),
    ]
    return lines


def _per_cpu(cpu: list[float], grouped: Rates, targets: list[Target] | None) -> list[str]:
    """Requests per server CPU-second at :data:`GROUP` clients beside the group floor's."""
    if not cpu:
        return [f"  {GROUP} clients per server CPU-second: not measured (no /proc)"]
    served = 1000 / statistics.median(cpu)
    ratio = served / grouped.median
    if targets is not None:
        targets.append(
            Target(
                f"served, {GROUP} clients, requests per server CPU-second",
                fmt_rate(served),
                f"raw floor grouping {GROUP} requests a commit {fmt_rate(grouped.median)}",
                ratio,
                f">= {fmt_rate(CPU_TARGET)}",
                served >= CPU_TARGET,
            )
        )
    return [
        (
            f"  {GROUP} clients: {fmt_rate(served)} requests per server CPU-second;"
            f" raw floor grouping {GROUP} requests a commit {grouped.summary(' per CPU-second')}"
            f"  ratio {ratio:.2f} (target >= {fmt_rate(CPU_TARGET)})"
        )
    ]


def main() -> int:
    """Run the served-host benchmark from the command line."""
    quick = "--quick" in sys.argv
    targets: list[Target] = []
    for line in run(2 if quick else 3, 1.5 if quick else 3.0, targets):
        print(line, flush=True)
    print("\n".join(summary(targets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
