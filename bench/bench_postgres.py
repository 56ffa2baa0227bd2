"""Durable recorded requests per second on a shared PostgreSQL log, against two floors.

A throwaway PostgreSQL server (``fsync=on``, ``synchronous_commit=on``) is
started from the machine's packages for the run.  Each round measures, on a
fresh database each:

* **raw floor**: plain psycopg, one transaction per event with the chain:
  take the log's advisory lock, read the head, seal a body naming the
  previous hash (SHA-256 over its bytes), insert it, move the head, commit;
* **eventsourcing**: the ``eventsourcing`` library's application on its
  PostgreSQL persistence, one aggregate event saved per request;
* **pwf, 1 host**: ``Host.request`` of ``run.status`` requests (each one
  ``command.recorded``) on a :class:`~pwf.store.mirror.MirroredStore`;
* **pwf, 3 hosts**: three processes, each with its own local file, sending
  a third of the requests each at once; the rate is all requests over the
  wall time from their common start to the last one's end.

Every rate counts requests acknowledged after PostgreSQL's durable commit.
All four run on the same server with the same settings (the defaults but
for the socket and ``max_connections``), each on a database of its own.
Each client sends one request after another: the floor, ``eventsourcing``
and 1 host have one client (one request in flight), 3 hosts have one each
(three in flight).  The 3 hosts figure is the rate of three hosts sharing
the log, each with the load one client gives it, which is what issue 19's
"three hosts at least as fast as one" compares; a host given three clients
at once is ``pwf serve``'s case (one transaction for a group of
requests, ADR 0052), which this bench does not measure.
:mod:`bench.breakdown_postgres` shows where a request's time goes.
1 and 3 hosts run back to back in each round, in turns which first, and the
3 hosts / 1 host line is the median of the rounds' own ratios (the ratio of
the medians beside it): on a loaded machine a round's pair shares its load.
``python bench/bench_postgres.py [ROUNDS [COUNT]]`` runs 3 rounds of 300.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_command import START
from bench.harness import Rates

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier

    from tests._pg import Server

__all__ = ["main", "run"]

OUT: Final = Path(__file__).resolve().parent / "out"


def _server() -> Server | None:
    from tests._pg import Server, find_bin  # noqa: PLC0415 - the tests' throwaway server

    bin_dir = find_bin()
    if bin_dir is None:
        return None
    server = Server(bin_dir, durable=True)
    server.start()
    return server


def time_floor(url: str, count: int) -> float:
    """Raw psycopg: one chained event per transaction, under the log's lock."""
    import psycopg  # noqa: PLC0415 - optional extra

    from pwf.store.postgres import LOCK_KEY, PostgresStore  # noqa: PLC0415

    PostgresStore(url, create=True).close()
    with psycopg.connect(url, autocommit=True) as connection:
        began = time.perf_counter()
        for n in range(count):
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                seq, prev, batch = connection.execute(
                    "SELECT seq, content_hash, batch FROM _pwf_head"
                ).fetchone() or (0, None, 0)
                draft = {"seq": seq + 1, "prevHash": prev, "requestId": f"status-{n}", "n": n}
                digest = hashlib.sha256(json.dumps(draft, sort_keys=True).encode()).hexdigest()
                body = json.dumps({**draft, "contentHash": digest}, sort_keys=True).encode()
                # The store format's rows of a one-event batch (ADR 0102): its batch, its event.
                connection.execute(
                    "INSERT INTO _pwf_batches (seq, batch, at, request_id, client_id,"
                    " idempotency_key, head) VALUES (%s, %s, %s, %s, 'c', %s, %s)",
                    (seq + 1, batch + 1, n, f"status-{n}", f"status-{n}", body[:64]),
                )
                connection.execute(
                    "INSERT INTO _pwf_events (seq, head, type, content_hash, link, data)"
                    " VALUES (%s, %s, 'command.recorded', %s, %s, %s)",
                    (
                        seq + 1,
                        seq + 1,
                        bytes.fromhex(digest),
                        bytes.fromhex(prev) if prev else None,
                        body,
                    ),
                )
                connection.execute(
                    "UPDATE _pwf_head SET seq = %s, content_hash = %s, batch = %s",
                    (seq + 1, digest, batch + 1),
                )
        return count / (time.perf_counter() - began)


def time_eventsourcing(server: Server, database: str, count: int) -> float | None:
    """The eventsourcing library's application on PostgreSQL: one saved event per request."""
    try:
        from eventsourcing.application import Application  # noqa: PLC0415
    except ImportError:
        return None
    request = _aggregate()

    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": database,
        "POSTGRES_HOST": str(server.socket),
        "POSTGRES_PORT": "5432",
        "POSTGRES_USER": "pwf",
        "POSTGRES_PASSWORD": "",
        "CREATE_TABLE": "y",
    }
    app: Any = Application(env=env)
    began = time.perf_counter()
    for n in range(count):
        app.save(request(request_id=f"status-{n}"))
    rate = count / (time.perf_counter() - began)
    app.close()
    return rate


@functools.cache
def _aggregate() -> Any:  # noqa: ANN401 - the library is untyped here
    """The library's aggregate for one recorded request (defined once: topics are global)."""
    from eventsourcing.domain import Aggregate  # noqa: PLC0415 - bench extra only

    class Request(Aggregate):  # type: ignore[misc]
        def __init__(self, request_id: str) -> None:
            self.request_id = request_id

    return Request


def _host(url: str, db: str, span: tuple[int, int], start: Barrier, done: Queue[float]) -> None:
    """One host process: its own local file, run.status requests ``first..first + count``."""
    first, count = span
    from pwf.host import Host  # noqa: PLC0415
    from pwf.protocol.client import ClientRequest  # noqa: PLC0415
    from pwf.readmodel import ReadModel  # noqa: PLC0415
    from pwf.store.mirror import MirroredStore  # noqa: PLC0415
    from pwf.store.postgres import PostgresStore  # noqa: PLC0415

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
    start.wait()
    for n, request in enumerate(requests):
        answer = host.request(request, 2_000 + n)
        assert answer.outcome == "accepted", answer
    done.put(time.perf_counter())
    store.close()


def _seed(url: str, db: str) -> None:
    from pwf.host import Host  # noqa: PLC0415
    from pwf.protocol.client import ClientRequest  # noqa: PLC0415
    from pwf.readmodel import ReadModel  # noqa: PLC0415
    from pwf.store.mirror import MirroredStore  # noqa: PLC0415
    from pwf.store.postgres import PostgresStore  # noqa: PLC0415

    model = ReadModel()
    store = MirroredStore(db, PostgresStore(url, create=True), hooks=[model], install=model.install)
    start = ClientRequest(
        request_id="start",
        client_id="coordinator",
        operation="run.start",
        idempotency_key="start",
        payload=START,
        run_id="run-1",
    )
    Host(store).request(start, 1_000)
    store.close()


def time_hosts(url: str, folder: Path, count: int, hosts: int) -> float:
    """``hosts`` processes share ``count`` requests; all requests over the wall time."""
    _seed(url, str(folder / "seed.db"))
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(hosts + 1)
    done: Queue[float] = context.Queue()
    share = count // hosts
    processes = [
        context.Process(
            target=_host,
            args=(url, str(folder / f"host-{index}.db"), (index * share, share), start, done),
        )
        for index in range(hosts)
    ]
    for process in processes:
        process.start()
    start.wait()
    began = time.perf_counter()
    ends = [done.get(timeout=600) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    return share * hosts / (max(ends) - began)


def run(rounds: int, count: int) -> list[str]:
    """Report lines: the four rates' medians and pwf's ratios to the floors."""
    server = _server()
    if server is None:
        return ["postgresql: skipped (PostgreSQL is not installed)"]
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=OUT))
    floor, library, one, three = Rates(()), Rates(()), Rates(()), Rates(())
    paired: list[float] = []
    try:
        for round_no in range(rounds):
            floor = floor.add(time_floor(server.create_database(), count))
            url = server.create_database()
            library_rate = time_eventsourcing(server, url.split("@/")[1].split("?")[0], count)
            if library_rate is not None:
                library = library.add(library_rate)
            pair: dict[int, float] = {}
            for hosts in (1, 3) if round_no % 2 == 0 else (3, 1):
                folder = workdir / f"{round_no}-{hosts}"
                folder.mkdir()
                pair[hosts] = time_hosts(server.create_database(), folder, count, hosts)
            one, three = one.add(pair[1]), three.add(pair[3])
            paired.append(pair[3] / pair[1])
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    lines = [
        f"postgresql, durable recorded run.status requests (fsync on, {count} per round):",
        f"  raw psycopg floor  {floor.summary()}",
        f"  eventsourcing      {library.summary() if library.samples else 'not installed'}",
        f"  pwf, 1 host        {one.summary()}",
        f"  pwf, 3 hosts       {three.summary()}",
        f"  1 host / floor     {statistics.median(one.samples) / floor.median:.2f}",
    ]
    if library.samples:
        lines.append(f"  1 host / eventsourcing {one.median / library.median:.2f}")
    rounds_seen = ", ".join(f"{ratio:.2f}" for ratio in paired)
    lines.append(
        f"  3 hosts / 1 host   {statistics.median(paired):.2f}"
        f"  (rounds {rounds_seen}; ratio of medians {three.median / one.median:.2f})"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run a short measurement from the command line: ``[ROUNDS [COUNT]]``."""
    given = [int(value) for value in (sys.argv[1:] if argv is None else argv)]
    rounds, count = [*given, *(3, 300)[len(given) :]][:2]
    os.environ.setdefault("PWF_SYNCHRONOUS", "NORMAL")
    for line in run(rounds, count):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
