"""How long ``pwf log migrate --store`` takes on a v1 shared log, and its proof after it (ADR 0104).

The log is ``bench/bench_scale.py``'s traffic with sessions (made once per
size and seed into ``.bench-cache``, real events through the command path);
a throwaway PostgreSQL server with ``fsync=on`` (``tests/_pg.py``) gets it
in format ``pwf.store.v1`` as a pwf before ADR 0102 stored it
(``tests/_pg_v1.py``: one ``events`` table, its five indexes, the Merkle
tree).  Each round loads a fresh database, then times, as processes run by
a user:

* ``pwf log migrate --store URL --backup FILE``: the export written and
  synced, every event checked and re-stored, the view checked against the
  export, ``log.migrated`` appended, one commit;
* ``pwf log verify --store URL --db NEW --no-catch-up --backup FILE``: the
  shared log's deep verify and the backup's proof, line by line.

It prints, per round and as medians, wall and processor seconds of each
(processor time is the ``pwf`` process's alone; PostgreSQL's work is in the
wall time), and the log's size on disk before and after (tables and
indexes of the log, not ``_pwf_tree`` or ``_pwf_recorded``).

Usage, from the repository root::

    .venv/bin/python bench/bench_migrate_postgres.py [--events 100000] [--seed 7] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` and `tests.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_scale import cached_log, run_process

if TYPE_CHECKING:
    from tests._pg import Server

__all__ = ["main"]

V1_TABLES: Final = ("events",)
V2_TABLES: Final = ("_pwf_batches", "_pwf_events", "_pwf_whole")


def _server() -> Server:
    from tests._pg import Server, find_bin  # noqa: PLC0415 - the tests' throwaway server

    bin_dir = find_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
    server = Server(bin_dir, durable=True)
    server.start()
    return server


def _size(url: str, tables: tuple[str, ...]) -> int:
    """Bytes on disk of ``tables`` with their indexes and TOAST."""
    import psycopg  # noqa: PLC0415 - optional extra

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        row = connection.execute(
            "SELECT sum(pg_total_relation_size(name::regclass)) FROM unnest(%s::text[]) AS name",
            (list(tables),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def main() -> None:
    """Parse the options, run the rounds, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    from tests._pg_v1 import load_v1, rows_of  # noqa: PLC0415 - psycopg is an optional extra

    path, head, runs, how = cached_log(options.events, options.seed)
    print(f"log: {head} events, {runs} runs ({how}): {path}")
    server = _server()
    migrate: list[tuple[float, float]] = []
    verify: list[tuple[float, float]] = []
    try:
        for round_ in range(1, options.rounds + 1):
            url = server.create_database()
            load_v1(url, rows_of(path))
            before = _size(url, V1_TABLES)
            with tempfile.TemporaryDirectory(prefix="pwf-migrate-") as work:
                backup = Path(work) / "v1.jsonl"
                cpu, wall, _peak, _ = run_process(
                    ["log", "migrate", "--store", url, "--backup", str(backup)]
                )
                migrate.append((wall, cpu))
                after = _size(url, V2_TABLES)
                local = Path(work) / "local.db"
                args = ["log", "verify", "--store", url, "--db", str(local), "--no-catch-up"]
                cpu, wall, _peak, out = run_process([*args, "--backup", str(backup)])
                verify.append((wall, cpu))
                assert b"byte for byte" in out, out
                print(
                    f"round {round_}: migrate {migrate[-1][0]:.2f} s wall,"
                    f" {migrate[-1][1]:.2f} s pwf CPU; verify --backup {wall:.2f} s wall,"
                    f" {cpu:.2f} s CPU; log on disk {before / head:.0f} -> {after / head:.0f}"
                    f" B/event; backup {backup.stat().st_size / head:.0f} B/event"
                )
    finally:
        server.stop()
    for name, figures in (("migrate", migrate), ("verify --backup", verify)):
        wall = statistics.median(figure[0] for figure in figures)
        cpu = statistics.median(figure[1] for figure in figures)
        print(
            f"median {name}: {wall:.2f} s wall ({head / wall:,.0f} events/s),"
            f" {cpu:.2f} s pwf CPU, over {len(figures)} rounds of {head} events"
        )


if __name__ == "__main__":
    main()
