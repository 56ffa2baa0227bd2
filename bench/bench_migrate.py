"""How long ``pwf log migrate`` takes on a v1 SQLite log, and the proof of its backup (ADR 0102).

The log ``bench_log`` generates (1 000 000 events; 100 000 with ``--quick``)
is written in format ``pwf.store.v1`` as pwf wrote it before ADR 0102
(``tests/_sqlite_v1.py``: the same projections, and the log in one
``events`` table), untimed; then, as a user runs them, each its own process:

* ``pwf log migrate --db FILE``: the backup copied and hashed, the new file
  built beside it with every event re-stored and checked, ``log.migrated``
  appended, the new file copied over the old one;
* ``pwf log verify --db FILE --backup KEPT``: the chain and the tree, then
  each event of the backup compared with the event at its seq.

The issue's target is the migration of a 1M-event log in under two minutes.
Run alone: ``python bench/bench_migrate.py [--events N]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` and `tests.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_log import EVENTS, OUT, cached_log
from bench.bench_scale import run_process
from bench.targets import Target

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["main", "run"]

TARGET_EVENTS: Final = 1_000_000
TARGET_SECONDS: Final = 120.0


def _v1(source: Path, target: Path) -> None:
    from tests._sqlite_v1 import make_v1  # noqa: PLC0415 - the tests' hand-made v1 file

    make_v1(source, target)


def run(
    events: int = EVENTS,
    seed: int = 7,
    targets: list[Target] | None = None,
    *,
    make: Callable[[Path, Path], None] = _v1,
) -> list[str]:
    """Migrate a v1 copy of the generated log once and prove its backup; report lines."""
    source, head, obtained = cached_log(events, seed)
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="migrate-", dir=OUT))
    try:
        db = work / "v1.db"
        make(source, db)
        before = db.stat().st_size
        cpu, wall, peak, _ = run_process(["log", "migrate", "--db", str(db)])
        after = db.stat().st_size
        kept = work / "v1.db.v1-backup"
        proof_cpu, proof_wall, _, out = run_process(
            ["log", "verify", "--db", str(db), "--backup", str(kept)]
        )
        if b"byte for byte" not in out:
            raise RuntimeError(f"the backup did not prove: {out[-300:]!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if targets is not None:
        whole = events >= TARGET_EVENTS
        targets.append(
            Target(
                "a 1M-event v1 log migrates and verifies against its backup",
                f"{head:,} events: migrate {wall:.1f} s, verify --backup {proof_wall:.1f} s",
                "(no floor)",
                None,
                f"< {TARGET_SECONDS:.0f} s" + ("" if whole else f" (at {TARGET_EVENTS:,} events)"),
                wall < TARGET_SECONDS if whole else None,
            )
        )
    return [
        f"pwf log migrate of a v1 log of {head:,} events ({obtained}):",
        (
            f"  migrate: {wall:.1f} s wall, {cpu:.1f} s CPU, {peak / 1024:.0f} MiB peak;"
            f" file {before / head:,.0f} -> {after / head:,.0f} B/event"
        ),
        (
            f"  verify --backup (chain, tree, every old event against its seq):"
            f" {proof_wall:.1f} s wall, {proof_cpu:.1f} s CPU"
        ),
    ]


def main() -> int:
    """Run once from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    for line in run(options.events, options.seed):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
