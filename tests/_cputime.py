"""Per-test CPU time, for finding what makes the suite slow (``PWF_TEST_CPU=DIR``).

Wall time inflates when other work shares the machine; CPU time much less.
With ``PWF_TEST_CPU`` set to a directory, every test's CPU seconds (the test
process's own, plus those of the child processes it waited for) are written
to one JSON line per test in ``DIR/<worker>.jsonl``.  ``python
tests/_cputime.py DIR`` sums them: the total, and the costliest files and
tests.  Without the variable nothing is measured (ADR 0054).  ``python
tests/_cputime.py DIR --record`` also writes the longest tests' wall seconds
to ``tests/durations.json``, which ``tests/conftest.py`` deals out first
(ADR 0058).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pytest

__all__ = ["EXTRA", "VARIABLE", "measure", "record", "summary"]

VARIABLE: Final = "PWF_TEST_CPU"
DURATIONS: Final = Path(__file__).with_name("durations.json")
RECORDED: Final = 200
"""How many of the longest tests ``--record`` keeps: the rest are short enough to fill in."""


EXTRA: Final[list[Callable[[], float]]] = []
"""Counters of CPU seconds spent for this process's tests by processes it does not reap itself
(``tests/reliability/_forked.py``: children of a fork parent), added to each measurement."""


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    extra = sum(counter() for counter in EXTRA)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + extra


@contextlib.contextmanager
def measure(item: pytest.Item, directory: Path) -> Iterator[None]:
    """Around one test's setup, call and teardown: append its CPU and wall seconds."""
    cpu, wall = _cpu(), time.monotonic()
    yield
    record = {
        "test": item.nodeid,
        "cpu": round(_cpu() - cpu, 4),
        "wall": round(time.monotonic() - wall, 4),
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with (directory / f"{worker}.jsonl").open("a") as out:
        out.write(json.dumps(record) + "\n")


def _records(directory: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in directory.glob("*.jsonl")
        for line in path.read_text().split("\n")
        if line
    ]


def record(directory: Path, target: Path = DURATIONS) -> None:
    """Write the wall seconds of the :data:`RECORDED` longest tests of a run to ``target``."""
    walls: dict[str, float] = {}
    for found in _records(directory):
        name, wall = str(found["test"]), float(str(found["wall"]))
        walls[name] = max(walls.get(name, 0.0), wall)
    longest = sorted(walls, key=lambda name: -walls[name])[:RECORDED]
    seconds = {name: round(walls[name], 1) for name in sorted(longest)}
    document = {
        "about": "wall seconds of the longest tests in one run: tests/_cputime.py, ADR 0058",
        "seconds": seconds,
    }
    target.write_text(json.dumps(document, indent=1) + "\n")


def summary(directory: Path, top: int = 40) -> str:
    """The total CPU and wall seconds, then the costliest files and tests."""
    records: list[Any] = _records(directory)
    files: Counter[str] = Counter()
    walls: Counter[str] = Counter()
    for record in records:
        name = record["test"].split("::")[0]
        files[name] += record["cpu"]
        walls[name] += record["wall"]
    cpu = sum(record["cpu"] for record in records)
    wall = sum(record["wall"] for record in records)
    lines = [
        f"{len(records)} tests: {cpu:.1f} s CPU, {wall:.1f} s wall summed",
        "",
        "by file (CPU s, wall s):",
    ]
    lines += [f"{cpu:8.1f} {walls[name]:8.1f}  {name}" for name, cpu in files.most_common(top)]
    lines += ["", "by test (CPU s, wall s):"]
    costly = sorted(records, key=lambda r: -r["cpu"])[:top]
    lines += [f"{r['cpu']:8.2f} {r['wall']:8.2f}  {r['test']}" for r in costly]
    return "\n".join(lines)


if __name__ == "__main__":
    arguments = [argument for argument in sys.argv[1:] if argument != "--record"]
    if "--record" in sys.argv:
        record(Path(arguments[0]))
    print(summary(Path(arguments[0]), int(arguments[1]) if len(arguments) > 1 else 40))  # noqa: T201
