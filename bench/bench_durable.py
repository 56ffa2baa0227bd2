"""Durable ``run.start`` requests per second, in-process, against a raw floor and ``eventsourcing``.

Every round sends the same ``run.start`` requests (each its own run and
origin session) to fresh databases at ``synchronous=FULL`` in WAL mode, one
after the other, each round starting with a different contender:

* **pwf**: ``Host.request`` per request, as ``pwf request`` does;
* **floor**: plain :mod:`sqlite3`, one transaction per request writing two
  rows (a ``run.reserved``-like and a ``command.recorded``-like body, JSON
  encoded in the loop) of a SHA-256 hash chain, each row's hash taken over
  the previous hash and its body;
* **eventsourcing**: the ``eventsourcing`` library's application on its
  SQLite store, one command creating one aggregate (one event) and saving it;
* **pwf's SQL**: plain :mod:`sqlite3` executing, on a fresh pwf database,
  the very statements with the very parameters that pwf executed for the
  same requests (recorded beforehand, untimed): pwf's writes and reads
  without pwf's Python, the floor that the schema's B-trees set (every
  request touches one page of each table and index it writes);
* **pwf request**: the same requests as canonical lines, 1 000 of them on one
  stdin of one ``pwf request`` process (the ``pwf`` beside the interpreter),
  timed from spawn to exit, start-up included.

Ratios are taken within a round; the report gives medians.  The same run
also reports what the pwf workload leaves on disk: bytes per event of the
database file after a checkpoint, and WAL bytes written per request (WAL
auto-checkpoints off, so the file only grows), against the same measures of
the floor and of ``eventsourcing``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_command import START
from bench.harness import gc_paused

from pwf import canonical
from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

__all__ = ["main", "requests", "run"]

OUT: Final = Path(__file__).resolve().parent / "out"


def requests(count: int, first: int = 0) -> list[ClientRequest]:
    """``count`` distinct ``run.start`` requests."""
    return [
        ClientRequest(
            request_id=f"start-{n}",
            client_id="coordinator",
            operation="run.start",
            idempotency_key=f"start-{n}",
            payload={**START, "originSessionId": f"s-{n}"},
            run_id=f"run-{n}",
        )
        for n in range(first, first + count)
    ]


def pwf_store(path: Path, *, checkpoints: bool = True) -> SqliteStore:
    """A fresh pwf database at ``synchronous=FULL`` with every projection."""
    model = ReadModel()
    store = SqliteStore(path, create=True, synchronous="FULL", hooks=[model])
    with store.transaction() as tx:
        model.install(tx.connection)
    if not checkpoints:
        store.connection.execute("PRAGMA wal_autocheckpoint = 0")
    return store


def time_pwf(path: Path, batch: list[ClientRequest]) -> float:
    """Requests per second of ``Host.request``."""
    store = pwf_store(path)
    host = Host(store)
    with gc_paused():
        began = time.perf_counter()
        outcomes = [host.request(request, 1_000 + n).outcome for n, request in enumerate(batch)]
        elapsed = time.perf_counter() - began
    store.close()
    if set(outcomes) != {"accepted"}:
        raise RuntimeError(f"run.start was not accepted: {sorted(set(outcomes))}")
    return len(batch) / elapsed


class _Recording(sqlite3.Connection):
    """A connection that keeps every statement it executes, with its parameters."""

    log: list[tuple[str, Any, bool]]

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # noqa: ANN401
        """Keep, then execute."""
        self.log.append((sql, parameters, False))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:  # noqa: ANN401
        """Keep, then execute."""
        rows = list(parameters)
        self.log.append((sql, rows, True))
        return super().executemany(sql, rows)


def recorded(path: Path, batch: list[ClientRequest]) -> list[tuple[str, Any, bool]]:
    """The statements pwf executes for ``batch`` on a fresh database (untimed)."""
    store = pwf_store(path)
    store.connection.close()
    connection = sqlite3.connect(store.path, isolation_level=None, factory=_Recording)
    connection.log = []
    for pragma in ("journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
        connection.execute(f"PRAGMA {pragma}")
    connection.log.clear()
    store.connection = connection
    host = Host(store)
    for n, request in enumerate(batch):
        host.request(request, 1_000 + n)
    store.close()
    return connection.log


def time_statements(path: Path, statements: list[tuple[str, Any, bool]], count: int) -> float:
    """Requests per second of plain sqlite3 executing pwf's recorded statements."""
    pwf_store(path).close()
    connection = _floor_open(path)
    execute, many = connection.execute, connection.executemany
    with gc_paused():
        began = time.perf_counter()
        for sql, parameters, is_many in statements:
            (many if is_many else execute)(sql, parameters)
        elapsed = time.perf_counter() - began
    connection.close()
    return count / elapsed


def _floor_open(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute(
        "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, type TEXT NOT NULL,"
        " body BLOB NOT NULL, hash BLOB NOT NULL)"
    )
    return connection


def floor_loop(connection: sqlite3.Connection, batch: list[ClientRequest]) -> None:
    """Two hash-chained rows per request, one transaction each."""
    execute, dumps, sha256 = connection.execute, json.dumps, hashlib.sha256
    insert = "INSERT INTO events (seq, type, body, hash) VALUES (?, ?, ?, ?)"
    prev, seq = b"", 0
    for n, request in enumerate(batch):
        execute("BEGIN IMMEDIATE")
        reserved = dumps(
            {"type": "run.reserved", "at": n, "runId": request.run_id, "data": request.payload},
            sort_keys=True,
        ).encode()
        prev = sha256(prev + reserved).digest()
        execute(insert, (seq := seq + 1, "run.reserved", reserved, prev))
        recorded = dumps(
            {"type": "command.recorded", "at": n, "requestId": request.request_id},
            sort_keys=True,
        ).encode()
        prev = sha256(prev + recorded).digest()
        execute(insert, (seq := seq + 1, "command.recorded", recorded, prev))
        execute("COMMIT")


def time_floor(path: Path, batch: list[ClientRequest]) -> float:
    """Requests per second of the raw floor."""
    connection = _floor_open(path)
    with gc_paused():
        began = time.perf_counter()
        floor_loop(connection, batch)
        elapsed = time.perf_counter() - began
    connection.close()
    return len(batch) / elapsed


@functools.cache
def _application_class() -> Any:  # noqa: ANN401 - the library is untyped here
    """The ``eventsourcing`` application of the workload, defined once (topics are global)."""
    from eventsourcing.application import Application  # noqa: PLC0415 - bench extra only
    from eventsourcing.domain import Aggregate  # noqa: PLC0415

    class Run(Aggregate):  # type: ignore[misc]
        def __init__(self, run_id: str, payload: object) -> None:
            self.run_id = run_id
            self.payload = payload

    class Runs(Application):  # type: ignore[misc]
        def start(self, request: ClientRequest) -> None:
            self.save(Run(str(request.run_id), request.payload))

    return Runs


def _eventsourcing(path: Path) -> Any:  # noqa: ANN401 - the library is untyped here
    """An ``eventsourcing`` application on SQLite at ``path``."""
    application = _application_class()
    os.environ["PERSISTENCE_MODULE"] = "eventsourcing.sqlite"
    os.environ["SQLITE_DBNAME"] = str(path)
    try:
        return application()
    finally:
        del os.environ["PERSISTENCE_MODULE"], os.environ["SQLITE_DBNAME"]


def time_eventsourcing(path: Path, batch: list[ClientRequest]) -> float:
    """Requests per second of the ``eventsourcing`` application."""
    app = _eventsourcing(path)
    with gc_paused():
        began = time.perf_counter()
        for request in batch:
            app.start(request)
        elapsed = time.perf_counter() - began
    app.close()
    return len(batch) / elapsed


def lines(batch: list[ClientRequest]) -> bytes:
    """The requests as canonical client-protocol lines."""
    return b"".join(
        canonical.encode(
            {
                "clientId": request.client_id,
                "idempotencyKey": request.idempotency_key,
                "operation": request.operation,
                "payload": request.payload,
                "requestId": request.request_id,
                "runId": request.run_id,
                "schema": "pi-workflows.client.v1",
                "type": "request",
            }
        )
        + b"\n"
        for request in batch
    )


def time_request(path: Path, stdin: bytes, count: int) -> float:
    """Requests per second of one ``pwf request`` process answering ``count`` lines."""
    pwf = str(Path(sys.executable).with_name("pwf"))
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}
    pwf_store(path).close()
    began = time.perf_counter()
    done = subprocess.run(
        [pwf, "request", "--db", str(path), "--at", "1000"],
        input=stdin,
        capture_output=True,
        env=environment,
        check=False,
    )
    elapsed = time.perf_counter() - began
    accepted = done.stdout.count(b'"outcome":"accepted"')
    if done.returncode != 0 or accepted != count:
        raise RuntimeError(f"pwf request: exit {done.returncode}, {accepted} of {count} accepted")
    return count / elapsed


def _wal_bytes(path: Path, write: Any, count: int) -> float:  # noqa: ANN401
    """WAL bytes per request of ``write`` (auto-checkpoints off, so the WAL only grows)."""
    wal = Path(f"{path}-wal")
    before = wal.stat().st_size if wal.exists() else 0
    write()
    return (wal.stat().st_size - before) / count


def _file_bytes(path: Path) -> int:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return path.stat().st_size


def disk(workdir: Path, count: int) -> list[str]:
    """Bytes on disk per event and WAL bytes per request of each contender."""
    batch = requests(count, 1_000_000)
    store = pwf_store(workdir / "disk-pwf.db", checkpoints=False)
    host = Host(store)
    first = store.head().seq
    pwf_wal = _wal_bytes(
        store.path,
        lambda: [host.request(r, 1_000 + n) for n, r in enumerate(batch)],
        count,
    )
    events = store.head().seq - first
    store.close()
    pwf_file = _file_bytes(workdir / "disk-pwf.db")
    floor = _floor_open(workdir / "disk-floor.db")
    floor.execute("PRAGMA wal_autocheckpoint = 0")
    floor_wal = _wal_bytes(workdir / "disk-floor.db", lambda: floor_loop(floor, batch), count)
    floor.close()
    floor_file = _file_bytes(workdir / "disk-floor.db")
    app = _eventsourcing(workdir / "disk-es.db")
    for request in batch:
        app.start(request)
    app.close()
    es_file = _file_bytes(workdir / "disk-es.db")
    return [
        f"  disk per event ({count} requests, {events} pwf events, file after a checkpoint):",
        (
            f"    pwf {pwf_file / events:,.0f} B   floor {floor_file / (2 * count):,.0f} B"
            f"   eventsourcing {es_file / count:,.0f} B"
        ),
        f"  WAL per request: pwf {pwf_wal:,.0f} B   floor {floor_wal:,.0f} B",
    ]


def run(rounds: int, count: int, piped: int = 1_000) -> list[str]:
    """Report lines: requests/s medians and the median within-round ratios."""
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=OUT))
    batch, stdin = requests(count), lines(requests(piped))
    statements = recorded(workdir / "recorded.db", batch)
    per_request = sum(len(p) if many else 1 for _, p, many in statements) / count
    contenders = {
        "pwf": lambda path: time_pwf(path, batch),
        "floor": lambda path: time_floor(path, batch),
        "pwf sql": lambda path: time_statements(path, statements, count),
        "eventsourcing": lambda path: time_eventsourcing(path, batch),
        "pwf request": lambda path: time_request(path, stdin, piped),
    }
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    ratios: dict[str, list[float]] = {
        "floor": [],
        "eventsourcing": [],
        "request": [],
        "sql": [],
        "sql floor": [],
    }
    order = list(contenders)
    try:
        for round_no in range(rounds):
            turn = round_no % len(order)
            sample = {
                name: contenders[name](workdir / f"{name.replace(' ', '-')[:8]}-{round_no}.db")
                for name in order[turn:] + order[:turn]
            }
            for name, rate in sample.items():
                rates[name].append(rate)
            ratios["floor"].append(sample["pwf"] / sample["floor"])
            ratios["eventsourcing"].append(sample["pwf"] / sample["eventsourcing"])
            ratios["request"].append(sample["pwf request"] / sample["floor"])
            ratios["sql"].append(sample["pwf"] / sample["pwf sql"])
            ratios["sql floor"].append(sample["pwf sql"] / sample["floor"])
        lines_ = disk(workdir, count)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    shown = {name: f"{statistics.median(values):,.0f}/s" for name, values in rates.items()}
    ratio = {name: f"{statistics.median(values):.2f}" for name, values in ratios.items()}
    return [
        (
            f"durable run.start (synchronous=FULL, WAL; {count} in-process and {piped} piped"
            f" per round, {rounds} rounds):"
        ),
        (
            f"  in-process: pwf {shown['pwf']}   floor {shown['floor']}"
            f"   eventsourcing {shown['eventsourcing']}"
        ),
        (
            f"  ratio pwf/floor {ratio['floor']} (target >= 0.6)"
            f"   pwf/eventsourcing {ratio['eventsourcing']} (target >= 1.5)"
        ),
        (
            f"  pwf request, {piped} lines on one stdin: {shown['pwf request']}"
            f"   ratio to floor {ratio['request']} (target >= 0.5)"
        ),
        (
            f"  pwf's SQL ({per_request:.0f} statements a request) replayed in plain sqlite3:"
            f" {shown['pwf sql']}   ratio to floor {ratio['sql floor']}"
            f"   pwf/pwf's SQL {ratio['sql']}"
        ),
        *lines_,
    ]


def main() -> int:
    """Run a short measurement from the command line."""
    for line in run(5, 300):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
