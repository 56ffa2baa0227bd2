"""The served writer's groups and each thread's processor time, per client count.

Starts ``pwf serve`` on a fresh database (``synchronous=FULL``) through a small
launcher that counts the size of every group the writer commits (ADR 0052,
ADR 0065) and names the writer's and the checkpoint thread's ids, then drives
it with ``bench/bench_serve.py``'s clients (``run.start``, one request
outstanding per client, each on its own connection) for a warm-up and then
for the measured seconds at each client count.  Prints, per client count:
the rate and p50/p99 latency, the host's processor time per request split by
thread (``/proc/<pid>/task/*/stat``: the event loop, the writer, the checkpoint
thread, the rest), the groups committed, their mean size and how many held
1, 2 to 4, 5 to 8, 9 to 15, 16 and more than 16 requests, and how many
requests a group waited for before its commit (``Writer.observe``'s ``waited``).
The group counts and the processor time per request depend less on the
machine's load than the rates do.

``python bench/groups_serve.py [seconds] [clients,...]`` (default 4 s, 1,4,16,64).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_serve import PWF, _init, _percentile, _served_round

from pwf.client import socket_path, wait_for_host

__all__ = ["main"]

WARM_SECONDS: Final = 0.5
BUCKETS: Final = ((1, 1), (2, 4), (5, 8), (9, 15), (16, 16), (17, 10**9))

_LAUNCHER: Final = """
import collections, json, os, signal, sys, threading
import pwf.server._writer as writer
from pwf.store import sqlite_checkpoint
sizes = collections.Counter()
threads = {}
writers = []
told = collections.Counter()
decide = writer.Writer._decide
def counted(self, host, store, group):
    threads["writer"] = threading.get_native_id()
    if self not in writers:
        writers.append(self)
        self.observe = lambda event: told.update([event])
    decide(self, host, store, group)
    if not (group[0].alone or group[0].read):
        sizes[len(group)] += 1
writer.Writer._decide = counted
run = sqlite_checkpoint.Checkpointer._run
def named(self):
    threads["checkpoint"] = threading.get_native_id()
    run(self)
sqlite_checkpoint.Checkpointer._run = named
def dump(*_):
    waited = told["waited"]
    with open(os.environ["PWF_GROUPS_OUT"], "w") as out:
        json.dump({"sizes": sizes, "threads": threads, "waited": waited}, out)
signal.signal(signal.SIGUSR1, dump)
from pwf._entry import main
sys.argv = ["pwf", "serve", "--db", os.environ["PWF_GROUPS_DB"]]
sys.exit(main())
"""


def _threads(pid: int) -> dict[int, float]:
    """Processor seconds (user plus system) of each thread of ``pid``."""
    spent: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        spent[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return spent


def _snapshot(host: subprocess.Popen[bytes], out: Path) -> dict[str, Any]:
    out.unlink(missing_ok=True)
    host.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while not out.exists() or not out.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError("the host did not report its groups")
        time.sleep(0.01)
    time.sleep(0.01)
    return dict(json.loads(out.read_text()))


def _line(
    clients: int,
    measured: tuple[float, list[float]],
    cpu: dict[str, float],
    counted: tuple[collections.Counter[int], int],
) -> str:
    rate, latencies = measured
    sizes, waited = counted
    count = len(latencies)
    groups = sum(sizes.values())
    requests = sum(size * number for size, number in sizes.items())
    buckets = " ".join(
        f"{low if low == high else f'{low}+' if high > 10**6 else f'{low}-{high}'}:"
        f"{sum(number for size, number in sizes.items() if low <= size <= high)}"
        for low, high in BUCKETS
    )
    threads = " ".join(f"{name} {seconds * 1000 / count:.3f}" for name, seconds in cpu.items())
    return (
        f"  {clients:>2} client{'s' if clients > 1 else ' '}  {rate:7.0f}/s"
        f"  p50 {_percentile(latencies, 0.5) * 1000:.1f} ms"
        f"  p99 {_percentile(latencies, 0.99) * 1000:.1f} ms"
        f"  host CPU {sum(cpu.values()) * 1000 / count:.3f} ms/request ({threads})"
        f"  groups {groups} mean {requests / max(groups, 1):.1f} [{buckets}] waited {waited}"
    )


def run(seconds: float, counts: list[int]) -> list[str]:
    """Report lines: one per client count, each on the same host, in the order given."""
    workdir = Path(tempfile.mkdtemp(prefix="pwf-groups-", dir="/tmp"))
    db = workdir / "state.db"
    out = workdir / "groups.json"
    _init(db)
    env = dict(os.environ, PWF_GROUPS_OUT=str(out), PWF_GROUPS_DB=str(db))
    host = subprocess.Popen(
        [str(Path(PWF).with_name("python")), "-c", _LAUNCHER],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    header = (
        f"served host, run.start, {seconds:g} s per client count after {WARM_SECONDS:g} s of"
        " warm-up, one host (synchronous=FULL):"
    )
    lines = [header]
    try:
        wait_for_host(socket_path(db), timeout=60).close()
        base = 0
        for clients in counts:
            _served_round(db, clients, WARM_SECONDS, base)
            base += 100_000_000
            before, spent = _snapshot(host, out), _threads(host.pid)
            rate, latencies = _served_round(db, clients, seconds, base)
            base += 100_000_000
            after, ended = _snapshot(host, out), _threads(host.pid)
            names = {tid: name for name, tid in dict(after["threads"]).items()}
            cpu: dict[str, float] = collections.defaultdict(float)
            for tid, seconds_now in ended.items():
                name = "loop" if tid == host.pid else names.get(tid, "other")
                cpu[name] += seconds_now - spent.get(tid, 0.0)
            sizes = collections.Counter(
                {int(size): number for size, number in dict(after["sizes"]).items()}
            )
            sizes.subtract({int(size): number for size, number in dict(before["sizes"]).items()})
            sizes = +sizes
            waited = int(after["waited"]) - int(before["waited"])
            lines.append(
                _line(clients, (rate, latencies), dict(sorted(cpu.items())), (sizes, waited))
            )
        lines.append(f"  load average (1 min) at the end  {os.getloadavg()[0]:.2f}")
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(120)
        shutil.rmtree(workdir, ignore_errors=True)
    return lines


def main() -> int:
    """Run the group count from the command line."""
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    counts = (
        [int(count) for count in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 4, 16, 64]
    )
    for line in run(seconds, counts):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
