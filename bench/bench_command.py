"""Command-path throughput: recorded client requests per second against a raw-SQLite floor.

Each round sends the same ``run.status`` requests (distinct request ids and
keys) to a fresh database holding one run, at ``synchronous=NORMAL``:

* **pwf**: ``Host.request`` per request: ``BEGIN IMMEDIATE``, the idempotency
  lookups by request id and by (client, key), the run and its view read from
  the projections, one ``command.recorded`` event sealed and written, the
  projectors (blobs, host_commands) and checkpoints, ``COMMIT``;
* **floor**: plain :mod:`sqlite3` on the same schema, one transaction per
  request doing the same statements with values computed beforehand: the two
  lookups, one read of the run, the very ``events`` row pwf wrote, the
  ``host_commands`` and ``blobs`` rows, the head and the checkpoints.

The ratio pwf/floor is what deciding, sealing and projecting in Python cost
on top of the SQL.  In each round pwf runs first, since the floor replays
the rows pwf wrote.
"""

from __future__ import annotations

import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_append import insert_log_row, log_rows
from bench.harness import Rates, gc_paused

from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

__all__ = ["main", "run"]

OUT: Final = Path(__file__).resolve().parent / "out"
START = {
    "definitionDigest": "d1",
    "definitionSnapshot": {"nodes": ["draft"]},
    "input": {"version": "1.0.0"},
    "originSessionId": "s-1",
    "projectPath": "/srv/project",
    "workflowName": "release-notes",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "workflowSourceRef": "builtin:release-notes",
}


def _store(path: Path) -> SqliteStore:
    model = ReadModel()
    store = SqliteStore(path, create=True, synchronous="NORMAL", hooks=[model])
    with store.transaction() as tx:
        model.install(tx.connection)
    return store


def _requests(count: int) -> list[ClientRequest]:
    return [
        ClientRequest(
            request_id=f"status-{n}",
            client_id="coordinator",
            operation="run.status",
            idempotency_key=f"status-{n}",
            payload=None,
            run_id="run-1",
        )
        for n in range(count)
    ]


def _seeded(path: Path) -> SqliteStore:
    store = _store(path)
    start = ClientRequest(
        request_id="start",
        client_id="coordinator",
        operation="run.start",
        idempotency_key="start",
        payload=START,
        run_id="run-1",
    )
    Host(store).request(start, 1_000)
    return store


def time_pwf(path: Path, requests: list[ClientRequest]) -> tuple[float, list[Any]]:
    """Send every request; return requests/s and the rows written (for the floor)."""
    store = _seeded(path)
    first = store.head().seq + 1
    host = Host(store)
    with gc_paused():
        began = time.perf_counter()
        for n, request in enumerate(requests):
            host.request(request, 2_000 + n)
        elapsed = time.perf_counter() - began
    connection = store.connection
    rows = log_rows(connection, first)
    commands = connection.execute(
        "SELECT * FROM host_commands WHERE request_id LIKE 'status-%' ORDER BY completed_at"
    ).fetchall()
    blobs = {
        row[0]: row
        for row in connection.execute(
            "SELECT b.* FROM blobs b JOIN host_commands h ON h.receipt_hash = b.blob_hash"
        )
    }
    store.close()
    plan = [
        (event, command, blobs.get(command[8]))
        for event, command in zip(rows, commands, strict=True)
    ]
    return len(requests) / elapsed, plan


def time_floor(path: Path, plan: list[Any]) -> float:
    """The same statements per request, values precomputed, in plain sqlite3."""
    store = _seeded(path)
    store.close()
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    execute = connection.execute
    with gc_paused():
        began = time.perf_counter()
        for event, command, blob in plan:
            execute("BEGIN IMMEDIATE")
            execute("SELECT * FROM host_commands WHERE request_id = ?", (command[0],)).fetchone()
            execute(
                "SELECT * FROM host_commands WHERE client_id = ? AND idempotency_key = ?",
                (command[1], command[3]),
            ).fetchone()
            execute("SELECT * FROM runs WHERE run_id = 'run-1'").fetchone()
            execute("SELECT * FROM run_queue WHERE run_id = 'run-1'").fetchone()
            insert_log_row(execute, event)
            execute("INSERT INTO host_commands VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", command)
            if blob is not None:
                execute("INSERT OR IGNORE INTO blobs VALUES (?,?,?,?,?)", blob)
            execute(
                "UPDATE _pwf_head SET seq = ?, content_hash = ?, batch = ?",
                event[3],
            )
            execute("UPDATE _pwf_checkpoint SET last_seq = ?", (event[3][0],))
            execute("COMMIT")
        elapsed = time.perf_counter() - began
    connection.close()
    return len(plan) / elapsed


def run(rounds: int, count: int) -> list[str]:
    """Report lines: pwf and floor requests/s medians and their ratio."""
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=OUT))
    pwf, floor = Rates(()), Rates(())
    ratios = []
    try:
        requests = _requests(count)
        for round_no in range(rounds):
            first = workdir / f"pwf-{round_no}.db"
            second = workdir / f"floor-{round_no}.db"
            rate, plan = time_pwf(first, requests)
            floor_rate = time_floor(second, plan)
            pwf, floor = pwf.add(rate), floor.add(floor_rate)
            ratios.append(rate / floor_rate)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [
        f"command path, recorded run.status requests (synchronous=NORMAL, {count} per round):",
        f"  pwf    {pwf.summary()}",
        f"  floor  {floor.summary()}",
        f"  ratio  {statistics.median(ratios):.2f} (median of {rounds} rounds)",
    ]


def main() -> int:
    """Run a short measurement from the command line."""
    for line in run(5, 1000):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
