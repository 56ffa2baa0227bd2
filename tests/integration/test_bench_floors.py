"""The benchmarks' floors and replays compute what their reports say, on a few requests.

Benchmarks are never timed tests; these check what the figures of issue 31
are made of (``bench/bench_durable.py``): the raw floor's grouped commits
and its chain carried across calls, and the replay of pwf's recorded
statements split into the log's writes and the projections' (each writes
only its own B-trees).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Bench = Callable[[str], Any]


def test_the_floor_groups_commits_and_carries_its_chain(bench: Bench, tmp_path: Path) -> None:
    durable, storage = bench("bench_durable"), bench("storage")
    path = tmp_path / "floor.db"
    connection = durable._floor_open(path)
    connection.execute("PRAGMA wal_autocheckpoint = 0")
    head = durable.floor_loop(connection, durable.requests(3))
    assert 6 == head[0]
    wal = durable.wal_growth(
        path,
        lambda: durable.floor_loop(connection, durable.requests(10, 3), group=4, after=head),
        10,
    )
    image = Path(f"{path}-wal").read_bytes()
    rows = connection.execute("SELECT seq, body, hash FROM events ORDER BY seq").fetchall()
    connection.close()
    assert 1 + 3 + 3 == len(storage.commits(image, 4096))  # the table, 3 alone, 4 + 4 + 2
    assert wal.pages > 0
    assert wal.btrees["log"] == 1  # the one events table
    assert list(range(1, 27)) == [seq for seq, _, _ in rows]
    prev = b""
    for _, body, digest in rows:
        prev = hashlib.sha256(prev + body).digest()
        assert prev == digest
    assert "run-12" == json.loads(rows[-2][1])["runId"]


def test_the_log_and_the_projections_replay_apart(bench: Bench, tmp_path: Path) -> None:
    durable = bench("bench_durable")
    statements = durable.recorded(tmp_path / "recorded.db", durable.requests(8))
    parts = {
        part: durable.replay_wal(tmp_path / f"{part}.db", statements, part, 4)
        for part in ("all", "log", "projections")
    }
    assert 0 == parts["log"].btrees["projections"]
    assert 0 == parts["projections"].btrees["log"]
    assert parts["log"].btrees["log"] >= 2  # the events table and its key at least
    assert parts["projections"].btrees["projections"] >= 4  # runs, run_queue, bindings, sources
    assert parts["all"].btrees["log"] == parts["log"].btrees["log"]
    assert parts["all"].btrees["projections"] == parts["projections"].btrees["projections"]
    assert parts["all"].bytes > max(parts["log"].bytes, parts["projections"].bytes)
    with pytest.raises(RuntimeError, match="commits recorded"):
        durable.replay_wal(tmp_path / "short.db", statements, "all", 5)


def test_the_append_floor_writes_the_log_rows_pwf_wrote(bench: Bench, tmp_path: Path) -> None:
    """The floor inserts the rows of the store format pwf wrote (``events`` is a view now)."""
    append, workload = bench("bench_append"), bench("workload")
    rows = append.floor_rows(workload.compact_batches(12), tmp_path)
    assert [row[3][0] for row in rows] == list(range(1, 13))
    assert all(row[0] is not None for row in rows)  # one-event batches: a batch row each
    assert all(row[4] > 0 for row in rows)
    assert append.time_floor(rows, tmp_path / "floor.sqlite", "NORMAL", head=True) > 0
    assert append.time_floor(rows, tmp_path / "bare.sqlite", "NORMAL") > 0


def test_the_command_floor_replays_the_rows_the_command_path_wrote(
    bench: Bench, tmp_path: Path
) -> None:
    command = bench("bench_command")
    rate, plan = command.time_pwf(tmp_path / "pwf.db", command._requests(6))
    assert rate > 0
    assert len(plan) == 6
    assert command.time_floor(tmp_path / "floor.db", plan) > 0
