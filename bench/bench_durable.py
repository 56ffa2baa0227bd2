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
also reports what each request leaves on disk (:func:`disk`, with the
helpers of :mod:`bench.storage`), beside the same measures of the floor and
of ``eventsourcing``:

* **bytes on disk per request, marginal**: the file's growth from N to 2N
  requests, each time after a ``TRUNCATE`` checkpoint, divided by N; pwf's
  split into the log's B-trees and the projections' (``dbstat``).  The old
  whole-file figure (file after N requests over its events, the empty pages
  of a young file included) is kept beside it, labelled as such;
* **WAL per request**, in bytes and in pages (frames) over requests N+1 to
  2N, WAL auto-checkpoints off, and the B-trees each commit wrote (its
  frames' pages named through ``dbstat``): a commit writes at least one
  page of every B-tree it changes, so that count times a frame is the least
  WAL a request of this schema can write;
* **the log alone, the projections alone**: pwf's recorded statements for
  2N requests replayed in plain :mod:`sqlite3` on a fresh pwf database,
  keeping the transaction control and only the writes of the log's tables
  (events, head, checkpoints) or only those of the projections, with the
  WAL per request of the last N; all of them replayed is the control.

The issue 31 targets measured here (bytes on disk, WAL, ``pwf request``)
are appended to the list ``run`` is given, for ``bench/run.py``'s summary.
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import storage
from bench.bench_command import START
from bench.harness import fmt_rate, gc_paused
from bench.targets import Target, size, summary

from pwf import canonical
from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Wal", "disk", "floor_loop", "main", "replay_wal", "requests", "run", "wal_growth"]

OUT: Final = Path(__file__).resolve().parent / "out"
BYTES_TARGET: Final = 1_600
"""Issue 31: bytes on disk per ``run.start`` at most this (about the raw floor)."""
BYTES_ES_RATIO: Final = 2.5
"""Issue 31: bytes on disk per ``run.start`` at most this many times ``eventsourcing``'s."""
WAL_RATIO: Final = 4.0
"""Issue 31: WAL bytes per request at most this many times the floor's."""
REQUEST_FLOOR_RATIO: Final = 0.5
"""Issue 31: ``pwf request`` at least this share of the floor's rate."""
REQUEST_ES_RATIO: Final = 1.0
"""Issue 31: ``pwf request`` at least this share of ``eventsourcing``'s rate."""


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


def floor_loop(
    connection: sqlite3.Connection,
    batch: list[ClientRequest],
    *,
    group: int = 1,
    after: tuple[int, bytes] = (0, b""),
) -> tuple[int, bytes]:
    """Two hash-chained rows per request, ``group`` requests a transaction; the new head.

    ``after`` is the seq and hash the chain goes on from (an empty table's by default).
    """
    execute, dumps, sha256 = connection.execute, json.dumps, hashlib.sha256
    insert = "INSERT INTO events (seq, type, body, hash) VALUES (?, ?, ?, ?)"
    seq, prev = after
    for n, request in enumerate(batch):
        if n % group == 0:
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
        if (n + 1) % group == 0 or n + 1 == len(batch):
            execute("COMMIT")
    return seq, prev


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


@dataclass(frozen=True)
class Wal:
    """What a stretch of commits wrote to the WAL, per request and per commit."""

    bytes: float
    """WAL bytes per request."""
    pages: float
    """WAL frames (a page each) per request."""
    btrees: dict[str, float]
    """Median B-trees a commit wrote, by kind (``log``, ``projections``, ``sqlite``, ``free``)."""

    @property
    def all_btrees(self) -> float:
        """Median B-trees of any kind a commit wrote (the kinds' medians summed)."""
        return sum(self.btrees.values())


def wal_growth(path: Path, write: Callable[[], object], count: int) -> Wal:
    """What ``write`` (``count`` requests) adds to ``path``'s WAL; auto-checkpoints must be off.

    The WAL is read before the writer closes its connection (the last one
    to close checkpoints and removes it), and its pages are named through a
    second connection, which sees the commits in the WAL.
    """
    wal = Path(f"{path}-wal")
    before = wal.stat().st_size if wal.exists() else 0
    write()
    image = wal.read_bytes()
    reader = sqlite3.connect(path)
    try:
        page_size = int(reader.execute("PRAGMA page_size").fetchone()[0])
        owners = storage.page_owners(reader)
        tables = {
            str(name): str(table)
            for name, table in reader.execute("SELECT name, tbl_name FROM sqlite_schema")
        }
    finally:
        reader.close()
    found = storage.commits(image, page_size, storage.wal_frames(before, page_size))
    written = [storage.touched(pages, owners, tables) for pages in found]
    btrees = {
        name: statistics.median(len(each.get(name, ())) for each in written) if written else 0.0
        for name in (*storage.KINDS, "free")
    }
    frames = storage.wal_frames(len(image), page_size) - storage.wal_frames(before, page_size)
    return Wal((len(image) - before) / count, frames / count, btrees)


def replay_wal(path: Path, statements: list[tuple[str, Any, bool]], part: str, count: int) -> Wal:
    """WAL per request of the last ``count`` requests' statements of ``part``, replayed.

    ``statements`` are pwf's recorded statements for ``2 * count`` requests;
    ``part`` keeps the writes of the log (``log``), of the projections
    (``projections``) or every statement (``all``), with the transaction
    control in each case, so each request stays one commit.  They run in
    plain :mod:`sqlite3` on a fresh pwf database; the first ``count``
    requests' commits are checkpointed away before the measured ones.
    """
    pwf_store(path).close()
    connection = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = FULL", "wal_autocheckpoint = 0"):
        connection.execute(f"PRAGMA {pragma}")
    kept = [
        statement
        for statement in statements
        if part == "all" or storage.statement_part(statement[0]) in {"control", part}
    ]
    commits = [n for n, (sql, _, _) in enumerate(kept) if sql.strip().upper() == "COMMIT"]
    if len(commits) != 2 * count:
        raise RuntimeError(f"{len(commits)} commits recorded, not {2 * count}")
    split = commits[count - 1] + 1

    def execute(chosen: list[tuple[str, Any, bool]]) -> None:
        for sql, parameters, many in chosen:
            (connection.executemany if many else connection.execute)(sql, parameters)

    try:
        execute(kept[:split])
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return wal_growth(path, lambda: execute(kept[split:]), count)
    finally:
        connection.close()


def _wal(wal: Wal) -> str:
    return f"{size(wal.bytes)} = {wal.pages:.1f} pages over {wal.all_btrees:.0f} B-trees"


def disk(workdir: Path, count: int, targets: list[Target] | None = None) -> list[str]:
    """Bytes on disk per request (marginal and whole-file) and WAL per request of each contender.

    Each contender makes ``count`` requests, is checkpointed and measured,
    makes ``count`` more with WAL auto-checkpoints off (their WAL measured),
    and is checkpointed and measured again: the growth between the two is
    the marginal cost of a request.
    """
    first, second = requests(count, 1_000_000), requests(count, 1_000_000 + count)
    path = workdir / "disk-pwf.db"
    store = pwf_store(path, checkpoints=False)
    host = Host(store)
    origin = store.head().seq
    for n, request in enumerate(first):
        host.request(request, 1_000 + n)
    events = store.head().seq - origin
    pwf_young = storage.layout(path)
    pwf_wal = wal_growth(
        path, lambda: [host.request(r, 2_000 + n) for n, r in enumerate(second)], count
    )
    store.close()
    pwf = storage.marginal(pwf_young, storage.layout(path), count)

    path = workdir / "disk-floor.db"
    floor = _floor_open(path)
    floor.execute("PRAGMA wal_autocheckpoint = 0")
    head = floor_loop(floor, first)
    floor_young = storage.layout(path)
    floor_wal = wal_growth(path, lambda: floor_loop(floor, second, after=head), count)
    floor.close()
    floor_marginal = storage.marginal(floor_young, storage.layout(path), count)

    path = workdir / "disk-es.db"
    app = _eventsourcing(path)
    for request in first:
        app.start(request)
    es_young = storage.layout(path)
    for request in second:
        app.start(request)
    app.close()
    es = storage.marginal(es_young, storage.layout(path), count)

    statements = recorded(workdir / "disk-recorded.db", first + second)
    parts = {
        part: replay_wal(workdir / f"disk-{part}.db", statements, part, count)
        for part in ("all", "log", "projections")
    }
    frame = pwf_young.page_size + storage.FRAME_HEADER
    least = pwf_wal.all_btrees * frame
    if targets is not None:
        targets += [
            Target(
                "bytes on disk per run.start, marginal",
                size(pwf.file),
                f"raw floor {size(floor_marginal.file)}, eventsourcing {size(es.file)}",
                pwf.file / floor_marginal.file,
                f"<= 1 600 B and <= 2.5 x eventsourcing ({pwf.file / es.file:.2f} x)",
                pwf.file <= BYTES_TARGET and pwf.file <= BYTES_ES_RATIO * es.file,
            ),
            Target(
                "WAL bytes per request",
                (
                    f"{size(pwf_wal.bytes)} ({pwf_wal.pages:.1f} pages,"
                    f" {pwf_wal.all_btrees:.0f} B-trees, at least {size(least)})"
                ),
                f"raw floor {size(floor_wal.bytes)} ({floor_wal.pages:.1f} pages)",
                pwf_wal.bytes / floor_wal.bytes,
                f"<= {WAL_RATIO:g} x floor",
                pwf_wal.bytes <= WAL_RATIO * floor_wal.bytes,
            ),
        ]
    kinds = pwf.kinds
    return [
        (
            f"  disk per run.start, marginal (growth of the checkpointed file from {count}"
            f" to {2 * count} requests, per request):"
        ),
        (
            f"    pwf {size(pwf.file)} (log {size(kinds['log'])}, projections"
            f" {size(kinds['projections'])}, SQLite's own {size(kinds['sqlite'])},"
            f" free pages {size(kinds['free'])})   floor {size(floor_marginal.file)}"
            f"   eventsourcing {size(es.file)}"
            f"   ratios {pwf.file / floor_marginal.file:.2f} x floor,"
            f" {pwf.file / es.file:.2f} x eventsourcing"
        ),
        (
            f"  disk per event, whole file after {count} requests / events"
            f" (a young file's empty pages included; {events} pwf events):"
        ),
        (
            f"    pwf {size(pwf_young.file_bytes / events)}"
            f"   floor {size(floor_young.file_bytes / (2 * count))}"
            f"   eventsourcing {size(es_young.file_bytes / count)}"
        ),
        (
            f"  WAL per request (requests {count + 1} to {2 * count}; a commit writes at least"
            f" one page of each B-tree it changes; B-trees are medians per commit):"
        ),
        (
            f"    pwf {_wal(pwf_wal)} ({pwf_wal.btrees['log']:.0f} log,"
            f" {pwf_wal.btrees['projections']:.0f} projections,"
            f" {pwf_wal.btrees['sqlite']:.0f} SQLite's own)"
            f"   floor {_wal(floor_wal)}   ratio {pwf_wal.bytes / floor_wal.bytes:.2f}"
            f" (target <= {WAL_RATIO:g})"
        ),
        (
            f"    a page per B-tree is the least a commit of pwf's B-trees writes:"
            f" {pwf_wal.all_btrees:.0f} x {size(frame)} = {size(least)}"
            f" ({least / floor_wal.bytes:.1f} x the floor's WAL)"
        ),
        "  pwf's recorded SQL replayed in plain sqlite3 on a fresh pwf database, WAL per request:",
        (
            f"    all {_wal(parts['all'])}   log alone {_wal(parts['log'])}"
            f"   projections alone {_wal(parts['projections'])}"
        ),
    ]


def run(
    rounds: int, count: int, piped: int = 1_000, targets: list[Target] | None = None
) -> list[str]:
    """Report lines: requests/s medians and the median within-round ratios.

    The issue 31 targets this run measures are appended to ``targets``.
    """
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
        "request es": [],
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
            ratios["request es"].append(sample["pwf request"] / sample["eventsourcing"])
            ratios["sql"].append(sample["pwf"] / sample["pwf sql"])
            ratios["sql floor"].append(sample["pwf sql"] / sample["floor"])
        lines_ = disk(workdir, count, targets)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    shown = {name: f"{fmt_rate(statistics.median(values))}/s" for name, values in rates.items()}
    if targets is not None:
        to_floor, to_es = (statistics.median(ratios[name]) for name in ("request", "request es"))
        targets.append(
            Target(
                f"pwf request, {piped} run.start lines",
                shown["pwf request"],
                f"raw floor {shown['floor']}, eventsourcing {shown['eventsourcing']}",
                to_floor,
                (
                    f">= {REQUEST_FLOOR_RATIO:g} x floor and >= {REQUEST_ES_RATIO:g} x"
                    f" eventsourcing ({to_es:.2f} x)"
                ),
                to_floor >= REQUEST_FLOOR_RATIO and to_es >= REQUEST_ES_RATIO,
            ),
        )
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
            f"   ratio to floor {ratio['request']} (target >= 0.5),"
            f" to eventsourcing {ratio['request es']} (target >= 1)"
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
    targets: list[Target] = []
    for line in run(5, 300, targets=targets):
        print(line)
    print("\n".join(summary(targets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
