"""Per-test CPU time, for finding what makes the suite slow (``PWF_TEST_CPU=DIR``).

Wall time inflates when other work shares the machine; CPU time much less.
With ``PWF_TEST_CPU`` set to a directory, every test's CPU seconds (the test
process's own, plus those of the child processes it waited for) are written
to one JSON line per test in ``DIR/<worker>.jsonl``.  ``python
tests/_cputime.py DIR`` sums them: the total, and the costliest files and
tests.  Without the variable nothing is measured (ADR 0054).
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
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pytest

__all__ = ["VARIABLE", "measure", "summary"]

VARIABLE: Final = "PWF_TEST_CPU"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


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


def summary(directory: Path, top: int = 40) -> str:
    """The total CPU and wall seconds, then the costliest files and tests."""
    records = [
        json.loads(line)
        for path in directory.glob("*.jsonl")
        for line in path.read_text().split("\n")
        if line
    ]
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
    print(summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))  # noqa: T201
