"""Where a durable request's time goes on a shared PostgreSQL log, with 1 and 3 hosts.

Runs the workload of :mod:`bench.bench_postgres` (``run.status`` requests
through ``Host.request`` on a mirrored store, each host process sending its
share one after another) with timers wrapped around the steps of a write
transaction, and prints, per request, the mean milliseconds of:

* ``lock + head``: the first round trip (``BEGIN``, the lock, the head, the
  catch-up read), so the wait for the lock plus one round trip;
* ``fold under lock``: folding the other hosts' events that came with it;
* ``decide``: the rest of the write transaction: the host's decision and
  staging (inside the lock, or ahead of it), SQLite's ``BEGIN IMMEDIATE``
  and the read of the rows to write;
* ``write``: the statement that inserts the rows and moves the head;
* ``commit``: ``COMMIT`` (and the flush barrier when the lock is freed early):
  with a synchronous commit the WAL flush is inside it, and the lock with it;
* ``write ahead``: a decision made ahead of the lock (ADR 0062): the one
  round trip of ``BEGIN``, the lock, the head's check, the write and
  ``COMMIT`` (with a synchronous commit the WAL flush is inside it);
* ``stale``: the whole local transaction of a decision made ahead that
  found the head moved (it is made again under the lock);
* ``local commit``: SQLite's ``COMMIT`` after PostgreSQL's;
* ``outside``: the rest of ``Host.request`` (before ``BEGIN IMMEDIATE`` and
  after the local commit: parsing, routing, the answer);

and the round trips to PostgreSQL per request (each statement sent outside
a pipeline, and each pipeline, is one), the stale decisions per request,
the time the lock is held per request (from the end of the first round
trip to the end of the commit, the early commit's flush counted out by one
write round trip; for a decision made ahead, its round trip less one bare
round trip) and the CPU time of the host process per request.  The round
trips and the lock's hold do not depend on the machine's load the way rates
do.

Each phase is also given in the host process's own CPU time (``… cpu``),
and beside the hosts' CPU the run's CPU time of the server's processes
(``server cpu``: its backends, WAL writer and other helpers, from
``/proc/<pid>/stat``) and of the whole machine (``machine busy``, from
``/proc/stat``, with its idle share), each per request: on two processors
shared by the hosts, their backends and the driver, the machine's CPU per
request bounds the rate (two processors' seconds over it), whatever the
waits.

Beside 1 host and 3 hosts sharing one log, ``3 apart`` runs three host
processes with a log of its own each, on the same server: what three hosts
reach on this machine when they share nothing, so neither fold each other's
events nor wait for each other's lock, a ceiling for three sharing.

``python bench/breakdown_postgres.py [COUNT [ROUNDS]]`` (3 rounds of 300 requests by default).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_postgres import OUT, _seed, _server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier

__all__ = ["main"]

PHASES: Final = (
    "lock + head",
    "fold under lock",
    "decide",
    "write",
    "commit",
    "write ahead",
    "stale",
    "local commit",
    "outside",
)


class _Clock:
    """Per-request sums of each phase, in seconds, and the round trips."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.sums["lock held"] = 0.0
        self.trips = 0
        self.stale = 0
        self.depth = 0
        self.marks: dict[str, float] = {}
        self.rtt = 0.0
        """A bare round trip (``SELECT 1``), the median of a few before the run."""

        self.cpus: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        """The same phases in this process's CPU time."""
        self.committed = (0.0, 0.0)

    def add(self, phase: str, began: tuple[float, float], ended: tuple[float, float]) -> None:
        self.sums[phase] += ended[0] - began[0]
        self.cpus[phase] += ended[1] - began[1]


def _stamp() -> tuple[float, float]:
    """Wall clock and this process's CPU time, in seconds."""
    return time.perf_counter(), time.process_time()


def _instrument(clock: _Clock) -> None:  # noqa: C901, PLR0915 - one wrapper per step, together
    """Wrap the steps of a mirrored write transaction with timers (this process only)."""
    import psycopg  # noqa: PLC0415

    from pwf.store import mirror  # noqa: PLC0415
    from pwf.store.postgres import append  # noqa: PLC0415

    cursor_execute = psycopg.Cursor.execute
    pipeline = psycopg.Connection.pipeline

    def cursor_exec(self: psycopg.Cursor[Any], *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        # Connection.execute runs through here too; inside a pipeline nothing is sent yet.
        clock.trips += clock.depth == 0
        return cursor_execute(self, *args, **kwargs)

    @contextmanager
    def piped(self: psycopg.Connection[Any]) -> Iterator[Any]:
        clock.depth += 1
        try:
            with pipeline(self) as pipe:
                yield pipe
        finally:
            clock.depth -= 1
            clock.trips += clock.depth == 0

    psycopg.Cursor.execute = cursor_exec  # type: ignore[method-assign]
    psycopg.Connection.pipeline = piped  # type: ignore[method-assign]

    locked, apply = append.locked, mirror.Mirror._apply  # noqa: SLF001
    write_rows = append.PostgresTransaction.write_rows
    transaction, ahead = mirror.Mirror._transaction, mirror.Mirror._ahead  # noqa: SLF001
    stale = mirror._Stale  # noqa: SLF001

    def timed(phase: str, function: Any) -> Any:  # noqa: ANN401
        def wrapper(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
            began = _stamp()
            try:
                return function(*args, **kwargs)
            finally:
                clock.add(phase, began, _stamp())

        return wrapper

    @contextmanager
    def timed_locked(store: Any, **kwargs: Any) -> Iterator[Any]:  # noqa: ANN401
        began = _stamp()
        with locked(store, **kwargs) as remote:
            granted = _stamp()
            clock.add("lock + head", began, granted)
            clock.marks = {"early": float(kwargs["early"])}
            yield remote
            ending = _stamp()
        ended = _stamp()
        clock.add("commit", ending, ended)
        clock.committed = ended
        # An early commit frees the lock about one round trip after it was sent.
        held = (
            ending[0] - granted[0] + (clock.rtt if clock.marks["early"] else ended[0] - ending[0])
        )
        clock.sums["lock held"] += held

    def timed_write(self: Any, rows: Any, **kwargs: Any) -> None:  # noqa: ANN401
        began = _stamp()
        write_rows(self, rows, **kwargs)
        clock.add("write", began, _stamp())

    def timed_ahead(self: Any, tx: Any, expected: Any, **kwargs: Any) -> None:  # noqa: ANN401
        began, wrote = _stamp(), (clock.sums["write"], clock.cpus["write"])
        try:
            ahead(self, tx, expected, **kwargs)
        finally:
            ended = _stamp()
            # the held-back write is inside this round trip
            clock.sums["write"], clock.cpus["write"] = wrote
            clock.add("write ahead", began, ended)
            clock.sums["lock held"] += max(ended[0] - began[0] - clock.rtt, 0.0)
            clock.committed = ended

    @contextmanager
    def timed_transaction(self: Any, local: Any, **kwargs: Any) -> Iterator[Any]:  # noqa: ANN401
        before, before_cpu = dict(clock.sums), dict(clock.cpus)
        began = _stamp()
        try:
            with transaction(self, local, **kwargs) as tx:
                yield tx
        except stale:
            clock.stale += 1
            clock.sums, clock.cpus = before, before_cpu  # the attempt counts as stale only
            clock.add("stale", began, _stamp())
            raise
        ended = _stamp()
        clock.add("local commit", clock.committed, ended)
        for sums, at in ((clock.sums, 0), (clock.cpus, 1)):
            spent = sum(
                sums[phase] - (before if at == 0 else before_cpu)[phase] for phase in PHASES
            )
            sums["decide"] += ended[at] - began[at] - spent

    append.locked = timed_locked
    mirror.Mirror._ahead = timed_ahead  # type: ignore[method-assign]  # noqa: SLF001
    append.PostgresTransaction.write_rows = timed_write  # type: ignore[method-assign]
    mirror.Mirror._apply = timed("fold under lock", apply)  # type: ignore[method-assign]  # noqa: SLF001
    mirror.Mirror._transaction = timed_transaction  # type: ignore[method-assign,assignment]  # noqa: SLF001


def _round_trip(store: Any) -> float:  # noqa: ANN401
    """The median of 21 bare round trips on the host's connection to the shared log."""
    connection = store.shared.log.connection
    times = []
    for _ in range(21):
        began = time.perf_counter()
        connection.execute("SELECT 1").fetchone()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _host(url: str, db: str, span: tuple[int, int], start: Barrier, done: Queue[Any]) -> None:
    """One instrumented host process sending its share of the requests."""
    from pwf.host import Host  # noqa: PLC0415
    from pwf.protocol.client import ClientRequest  # noqa: PLC0415
    from pwf.readmodel import ReadModel  # noqa: PLC0415
    from pwf.store.mirror import MirroredStore  # noqa: PLC0415
    from pwf.store.postgres import PostgresStore  # noqa: PLC0415

    first, count = span
    clock = _Clock()
    _instrument(clock)
    model = ReadModel()
    store = MirroredStore(db, PostgresStore(url), hooks=[model], install=model.install)
    store.catch_up()
    host = Host(store)
    requests = [
        ClientRequest(
            request_id=f"status-{n}",
            client_id="coordinator",
            operation="run.status",
            idempotency_key=f"status-{n}",
            payload=None,
            run_id="run-1",
        )
        for n in range(first, first + count)
    ]
    rtt = _round_trip(store)
    clock.__init__()  # type: ignore[misc]  # count the requests only
    clock.rtt = rtt
    start.wait()
    cpu, began = time.process_time(), time.perf_counter()
    for n, request in enumerate(requests):
        answer = host.request(request, 2_000 + n)
        assert answer.outcome == "accepted", answer
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    clock.sums["outside"] = wall - sum(clock.sums[phase] for phase in PHASES[:-1])
    clock.cpus["outside"] = cpu - sum(clock.cpus[phase] for phase in PHASES[:-1])
    done.put((count, wall, cpu, clock.trips, clock.sums, clock.stale, clock.cpus))
    start.wait()  # the server's processes are counted while they are still there
    store.close()


def _ticks(pids: list[int]) -> int:
    """User and system clock ticks of the live processes among ``pids``."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def _server_pids(data: Path) -> list[int]:
    """The postmaster and every process it started (backends, WAL writer, checkpointer...)."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    children = [
        int(task.name)
        for task in Path("/proc").iterdir()
        if task.name.isdigit() and _parent(int(task.name)) == postmaster
    ]
    return [postmaster, *children]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def _machine() -> tuple[int, int]:
    """Busy and all clock ticks of the whole machine (``/proc/stat``)."""
    values = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values[:8]) - idle, sum(values[:8])


def measure(urls: list[str], folder: Path, count: int, data: Path) -> dict[str, float]:
    """Per-request means over all hosts' requests, and the rate of all of them together.

    One host process per URL in ``urls``: the same URL for hosts sharing a
    log, one of its own each for hosts that share nothing.

    Beside the host processes' own CPU time, the server's processes' (its
    backends and helpers, ``/proc/<pid>/stat``) and the whole machine's
    busy time (``/proc/stat``) over the run, per request.
    """
    for index, url in enumerate(dict.fromkeys(urls)):
        _seed(url, str(folder / f"seed-{index}.db"))
    hosts = len(urls)
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(hosts + 1)
    done: Queue[Any] = context.Queue()
    share = count // hosts
    processes = [
        context.Process(
            target=_host,
            args=(url, str(folder / f"host-{index}.db"), (index * share, share), start, done),
        )
        for index, url in enumerate(urls)
    ]
    for process in processes:
        process.start()
    start.wait()  # every host is connected by now
    server_pids = _server_pids(data)
    server_ticks, (busy, every) = _ticks(server_pids), _machine()
    results = [done.get(timeout=600) for _ in processes]
    server_ticks, busy_now, every_now = _ticks(server_pids) - server_ticks, *_machine()
    start.wait()
    for process in processes:
        process.join(timeout=60)
    total = sum(result[0] for result in results)
    tick = os.sysconf("SC_CLK_TCK")
    out = {
        phase: sum(r[4][phase] for r in results) / total * 1e3 for phase in (*PHASES, "lock held")
    }
    out |= {f"{phase} cpu": sum(r[6][phase] for r in results) / total * 1e3 for phase in PHASES}
    out["round trips"] = sum(result[3] for result in results) / total
    out["stale decisions"] = sum(result[5] for result in results) / total
    out["cpu"] = sum(result[2] for result in results) / total * 1e3
    out["server cpu"] = server_ticks / tick / total * 1e3
    out["machine busy"] = (busy_now - busy) / tick / total * 1e3
    out["machine idle %"] = 100 * (1 - (busy_now - busy) / max(every_now - every, 1))
    out["rate"] = total / max(result[1] for result in results)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the breakdown for 1 host, 3 sharing a log and 3 apart: ``[COUNT [ROUNDS]]``."""
    given = [int(value) for value in (sys.argv[1:] if argv is None else argv)]
    count, rounds = [*given, *(300, 3)[len(given) :]][:2]
    server = _server()
    if server is None:
        print("postgresql: skipped (PostgreSQL is not installed)")
        return 0
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=OUT))
    variants = ("1 host", "3 hosts", "3 apart")
    seen: dict[str, list[dict[str, float]]] = {variant: [] for variant in variants}
    try:
        for round_no in range(rounds):
            for variant in variants if round_no % 2 == 0 else variants[::-1]:
                folder = workdir / f"{round_no}-{variant.replace(' ', '-')}"
                folder.mkdir()
                url = server.create_database()
                urls = {
                    "1 host": [url],
                    "3 hosts": [url] * 3,
                    "3 apart": [url, server.create_database(), server.create_database()],
                }[variant]
                seen[variant].append(measure(urls, folder, count, server.data))
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    keys = (
        *PHASES,
        *(f"{phase} cpu" for phase in PHASES),
        "lock held",
        "round trips",
        "stale decisions",
        "cpu",
        "server cpu",
        "machine busy",
        "machine idle %",
        "rate",
    )
    print(f"per request, ms (medians of {rounds} rounds of {count}):   1 host   3 hosts   3 apart")
    for key in keys:
        medians = (statistics.median(r[key] for r in seen[variant]) for variant in variants)
        print(f"  {key:<17} " + " ".join(f"{median:9.2f}" for median in medians))
    return 0


if __name__ == "__main__":
    sys.exit(main())
