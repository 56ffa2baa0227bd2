"""Every read and write path a user or client has, timed on logs of 10 000 to 1 000 000 events.

The logs are the demo's traffic with sessions (``scripts/demo_traffic.py``,
``Traffic(sessions=True)``): runs started by session coordinators, claimed by
workers, parked on an agent step whose message the coordinator is shown and
reads in a model turn, submissions validated (some rejected and answered
again), finished or failed, the terminal message read, every fifth run
restarted and the restart cancelled, every eleventh cancelled while it waits,
retried status requests.  They are decided in this process through the real
command path (``Host.request`` / ``Host.worker``) and committed fifty runs to
a write transaction, each request in its own savepoint as a served group
does, with ``synchronous=OFF`` (a half-written file is thrown away), so each
is a real log.  Each is made once per size and seed into
``.bench-cache/scale-{events}-{seed}.db`` (git-ignored) and reused.

For each size every path runs ``--rounds`` times; the report gives, per
path, the median processor time (user + system) and wall time at each size,
the largest size's cost over the smallest's, and the largest peak resident
set of any round:

* ``pwf`` verbs run as processes, as a user runs them (start-up included):
  ``pwf request`` with one line of each view operation, ``host.status``,
  ``state.status``, ``channel.status``, ``run.status`` and ``run.start``;
  ``pwf status`` (and ``--json``), ``pwf explain run|interaction``, ``pwf
  query``, ``pwf log show --run|--session``, ``pwf log tail``, ``pwf
  digest``; processor time and peak memory from ``wait4``;
* the served host (``pwf serve`` on a copy of the log): each request is one
  round trip on a connection opened before, timed by the client, ten to a
  round; the host's processor time per request from ``/proc`` (which counts
  in 10 ms ticks, hence the ten); a ``runs`` push is the time from
  sending a ``run.start`` on one connection to the ``runs`` event on another
  that watches the run list;
* ``pwf web``: each page fetched over loopback HTTP after one warm-up fetch
  (the log page verifies the chain once per head), ten to a round; the
  server's processor time per page from ``/proc``.

* 500 watchers of the run list on the served host: its processor share
  while nothing is written, the time from a ``run.start`` to the first
  watcher's push (p50 and the worst of the rounds), and its resident set.

Writing paths run on a copy of the log made for the run, so the cached log
stays as generated.  ``pwf digest`` reads every row by design: it is there
to show what a whole-log walk costs beside the per-item paths.

Usage, from the repository root (``make bench-scale``)::

    .venv/bin/python bench/bench_scale.py [--sizes 10000,100000,1000000] [--seed 7] [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import fmt_rate

from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["cached_log", "main", "run"]

ROOT: Final = Path(__file__).resolve().parents[1]
CACHE: Final = ROOT / ".bench-cache"
TRAFFIC: Final = ROOT / "scripts" / "demo_traffic.py"
PWF: Final = str(Path(sys.executable).with_name("pwf"))
SIZES: Final = (10_000, 100_000, 1_000_000)
GROUP: Final = 50
"""Runs decided in one write transaction while a log is generated."""
EVENTS_PER_RUN: Final = 44
"""About how many events one run of the traffic with sessions writes."""
SESSION: Final = "session-3"
REPEAT: Final = 10
"""Served requests and web pages per round: /proc counts processor time in 10 ms ticks."""
TARGET_RATIO: Final = 1.5
"""The issue's target: a per-item path at the largest size costs at most this times the smallest."""


# --------------------------------------------------------------------------- the log


def _head(path: Path) -> int:
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


def generate(path: Path, events: int, seed: int) -> tuple[int, int]:
    """Write the traffic through the command path until the log holds ``events``.

    Returns the head seq and the number of runs.  The file is built under a
    temporary name and renamed into place when whole.
    """
    partial = path.with_name(f"{path.name}.partial")
    _remove(partial)
    subprocess.run([PWF, "init", "--db", str(partial)], check=True, capture_output=True)
    traffic = _traffic_class()(str(partial), seed, sessions=True, group=GROUP)
    store = traffic.store
    store.connection.execute("PRAGMA synchronous = OFF")
    index = 0
    mark = (0, time.perf_counter(), time.process_time())
    while store.head().seq < events:
        traffic.batch(range(index + 1, index + GROUP + 1))
        index += GROUP
        mark = _progress(int(store.head().seq), mark)
    head = int(store.head().seq)
    store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    _remove(path)
    partial.replace(path)
    _remove(partial)
    return head, index


PROGRESS: Final = 50_000
"""Events between two lines of generation progress (on stderr)."""


def _progress(head: int, mark: tuple[int, float, float]) -> tuple[int, float, float]:
    """Print the rate since ``mark`` once ``PROGRESS`` more events are written; the new mark."""
    if head - mark[0] < PROGRESS:
        return mark
    wall, cpu = time.perf_counter(), time.process_time()
    made = head - mark[0]
    print(
        f"  at {head} events: {made / (wall - mark[1]):.0f} events/s of wall time,"
        f" {made / max(cpu - mark[2], 1e-9):.0f} of CPU",
        file=sys.stderr,
        flush=True,
    )
    return head, wall, cpu


def append_floor(source: Path, events: int, *, projections: bool = True) -> float:
    """CPU seconds per event to append the first ``events`` of ``source`` again to a new file.

    Each event is sealed, written and (with ``projections``) folded into every
    read model, one ``stage`` per event in batches and transactions as the
    source has them (fifty runs to a transaction), with what generation sets
    (``synchronous=OFF``): the command path's writing half,
    without deciding anything.  What deciding adds is the rest of a
    generated event's cost.
    """
    target = CACHE / "floor.db"
    _remove(target)
    subprocess.run([PWF, "init", "--db", str(target)], check=True, capture_output=True)
    with SqliteStore(source, read_only=True) as source_store:
        entries = list(source_store.entries(1, events))
    store = SqliteStore(target, hooks=[ReadModel()] if projections else [])
    store.connection.execute("PRAGMA synchronous = OFF")
    started = time.process_time()
    try:
        for group in _transactions(entries, GROUP * EVENTS_PER_RUN):
            with store.transaction() as tx:
                for before, entry in zip([None, *group], group, strict=False):
                    if before is not None and before.batch != entry.batch:
                        tx.new_batch()
                    tx.stage([entry.event], at=entry.at, actor=entry.actor, cause=entry.cause)
        return (time.process_time() - started) / max(len(entries), 1)
    finally:
        store.close()
        _remove(target)


def _transactions(entries: list[Any], size: int) -> Iterator[list[Any]]:
    """``entries`` in runs of about ``size``, each ending at the end of a batch."""
    group: list[Any] = []
    for entry in entries:
        if len(group) >= size and group[-1].batch != entry.batch:
            yield group
            group = []
        group.append(entry)
    if group:
        yield group


def cached_log(events: int, seed: int) -> tuple[Path, int, int, str]:
    """The log for ``events`` and ``seed``: path, head seq, runs and how it was obtained."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"scale-{events}-{seed}.db"
    head = _head(path) if path.exists() else -1
    if head >= events:
        runs = _runs(path)
        return path, head, runs, "cached"
    started = time.perf_counter()
    head, runs = generate(path, events, seed)
    elapsed = time.perf_counter() - started
    rate = fmt_rate(head / elapsed)
    return path, head, runs, f"generated in {elapsed:.0f} s, {rate} events/s"


def _runs(path: Path) -> int:
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        row = connection.execute("SELECT count(*) FROM runs WHERE run_id LIKE 'run-%'").fetchone()
    finally:
        connection.close()
    return int(row[0])


# --------------------------------------------------------------------------- measuring


class Sample:
    """One path at one size: processor and wall seconds per round, peak KiB."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.peak_kib = 0

    def add(self, cpu: float, wall: float, peak_kib: int = 0) -> None:
        self.cpu.append(cpu)
        self.wall.append(wall)
        self.peak_kib = max(self.peak_kib, peak_kib)


def run_process(args: list[str], stdin: bytes = b"") -> tuple[float, float, int, bytes]:
    """Run ``pwf ARGS`` and reap it with ``wait4``: processor s, wall s, peak KiB, stdout."""
    began = time.perf_counter()
    child = subprocess.Popen(
        [PWF, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    if stdin:
        child.stdin.write(stdin)
    child.stdin.close()
    out = child.stdout.read()
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - began
    if child.returncode != 0:
        raise RuntimeError(f"pwf {' '.join(args[:3])} failed: {err.decode().strip()[:300]}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss, out


def cpu_seconds(pid: int) -> float:
    """User plus system processor time of a process and all its threads (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_kib(pid: int) -> int:
    """``VmHWM`` of a running process (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def request_line(number: int, operation: str, payload: object, **more: object) -> bytes:
    from pwf import canonical  # noqa: PLC0415 - the bench's own process only

    return canonical.encode(
        {
            "clientId": "bench-scale",
            "idempotencyKey": f"scale-{number}",
            "operation": operation,
            "payload": payload,
            "requestId": f"scale-{number}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
            **more,
        }
    )


def start_payload(number: int) -> dict[str, object]:
    return {
        "definitionDigest": "sha256:9f2c",
        "definitionSnapshot": {"nodes": ["draft"]},
        "input": {"version": f"9.{number}.0"},
        "originSessionId": f"bench-session-{number}",
        "projectPath": "/srv/project",
        "workflowName": "release-notes",
        "workflowSource": {"id": "release-notes", "kind": "builtin", "revision": "2.0.0"},
        "workflowSourceRef": "builtin:release-notes",
    }


class Numbers:
    """Fresh request numbers for one whole bench run (each size works on a fresh copy)."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self) -> int:
        self.next += 1
        return self.next


# --------------------------------------------------------------------------- the paths


def _targets(runs: int) -> tuple[str, str]:
    """A finished run from the middle of the log and its interaction."""
    middle = max(1, runs // 2)
    middle += 1 if middle % 11 == 0 else 0  # every eleventh run was cancelled before its turn
    return f"run-{middle}", f"interaction-run-{middle}-attempt-{middle}"


def cli_paths(db: Path, work: Path, runs: int, numbers: Numbers) -> dict[str, Callable[[], Any]]:
    """Each ``pwf`` verb as a user runs it; writers on the work copy."""
    run_id, interaction = _targets(runs)

    def request(operation: str, payload: object, **more: object) -> Callable[[], Any]:
        def go() -> Any:  # noqa: ANN401 - a measurement
            line = request_line(numbers(), operation, payload, **more)
            return run_process(["request", "--db", str(work)], line + b"\n")

        return go

    def verb(*args: str) -> Callable[[], Any]:
        return lambda: run_process([*args, "--db", str(db)])

    def start() -> Any:  # noqa: ANN401 - a measurement
        number = numbers()
        line = request_line(number, "run.start", start_payload(number), runId=f"bench-{number}")
        return run_process(["request", "--db", str(work)], line + b"\n")

    return {
        "request view.runs.page": request("view.runs.page", {"cursor": 0, "revision": "?"}),
        "request view.run.get": request("view.run.get", {}, runId=run_id),
        "request view.page steps": request(
            "view.page", {"kind": "steps", "cursor": 0}, runId=run_id
        ),
        "request view.session.watch": request(
            "view.session.watch", {"sessionId": SESSION, "subscriptionId": "s"}
        ),
        "request host.status": request("host.status", {}),
        "request state.status": request("state.status", {}),
        "request channel.status": request("channel.status", {}),
        "request run.status": request("run.status", None, runId=run_id),
        "request run.start": start,
        "status": verb("status"),
        "status --json": verb("status", "--json"),
        "explain run": verb("explain", "run", run_id),
        "explain interaction": verb("explain", "interaction", interaction),
        "query runs --limit 50": verb("query", "runs", "--limit", "50"),
        "query messages --run": verb("query", "messages", "--run", run_id),
        "query turns --session --limit 50": verb(
            "query", "turns", "--session", SESSION, "--limit", "50"
        ),
        "log show --run": verb("log", "show", "--run", run_id),
        "log show --session --limit 100": verb(
            "log", "show", "--session", SESSION, "--limit", "100"
        ),
        "log tail": verb("log", "tail", "-n", "20"),
        "session view": verb("session", "view", SESSION),
        "digest (whole log)": lambda: run_process(["digest", str(db)]),
    }


@contextlib.contextmanager
def served(work: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``pwf serve`` on the work copy until the block ends."""
    from pwf.client import socket_path, wait_for_host  # noqa: PLC0415

    host = subprocess.Popen(
        [PWF, "serve", "--db", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_host(socket_path(work), timeout=600).close()
        yield host
    finally:
        host.send_signal(signal.SIGTERM)
        try:
            host.wait(timeout=60)
        except subprocess.TimeoutExpired:
            host.kill()
            host.wait()


def served_paths(
    work: Path, runs: int, rounds: int, numbers: Numbers, samples: dict[str, Sample]
) -> None:
    """Round trips to the served host, its processor time per request, a ``runs`` push."""
    from pwf.client import HostClient, socket_path  # noqa: PLC0415

    run_id, _ = _targets(runs)
    with served(work) as host, HostClient.connect(socket_path(work), timeout=120) as client:
        asks: dict[str, Callable[[int], bytes]] = {
            "served view.runs.page": lambda n: request_line(
                n, "view.runs.page", {"cursor": 0, "revision": "?"}
            ),
            "served view.run.get": lambda n: request_line(n, "view.run.get", {}, runId=run_id),
            "served host.status": lambda n: request_line(n, "host.status", {}),
            "served state.status": lambda n: request_line(n, "state.status", {}),
            "served run.start": lambda n: request_line(
                n, "run.start", start_payload(n), runId=f"bench-{n}"
            ),
        }
        for name, make in asks.items():
            sample = samples.setdefault(name, Sample())
            for _ in range(rounds):
                before = cpu_seconds(host.pid)
                began = time.perf_counter()
                for _ in range(REPEAT):
                    number = numbers()
                    client.send(make(number))
                    answer = client.response(f"scale-{number}")[0]
                    # view.runs.page with revision "?" answers `conflict` with a fresh page.
                    if answer.get("outcome") not in {"accepted", "adopted", "conflict"}:
                        raise RuntimeError(f"{name}: {str(answer)[:300]}")
                wall = (time.perf_counter() - began) / REPEAT
                used = (cpu_seconds(host.pid) - before) / REPEAT
                sample.add(used, wall, peak_kib(host.pid))
        push = samples.setdefault("served runs push after run.start", Sample())
        with HostClient.connect(socket_path(work), timeout=120) as watcher:
            number = numbers()
            watch = {"subscriptionId": f"w-{number}"}
            watcher.send(request_line(number, "view.runs.watch", watch))
            watcher.response(f"scale-{number}")
            for _event in _events_of(watcher, "runs", 30):
                break  # the first snapshot
            for _ in range(rounds):
                number = numbers()
                before = cpu_seconds(host.pid)
                began = time.perf_counter()
                line = request_line(
                    number, "run.start", start_payload(number), runId=f"bench-{number}"
                )
                client.send(line)
                client.response(f"scale-{number}")
                seen = any(True for _ in _events_of(watcher, "runs", 30))
                wall = time.perf_counter() - began
                if not seen:
                    raise RuntimeError("no runs push within 30 s of a run.start")
                push.add(cpu_seconds(host.pid) - before, wall, peak_kib(host.pid))


WATCHERS: Final = 500
"""Connections that watch the run list while the served host idles (the issue's figure)."""
IDLE_SECONDS: Final = 5.0


def watcher_paths(work: Path, numbers: Numbers, starts: int) -> dict[str, float]:
    """Many watchers of the run list: the host's idle processor share, push latency, memory.

    ``WATCHERS`` connections each watch the run list and read its first
    payload; the host is then left alone for ``IDLE_SECONDS`` and its
    processor time measured; then ``starts`` runs are started one at a time
    on another connection, and for each the time from sending it to the
    first watcher's ``runs`` event is taken (the rest are drained after).
    """
    from pwf.client import HostClient, socket_path  # noqa: PLC0415

    found: dict[str, float] = {}
    with served(work) as host, HostClient.connect(socket_path(work), timeout=120) as client:
        watchers = []
        try:
            for index in range(WATCHERS):
                watcher = HostClient.connect(socket_path(work), timeout=120)
                watchers.append(watcher)
                number = numbers()
                watcher.send(
                    request_line(number, "view.runs.watch", {"subscriptionId": f"w{index}"})
                )
                watcher.response(f"scale-{number}")
            for watcher in watchers:
                next(_events_of(watcher, "runs", 120))
            time.sleep(1.0)
            before = cpu_seconds(host.pid)
            time.sleep(IDLE_SECONDS)
            found["idle host CPU, % of a core"] = (
                (cpu_seconds(host.pid) - before) / IDLE_SECONDS * 100
            )
            found["host RSS with watchers, MB"] = peak_kib(host.pid) / 1024
            latencies = []
            for _ in range(starts):
                number = numbers()
                line = request_line(
                    number, "run.start", start_payload(number), runId=f"bench-{number}"
                )
                began = time.perf_counter()
                client.send(line)
                next(_events_of(watchers[0], "runs", 60))
                latencies.append(time.perf_counter() - began)
                for watcher in watchers[1:]:
                    next(_events_of(watcher, "runs", 60))
                client.response(f"scale-{number}")
            latencies.sort()
            found["push latency p50, ms"] = latencies[len(latencies) // 2] * 1000
            found["push latency p99 (max), ms"] = latencies[-1] * 1000
            found["host peak RSS, MB"] = peak_kib(host.pid) / 1024
        finally:
            for watcher in watchers:
                watcher.close()
    return found


def _events_of(client: Any, name: str, timeout: float) -> Iterator[dict[str, object]]:  # noqa: ANN401
    """The first event called ``name`` within ``timeout`` seconds, if any."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in client.events(timeout=max(0.01, deadline - time.monotonic())):
            if event.get("event") == name or event.get("name") == name:
                yield event
                return
        return


def web_paths(db: Path, runs: int, rounds: int, samples: dict[str, Sample]) -> None:
    """Each page of ``pwf web`` over loopback HTTP; the server's processor time per page."""
    run_id, interaction = _targets(runs)
    port = _free_port()
    server = subprocess.Popen(
        [PWF, "web", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_http(base + "/runs", 120)
        pages = {
            "web /": "/",
            "web /runs": "/runs",
            "web /run": f"/run?id={run_id}",
            "web /interaction": f"/interaction?id={interaction}",
            "web /log": "/log",
            "web /log?run": f"/log?run={run_id}",
        }
        for name, path in pages.items():
            _get(base + path)  # warm: the log page verifies the chain once per head
            sample = samples.setdefault(name, Sample())
            for _ in range(rounds):
                before = cpu_seconds(server.pid)
                began = time.perf_counter()
                for _ in range(REPEAT):
                    _get(base + path)
                sample.add(
                    (cpu_seconds(server.pid) - before) / REPEAT,
                    (time.perf_counter() - began) / REPEAT,
                    peak_kib(server.pid),
                )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=600) as response:  # noqa: S310 - loopback only
        return bytes(response.read())


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _get(url)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
        else:
            return


# --------------------------------------------------------------------------- the report


def measure_size(
    events: int, seed: int, rounds: int, numbers: Numbers, skip: set[str]
) -> tuple[dict[str, Sample], str]:
    """Every path on the log of ``events``; the samples and a line saying what the log is."""
    db, head, runs, obtained = cached_log(events, seed)
    samples: dict[str, Sample] = {}
    scratch = Path(tempfile.mkdtemp(prefix="scale-", dir=CACHE))
    work = scratch / "work.db"
    try:
        shutil.copy(db, work)
        for name, path in ({} if "cli" in skip else cli_paths(db, work, runs, numbers)).items():
            sample = samples.setdefault(name, Sample())
            for _ in range(rounds if not name.startswith("digest") else max(1, rounds // 2)):
                cpu, wall, peak, _ = path()
                sample.add(cpu, wall, peak)
        if "served" not in skip:
            served_paths(work, runs, rounds, numbers, samples)
        if "web" not in skip:
            web_paths(db, runs, rounds, samples)
        watched = {} if "watchers" in skip else watcher_paths(work, numbers, 4 * rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    size_mb = db.stat().st_size / 1e6
    shown = "; ".join(f"{name} {value:.1f}" for name, value in watched.items())
    what = f"{fmt_rate(head)} events, {runs} runs, {size_mb:.0f} MB ({obtained})"
    if shown:
        what += f"\n  {WATCHERS} watchers of the run list: {shown}"
    return samples, what


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def report(sizes: list[int], found: dict[int, dict[str, Sample]]) -> list[str]:
    """One line per path: CPU and wall ms at each size, the last over the first, peak MB."""
    first, last = sizes[0], sizes[-1]
    names = list(found[first])
    head = "  ".join(f"{fmt_rate(size):>11}" for size in sizes)
    lines = [
        f"{'path':<36} {head}   cpu x   wall x   peak MB   (cpu ms / wall ms, medians)",
    ]
    for name in names:
        cells = []
        for size in sizes:
            sample = found[size].get(name)
            cells.append(
                "        n/a"
                if sample is None
                else f"{_ms(sample.cpu):>5.0f}/{_ms(sample.wall):<5.0f}"
            )
        a, b = found[first].get(name), found[last].get(name)
        if a is None or b is None:
            continue
        cpu_x = _ms(b.cpu) / max(_ms(a.cpu), 1e-3)
        wall_x = _ms(b.wall) / max(_ms(a.wall), 1e-3)
        peak = max(found[size][name].peak_kib for size in sizes if name in found[size]) / 1024
        lines.append(f"{name:<36} {'  '.join(cells)}   {cpu_x:5.2f}   {wall_x:6.2f}   {peak:7.0f}")
    lines.append(
        f"(x: cost at {fmt_rate(last)} events over the cost at {fmt_rate(first)};"
        f" the issue's target for per-item paths is <= {TARGET_RATIO})"
    )
    return lines


def run(
    sizes: list[int], seed: int = 7, rounds: int | None = None, skip: set[str] | None = None
) -> list[str]:
    """Measure every path at every size; the report's lines."""
    numbers = Numbers()
    found: dict[int, dict[str, Sample]] = {}
    lines = []
    for size in sizes:
        count = rounds if rounds is not None else (3 if size >= 1_000_000 else 5)
        samples, what = measure_size(size, seed, count, numbers, skip or set())
        found[size] = samples
        lines.append(f"log of {fmt_rate(size)}: {what}; {count} rounds")
    return [*lines, *report(sizes, found)]


def main() -> int:
    """Generate (or reuse) the logs, time every path, print the report."""
    parser = argparse.ArgumentParser(description="every path on logs of growing size")
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=None, help="default 5, 3 from 1 000 000")
    parser.add_argument("--generate-only", action="store_true", help="make the cached logs only")
    parser.add_argument("--skip", default="", help="comma-separated: cli, served, web, watchers")
    parser.add_argument(
        "--floor", type=int, default=0, help="append this many events of the smallest log again"
    )
    args = parser.parse_args()
    sizes = sorted(int(size.replace("_", "")) for size in args.sizes.split(",") if size)
    if args.floor:
        return _floor(sizes[0], args.seed, args.floor)
    if args.generate_only:
        for size in sizes:
            _, head, runs, obtained = cached_log(size, args.seed)
            print(f"log of {fmt_rate(size)}: {fmt_rate(head)} events, {runs} runs ({obtained})")
        return 0
    skip = {name for name in args.skip.split(",") if name}
    print("\n".join(run(sizes, args.seed, args.rounds, skip)), flush=True)
    return 0


def _floor(size: int, seed: int, events: int) -> int:
    path, head, _, _ = cached_log(size, seed)
    events = min(events, head)
    for projections, what in ((False, "the log alone"), (True, "the log and its projections")):
        per_event = append_floor(path, events, projections=projections)
        print(
            f"appending {fmt_rate(events)} events of the log of {fmt_rate(size)} again,"
            f" {what}: {per_event * 1e6:.0f} us of CPU per event,"
            f" {fmt_rate(1 / per_event)} events/s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
