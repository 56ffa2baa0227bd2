"""Append throughput: one-event batches, one write transaction each, against a raw-SQLite floor.

For each durability level (``synchronous=FULL`` and ``NORMAL``, WAL in both)
every round appends the same pre-generated batches to a *fresh* database:

* **pwf**: ``SqliteStore.append`` per batch: ``BEGIN IMMEDIATE``, read the
  head, seal (canonical encode twice, SHA-256), insert the row, move the
  head, ``COMMIT``;
* **floor**: plain :mod:`sqlite3` on a database made with pwf's own
  ``SCHEMA`` (same tables, constraints and indexes) and the same pragmas,
  one ``BEGIN IMMEDIATE; INSERT ...; COMMIT`` per event, inserting the very
  log rows pwf wrote (its batch, event and, where kept, whole row of the
  store format of ADR 0102; precomputed, so bytes and index keys match).

Databases live in a temporary directory under ``bench/out/`` (git-ignored,
on the repository's filesystem) that is removed afterwards.  Rounds
alternate the order of pwf and floor so drift hits both alike; the report
gives batches/s medians and the ratio pwf/floor per level (target >= 0.7).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Rates, gc_paused
from bench.workload import Batch, append_batches, compact_batches

from pwf.events import seal
from pwf.store.schema import BATCH_INSERT, ROW_INSERT, WHOLE_INSERT
from pwf.store.sqlite import SCHEMA, SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["LEVELS", "OUT", "TARGET", "insert_log_row", "log_rows", "main", "run"]

TARGET: Final = 0.7
"""Wanted ratio of pwf's append rate to the raw-SQLite floor."""

Level = Literal["FULL", "NORMAL"]
LEVELS: Final[tuple[Level, ...]] = ("FULL", "NORMAL")

OUT: Final = Path(__file__).resolve().parent / "out"
"""Where the temporary databases go: ``bench/out/`` on the repository's filesystem."""

Row = tuple[tuple[Any, ...] | None, tuple[Any, ...], tuple[Any, ...] | None, tuple[Any, ...], int]
"""One event's log rows: its batch row (or None), event row, whole row (or None), the head it
leaves, and the length of its canonical bytes."""


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def floor_rows(batches: Sequence[Batch], workdir: Path) -> list[Row]:
    """The exact log rows pwf writes for ``batches`` (made once, untimed), one item an event.

    Each item is the event's ``_pwf_batches`` row (None when its batch began
    at an earlier event), its ``_pwf_events`` row, its ``_pwf_whole`` row or
    None, and the head it leaves ``(seq, content_hash, batch)``, as the
    store format of ADR 0102 keeps them; and the length of its bytes.
    """
    path = workdir / "rows.sqlite"
    with SqliteStore(path, create=True, synchronous="NORMAL") as store:
        append_batches(store, batches)
        rows = log_rows(store.connection, 1)
    _remove(path)
    return rows


def log_rows(connection: sqlite3.Connection, first: int) -> list[Row]:
    """The log rows of every event from seq ``first`` on, as :func:`floor_rows` gives them."""
    read = connection.execute
    return [
        (
            read(f"SELECT {_BATCH_COLUMNS} FROM _pwf_batches WHERE seq = ?", (seq,)).fetchone(),  # noqa: S608 - constants
            read(f"SELECT {_EVENT_COLUMNS} FROM _pwf_events WHERE seq = ?", (seq,)).fetchone(),  # noqa: S608 - constants
            read("SELECT seq, prev_hash, body FROM _pwf_whole WHERE seq = ?", (seq,)).fetchone(),
            (seq, content_hash, batch),
            length,
        )
        for seq, content_hash, batch, length in read(
            "SELECT seq, content_hash, batch, length(body) FROM events WHERE seq >= ? ORDER BY seq",
            (first,),
        ).fetchall()
    ]


def insert_log_row(execute: Callable[..., object], row: Row) -> None:
    """Write one event's log rows as pwf wrote them (the head is the caller's to move)."""
    batch, event, whole, _moved, _length = row
    if batch is not None:
        execute(_BATCH, batch)
    execute(_EVENT, event)
    if whole is not None:
        execute(_WHOLE, whole)


def time_pwf(batches: Sequence[Batch], path: Path, level: Level) -> float:
    """Append every batch to a fresh store at ``path``; return batches per second."""
    with SqliteStore(path, create=True, synchronous=level) as store:
        append = store.append
        start = time.perf_counter()
        for events, at, actor, cause in batches:
            append(events, at=at, actor=actor, cause=cause)
        elapsed = time.perf_counter() - start
    _remove(path)
    return len(batches) / elapsed


_BATCH_COLUMNS: Final = "seq, batch, at, request_id, client_id, idempotency_key, head"
_EVENT_COLUMNS: Final = "seq, head, type, run_id, session_id, content_hash, link, data"
_BATCH: Final = BATCH_INSERT.format(schema="", marks=", ".join("?" * 7))
_EVENT: Final = ROW_INSERT.format(schema="", marks=", ".join("?" * 8))
_WHOLE: Final = WHOLE_INSERT.format(schema="", marks="?, ?, ?")
_HEAD_READ: Final = "SELECT seq, content_hash, batch FROM _pwf_head"
_HEAD_WRITE: Final = (
    "INSERT INTO _pwf_head (id, seq, content_hash, batch) VALUES (1, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET seq = excluded.seq,"
    " content_hash = excluded.content_hash, batch = excluded.batch"
)


def time_floor(rows: Sequence[Row], path: Path, level: Level, *, head: bool = False) -> float:
    """Insert every row in its own transaction on a fresh raw database; return rows per second.

    With ``head`` each transaction also reads and moves the ``_pwf_head`` row
    with pwf's own statements: the SQL pwf runs per batch, without its Python.
    """
    connection = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        connection.execute("PRAGMA busy_timeout = 5000")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(f"PRAGMA synchronous = {level}")
        connection.execute("PRAGMA foreign_keys = ON")
        for statement in SCHEMA:
            connection.execute(statement)
        execute = connection.execute
        start = time.perf_counter()
        for row in rows:
            execute("BEGIN IMMEDIATE")
            if head:
                execute(_HEAD_READ).fetchone()
            insert_log_row(execute, row)
            if head:
                execute(_HEAD_WRITE, row[3])
            execute("COMMIT")
        elapsed = time.perf_counter() - start
    finally:
        connection.close()
    _remove(path)
    return len(rows) / elapsed


def time_seal(batches: Sequence[Batch]) -> float:
    """Seal every event against a moving head, no database; return seals per second."""
    prev: str | None = None
    with gc_paused():
        start = time.perf_counter()
        for seq, (events, at, actor, cause) in enumerate(batches, start=1):
            sealed = seal(
                events[0],
                seq=seq,
                batch=seq,
                at=at,
                actor=actor,
                cause=cause,
                event_id=f"evt-{seq}",
                prev_hash=prev,
            )
            prev = sealed.entry.content_hash
        elapsed = time.perf_counter() - start
    return len(batches) / elapsed


def plan_appends(
    rows: Sequence[Row], workdir: Path, rounds: int, budget: float
) -> dict[Level, int]:
    """Appends per round for each level so the whole run stays within ``budget`` seconds.

    A short floor probe per level estimates the cost of one commit; slow disks
    (an fsync of several milliseconds under ``FULL``) get fewer appends per
    round rather than a run that takes many minutes.
    """
    probe = rows[: min(len(rows), 200)]
    share = budget / len(LEVELS) / rounds / 3.5  # pwf, floor and floor+head
    plan: dict[Level, int] = {}
    for level in LEVELS:
        rate = time_floor(probe, workdir / f"probe-{level}.sqlite", level)
        plan[level] = max(min(len(probe), len(rows)), min(len(rows), int(rate * share)))
    return plan


def run(rounds: int = 5, appends: int = 2000, budget: float = 120.0) -> list[str]:
    """Measure both levels for ``rounds`` rounds of up to ``appends`` batches; report lines."""
    OUT.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="append-", dir=OUT))
    try:
        batches = compact_batches(appends, seed=5)
        rows = floor_rows(batches, workdir)
        plan = plan_appends(rows, workdir, rounds, budget)
        sizes = [row[-1] for row in rows]
        pwf = {level: Rates(()) for level in LEVELS}
        floor = {level: Rates(()) for level in LEVELS}
        floor_head = {level: Rates(()) for level in LEVELS}
        seals = Rates(())
        for index in range(rounds):
            seals = seals.add(time_seal(batches))
            for level in LEVELS:
                some_batches, some_rows = batches[: plan[level]], rows[: plan[level]]
                pwf_path = workdir / f"pwf-{level}-{index}.sqlite"
                floor_path = workdir / f"floor-{level}-{index}.sqlite"
                head_path = workdir / f"head-{level}-{index}.sqlite"
                floor_head[level] = floor_head[level].add(
                    time_floor(some_rows, head_path, level, head=True)
                )
                if index % 2:
                    floor[level] = floor[level].add(time_floor(some_rows, floor_path, level))
                    pwf[level] = pwf[level].add(time_pwf(some_batches, pwf_path, level))
                else:
                    pwf[level] = pwf[level].add(time_pwf(some_batches, pwf_path, level))
                    floor[level] = floor[level].add(time_floor(some_rows, floor_path, level))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    counts = ", ".join(f"{level} {plan[level]}" for level in LEVELS)
    lines = [
        f"append: 1-event batch/transaction, WAL; batches/s median [min-max] of {rounds} rounds",
        (
            f"  appends/round: {counts}; body {statistics.median(sizes):.0f} B median"
            f" [{min(sizes)}-{max(sizes)}]; fresh dbs in bench/out/"
        ),
    ]
    overheads = []
    for level in LEVELS:
        ratio = pwf[level].median / floor[level].median
        paired = [a / b for a, b in zip(pwf[level].samples, floor[level].samples, strict=True)]
        verdict = "ok" if ratio >= TARGET else "BELOW"
        overhead = 1e6 / pwf[level].median - 1e6 / floor[level].median
        overheads.append(f"{level} {overhead:+.1f} us")
        lines += [
            f"  {level:<6}  pwf    {pwf[level].summary()}",
            f"  {'':<6}  floor  {floor[level].summary()}",
            f"  {'':<6}  (floor + pwf's head read/upsert: {floor_head[level].summary()})",
            (
                f"  {'':<6}  ratio  {ratio:.2f} pwf/floor (per round {min(paired):.2f}-"
                f"{max(paired):.2f}); target >= {TARGET} {verdict}"
            ),
        ]
    lines += [
        f"  pwf cost over the floor per append: {', '.join(overheads)}",
        f"  of which seal() alone (CPU): {1e6 / seals.median:.1f} us = {seals.summary()}",
    ]
    return lines


def main() -> None:
    """Run this benchmark alone."""
    parser = argparse.ArgumentParser(description="append batches/s against a raw-SQLite floor")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--appends", type=int, default=2000, help="batches per round (at most)")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds for the whole run")
    args = parser.parse_args()
    print("\n".join(run(args.rounds, args.appends, args.budget)))


if __name__ == "__main__":
    main()
