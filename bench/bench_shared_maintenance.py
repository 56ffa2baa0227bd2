"""A writer on the shared PostgreSQL log during its backup and prune: the longest wait, its floor.

A throwaway PostgreSQL server (``fsync=on``, as :mod:`bench.bench_postgres`
starts it) gets the bench log (``bench_log.cached_log``, 100 000 events by
default): its rows are copied into the shared log's tables as they are
stored (format ``pwf.store.v2`` is the same in both backends), and two
copies of the SQLite file become the local projection files of two hosts,
already caught up.  Host ``writer`` is a process that sends recorded
``host.status`` requests through the command path, one transaction each, as
fast as it can (:func:`bench.bench_maintenance._writer` with ``PWF_STORE``
set); meanwhile this process, as host ``ops``, runs ``state.backup`` of the
shared log (ADR 0106).  Each write's start and end are wall-clock stamps,
so the writes that overlap the backup give the longest writer wait; the
floor is the writer's longest wait in a window as long right after it,
without maintenance, in the same run, and the line gives their ratio (and
the ratio to the median write).  A failed write is counted.

Usage, from the repository root::

    .venv/bin/python bench/bench_shared_maintenance.py [--events N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_log, bench_maintenance
from bench.bench_postgres import _server

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["main", "run"]

EVENTS: Final = 100_000
_SETTLE_S: Final = 0.5
_RECORDED: Final = (
    "SELECT request_id, client_id, idempotency_key, seq FROM events"
    " WHERE type = 'command.recorded' ORDER BY seq"
)


def load(url: str, log: Path) -> None:
    """Install the shared log at ``url`` and copy the SQLite log ``log``'s rows into it."""
    import psycopg  # noqa: PLC0415 - the postgres extra

    from pwf.store.postgres import PostgresStore  # noqa: PLC0415
    from pwf.store.postgres.snapshot import TABLES  # noqa: PLC0415 - the tables a backup copies
    from pwf.store.rows import shared_row  # noqa: PLC0415

    PostgresStore(url, create=True).close()
    source = sqlite3.connect(f"{log.as_uri()}?mode=ro", uri=True)
    try:
        with psycopg.connect(url) as connection, connection.cursor() as cursor:
            cursor.execute("DELETE FROM _pwf_tree")
            for table, columns, select in (
                *(
                    (table, ", ".join(columns), f"SELECT {', '.join(columns)} FROM {table}")  # noqa: S608 - constants
                    for table, columns in TABLES
                ),
                ("_pwf_recorded", "request_id, client_id, idempotency_key, seq", _RECORDED),
            ):
                rows = source.execute(select)
                with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(shared_row(row))
            head = source.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
            cursor.execute(
                "UPDATE _pwf_head SET seq = %s, content_hash = %s, batch = %s WHERE id = 1", head
            )
    finally:
        source.close()


@contextlib.contextmanager
def _shared(url: str) -> Iterator[None]:
    """``PWF_STORE`` set to ``url`` in this process while the block runs."""
    before = os.environ.get("PWF_STORE")
    os.environ["PWF_STORE"] = url
    try:
        yield
    finally:
        if before is None:
            del os.environ["PWF_STORE"]
        else:
            os.environ["PWF_STORE"] = before


def run(events: int = EVENTS, seed: int = 7) -> list[str]:
    """One backup of a shared log of ``events`` events under a writer on another host."""
    server = _server()
    if server is None:
        return ["shared log maintenance: skipped (PostgreSQL is not installed)"]
    log, head, obtained = bench_log.cached_log(events, seed)
    work = Path(tempfile.mkdtemp(prefix="shared-maintenance-", dir=bench_log.OUT))
    try:
        url = server.create_database()
        began = time.perf_counter()
        load(url, log)
        loaded = time.perf_counter() - began
        writer_db, ops_db = work / "writer.db", work / "ops.db"
        shutil.copyfile(log, writer_db)
        shutil.copyfile(log, ops_db)
        stamps, stop = work / "stamps.txt", work / "stop"
        writer = subprocess.Popen(
            [
                sys.executable,
                bench_maintenance.__file__,
                "--writer",
                str(writer_db),
                str(stamps),
                str(stop),
            ],
            env={**os.environ, "PWF_STORE": url},
        )
        try:
            time.sleep(2 * _SETTLE_S + 1)
            with _shared(url):
                destination = str(work / "backup.sqlite")
                backup = bench_maintenance._maintain(  # noqa: SLF001 - the sibling bench's request
                    ops_db, "state.backup", {"destination": destination}
                )
            # As long again without maintenance: the writer's longest wait there is the floor.
            time.sleep(_SETTLE_S + (backup[1] - backup[0]) + _SETTLE_S)
            with _shared(url):
                prune = bench_maintenance._maintain(  # noqa: SLF001 - the sibling bench's request
                    ops_db,
                    "state.prune",
                    {
                        "before": bench_maintenance._cutoff(ops_db),  # noqa: SLF001
                        "apply": True,
                        "backupPath": str(work / "prune.sqlite"),
                    },
                )
            time.sleep(2 * _SETTLE_S + 1)
        finally:
            stop.touch()
            writer.wait(timeout=60)
        rows = [line.split() for line in stamps.read_text().splitlines()]
        parsed = [(float(a), float(b), int(ok)) for a, b, ok in rows]
    finally:
        shutil.rmtree(work, ignore_errors=True)
        server.stop()
    start, end, outcome = backup
    outside = [b - a for a, b, _ in parsed if not (b >= start and a <= end)]
    median = statistics.median(outside) if outside else 0.0
    worst, writes, failed = bench_maintenance._worst(parsed, start, end)  # noqa: SLF001
    calm = end + _SETTLE_S
    floor, calm_writes, _ = bench_maintenance._worst(parsed, calm, calm + end - start)  # noqa: SLF001
    p_start, p_end, p_outcome = prune
    p_worst, p_writes, p_failed = bench_maintenance._worst(parsed, p_start, p_end + 1)  # noqa: SLF001
    return [
        (
            f"shared log maintenance under a writer on another host: log of {head} events"
            f" ({obtained}; loaded into PostgreSQL in {loaded:.0f} s), the writer's median"
            f" write outside maintenance {median * 1000:.1f} ms"
        ),
        (
            f"  backup  {end - start:6.1f} s, {outcome}: {writes} writes meanwhile,"
            f" longest wait {worst * 1000:.0f} ms ({worst / floor if floor else 0:.1f}x its longest"
            f" wait of {floor * 1000:.0f} ms in as long without maintenance, {calm_writes} writes;"
            f" {worst / median if median else 0:.0f}x its median), {failed} failed"
        ),
        (
            f"  prune   {p_end - p_start:6.1f} s, {p_outcome}: {p_writes} writes meanwhile and in"
            f" the second after (the writer's host takes in log.pruned and folds again),"
            f" longest wait {p_worst * 1000:.0f} ms ({p_worst / floor if floor else 0:.1f}x the"
            f" floor above), {p_failed} failed"
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the report."""
    parser = argparse.ArgumentParser(description="a writer during a backup of the shared log")
    parser.add_argument("--events", type=int, default=EVENTS)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    for line in run(args.events):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
