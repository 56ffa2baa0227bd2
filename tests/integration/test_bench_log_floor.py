"""``bench/bench_log.py``'s write floor copies a log with runs.

The floor inserts the final projection rows of the log into fresh tables
made as a fold makes them.  The ``runs`` triggers (ADR 0094) would write the
totals row a second time beside the copy of it; the floor drops them, as the
copied rows already hold what they keep.  Benchmarks are never timed tests;
this checks only that the floor runs and copies every row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pwf.host import Host

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def test_the_write_floor_copies_a_log_with_runs(
    bench: Callable[[str], Any], tmp_path: Path
) -> None:
    """The totals row the ``runs`` triggers keep is copied once, not written twice."""
    durable, log = bench("bench_durable"), bench("bench_log")
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
