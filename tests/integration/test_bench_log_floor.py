"""``bench/bench_log.py``'s write floor copies a log with runs.

The floor inserts the final projection rows of the log into fresh tables
made as a fold makes them.  The ``runs`` triggers (ADR 0094) would write the
totals row a second time beside the copy of it; the floor drops them, as the
copied rows already hold what they keep.  Benchmarks are never timed tests;
this checks only that the floor runs and copies every row.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Final

import pytest

from pwf.host import Host

ROOT: Final = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The ``bench`` package, importable from the repository root as the benchmarks run."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench")


def test_the_write_floor_copies_a_log_with_runs(bench: Any, tmp_path: Path) -> None:
    """The totals row the ``runs`` triggers keep is copied once, not written twice."""
    durable = importlib.import_module(f"{bench.__name__}.bench_durable")
    log = importlib.import_module(f"{bench.__name__}.bench_log")
    path = tmp_path / "log.db"
    store = durable.pwf_store(path)
    host = Host(store)
    for n, request in enumerate(durable.requests(5)):
        assert "accepted" == host.request(request, 1_000 + n).outcome
    store.close()
    work = tmp_path / "work"
    work.mkdir()
    seconds, events, note = log._task_floor_write(path, work)
    assert seconds > 0
    assert 10 == events
    assert int(note.split()[0]) >= 5 * 4  # each run's rows in four tables, the totals row too
