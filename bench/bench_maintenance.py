"""Writers during maintenance: the longest wait of a concurrent writer through a backup, a prune
and a rebuild.

A copy of the bench log (``bench_log.cached_log``, 100 000 events by
default) gets a writer process that sends recorded ``host.status`` requests
through the command path, one transaction each, as fast as it can, with the
default busy timeout (5 s).  Meanwhile this process runs a ``state.backup``
and then a ``state.prune --apply`` whose cutoff removes the older half of
the finished runs.  Each write's start and end are wall-clock stamps, so
the writes that overlap each operation give its longest writer wait; the
median write outside both is the floor of the same run.  A failed write
(``database is locked`` past the busy timeout) is counted.  The prune's
time under the write lock is printed step by step (ADR 0051): from the
moment the install holds the lock to its commit, with what each step of
the work done under it took; the rest of that span is the copy of the
image into the live file and its commit.  Then ``pwf rebuild`` (not a
protocol operation: :func:`pwf.fold.rebuild.rebuild` in this process) folds
the pruned log beside it and swaps its tables in under the write lock; its
swap is timed too (ADR 0013 D10).

Usage, from the repository root::

    .venv/bin/python bench/bench_maintenance.py [--events N]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_log

__all__ = ["main", "run"]

EVENTS: Final = 100_000
BACKUP_TARGET_S: Final = 1.0
"""Wanted: no writer waits longer than this through a backup."""
_SETTLE_S: Final = 0.5
UNDER_LOCK: Final = (
    ("catch-up", "pwf.host.prune:catch_up"),
    ("selection", "pwf.host.prune:_unchanged"),
    ("tally", "pwf.host.prune:tally"),
    ("backup hash", "pwf.host._compacting:file_sha256"),
    ("copying the tail", "pwf.host._compacting:_copy_rows"),
    ("shape", "pwf.store.image:same_shape"),
)
"""The steps of the prune's work under the write lock, by what runs them."""
_LOCKED: Final = "pwf.store.image:_Progress.__call__"
_INSTALL: Final = "pwf.store.image:install"
_SWAP: Final = "pwf.fold.rebuild:_swap"


class Steps:
    """Wall-clock spans of named functions while a prune runs in this process."""

    def __init__(self) -> None:
        """Nothing timed yet."""
        self.spans: list[tuple[str, float, float]] = []

    def wrap(self, label: str, target: str) -> None:
        """Time every call of ``target`` (``module:attribute``, maybe ``Class.method``)."""
        module, _, path = target.partition(":")
        owner: Any = importlib.import_module(module)
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part)
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.spans.append((label, started, time.perf_counter()))

        setattr(owner, name, timed)

    def report(self) -> str:
        """The time under the lock and its steps, in ms; empty when no install ran."""
        locked = [(b - a, a) for label, a, b in self.spans if label == "locked"]
        installs = [end for label, _, end in self.spans if label == "install"]
        if not locked or not installs:
            return ""
        start, end = max(locked)[1], installs[-1]  # the longest call is the one that did the work
        parts = []
        for label, _ in UNDER_LOCK:
            took = sum(b - a for name, a, b in self.spans if name == label and a >= start)
            parts.append(f"{label} {took * 1000:.0f}")
        return (
            f"  prune under the write lock {(end - start) * 1000:.0f} ms: "
            + ", ".join(parts)
            + " ms; the rest is the image's copy and commit"
        )


def _wall() -> float:
    """Wall-clock seconds, comparable across the two processes."""
    return time.time()  # noqa: TID251 - a benchmark's stamps, not a decision's time


def _writer(db: str, stamps: str, stop: str) -> None:
    """Write until ``stop`` exists; one ``start end ok`` line per write."""
    from pwf import canonical  # noqa: PLC0415 - the child imports pwf itself
    from pwf.cli._options import open_store  # noqa: PLC0415
    from pwf.host import Host  # noqa: PLC0415
    from pwf.protocol.client import parse_request  # noqa: PLC0415

    with open_store(db) as store, Path(stamps).open("w") as out:
        host = Host(store)
        number = 0
        while not Path(stop).exists():
            number += 1
            line = canonical.encode(
                {
                    "schema": "pi-workflows.client.v1",
                    "type": "request",
                    "requestId": f"w-{number}",
                    "clientId": "bench-writer",
                    "idempotencyKey": f"w-{number}",
                    "operation": "host.status",
                    "payload": {},
                }
            )
            started = _wall()
            try:
                host.request(parse_request(line), int(started * 1000))
                ok = 1
            except Exception:  # noqa: BLE001 - a failed write is what is counted
                ok = 0
            out.write(f"{started} {_wall()} {ok}\n")
            out.flush()
            time.sleep(0.002)


def _maintain(db: Path, operation: str, payload: dict[str, object]) -> tuple[float, float, str]:
    from pwf.cli._options import open_store  # noqa: PLC0415 - imported once the log exists
    from pwf.host import Host  # noqa: PLC0415
    from pwf.protocol.client import ClientRequest  # noqa: PLC0415

    request = ClientRequest(
        request_id=f"bench-{operation}",
        client_id="bench",
        operation=operation,
        idempotency_key=f"bench-{operation}",
        payload=payload,
    )
    with open_store(str(db)) as store:
        started = _wall()
        response = Host(store).request(request, int(started * 1000))
        ended = _wall()
    return started, ended, response.outcome if response.error is None else response.error


def _rebuild(db: Path) -> tuple[float, float, str]:
    from pwf.cli._options import open_store  # noqa: PLC0415 - imported once the log exists
    from pwf.fold.rebuild import rebuild  # noqa: PLC0415

    with open_store(str(db)) as store:
        started = _wall()
        report = rebuild(store)
        ended = _wall()
    return started, ended, f"{report.events} events folded"


def _cutoff(db: Path) -> str:
    import sqlite3  # noqa: PLC0415

    from pwf.commands.prune import iso_utc  # noqa: PLC0415

    connection = sqlite3.connect(db)
    try:
        ends = [
            row[0]
            for row in connection.execute(
                "SELECT finished_at FROM runs WHERE finished_at IS NOT NULL ORDER BY finished_at"
            )
        ]
    finally:
        connection.close()
    return iso_utc(ends[len(ends) // 2] + 1 if ends else 0)


def _worst(
    stamps: list[tuple[float, float, int]], start: float, end: float
) -> tuple[float, int, int]:
    """Longest wait (s), writes and failures among the writes that overlap ``start..end``."""
    inside = [(b - a, ok) for a, b, ok in stamps if b >= start and a <= end]
    return (
        max((wait for wait, _ in inside), default=0.0),
        len(inside),
        sum(1 - ok for _, ok in inside),
    )


def run(events: int = EVENTS, seed: int = 7) -> list[str]:
    """One backup and one prune of a copy of the bench log under a writer; report lines."""
    log, head, obtained = bench_log.cached_log(events, seed)
    work = Path(tempfile.mkdtemp(prefix="maintenance-", dir=bench_log.OUT))
    try:
        db = work / "live.db"
        shutil.copyfile(log, db)
        stamps, stop = work / "stamps.txt", work / "stop"
        writer = subprocess.Popen(
            [sys.executable, __file__, "--writer", str(db), str(stamps), str(stop)]
        )
        try:
            time.sleep(2 * _SETTLE_S + 1)
            backup = _maintain(db, "state.backup", {"destination": str(work / "backup.sqlite")})
            time.sleep(_SETTLE_S)
            steps = Steps()
            for label, target in UNDER_LOCK:
                steps.wrap(label, target)
            steps.wrap("locked", _LOCKED)
            steps.wrap("install", _INSTALL)
            prune = _maintain(
                db,
                "state.prune",
                {"before": _cutoff(db), "apply": True, "backupPath": str(work / "prune.sqlite")},
            )
            time.sleep(_SETTLE_S)
            steps.wrap("swap", _SWAP)
            rebuilt = _rebuild(db)
            time.sleep(_SETTLE_S)
        finally:
            stop.touch()
            writer.wait(timeout=60)
        rows = [line.split() for line in stamps.read_text().splitlines()]
        parsed = [(float(a), float(b), int(ok)) for a, b, ok in rows]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    spans = {"backup": backup, "prune": prune, "rebuild": rebuilt}
    outside = [
        b - a
        for a, b, _ in parsed
        if not any(b >= start and a <= end for start, end, _ in spans.values())
    ]
    floor = statistics.median(outside) if outside else 0.0
    lines = [
        (
            f"maintenance under a writer: log of {head} events ({obtained}),"
            f" a writer's median write outside maintenance {floor * 1000:.1f} ms"
        ),
    ]
    for name, (start, end, outcome) in spans.items():
        worst, writes, failed = _worst(parsed, start, end)
        target = f" (target under {BACKUP_TARGET_S:.0f} s, no failures)" if name == "backup" else ""
        lines.append(
            f"  {name:<7} {end - start:6.1f} s, {outcome}: {writes} writes meanwhile,"
            f" longest wait {worst * 1000:.0f} ms ({worst / floor if floor else 0:.0f}x the floor),"
            f" {failed} failed{target}"
        )
    lines.append(steps.report())
    swaps = [b - a for label, a, b in steps.spans if label == "swap"]
    lines.append(f"  rebuild's swap under the write lock {sum(swaps) * 1000:.0f} ms")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the report (or, with ``--writer``, be the writer)."""
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["--writer"]:
        _writer(*arguments[1:4])
        return 0
    parser = argparse.ArgumentParser(description="writers during a backup, a prune and a rebuild")
    parser.add_argument("--events", type=int, default=EVENTS)
    args = parser.parse_args(arguments)
    for line in run(args.events):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
