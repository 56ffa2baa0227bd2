"""Eight processes append to one database at once; every acknowledged batch survives intact.

Each worker is a fresh interpreter (``sys.executable``) running a small inline
script.  Workers open the store, report ``ready`` and block on stdin; the test
releases them all together, so they race for the write lock without sleeps.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import msgspec

from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

WORKERS = 8
BATCHES = 40

WORKER = r"""
import json
import sys

from pwf import canonical
from pwf.events import Actor, Cause, CommandRecorded
from pwf.store.sqlite import SqliteStore

db, worker, batches, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
store = SqliteStore(db, busy_timeout_ms=120_000)
print("ready", flush=True)
sys.stdin.readline()
acked = []
for number in range(batches):
    request = f"req-w{worker}-b{number}"
    events = [
        CommandRecorded(
            request_id=f"{request}-e{index}",
            client_id=f"client-{worker}",
            operation="run.start",
            idempotency_key=f"idem-w{worker}-b{number}-e{index}",
            fingerprint=canonical.hex_digest([worker, number, index]),
            outcome="accepted",
            run_id=f"run-{worker}",
            revision=number,
            receipt=canonical.raw({"worker": worker, "batch": number, "note": "h\u00e9", "x": 0.1}),
        )
        for index in range(1 + (worker + number) % 3)
    ]
    sealed = store.append(
        events,
        at=1_764_403_200_000 + number,
        actor=Actor(type="session", id=f"worker-{worker}"),
        cause=Cause(operation="run.start", request_id=request, client_id=f"client-{worker}"),
    )
    acked.append(
        {
            "request": request,
            "seqs": [item.entry.seq for item in sealed],
            "batch": [item.entry.batch for item in sealed],
            "bodies": [item.body.decode() for item in sealed],
        }
    )
store.close()
with open(out, "w", encoding="utf-8") as stream:
    json.dump(acked, stream)
"""


class Acked(msgspec.Struct):
    """One batch as its worker saw it acknowledged."""

    request: str
    seqs: list[int]
    batch: list[int]
    bodies: list[str]


def _run_workers(db: Path, results: Path) -> list[list[Acked]]:
    """Start every worker, release them together, wait, and load what each was acknowledged."""
    outs = [results / f"worker-{worker}.json" for worker in range(WORKERS)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(worker), str(BATCHES), str(out)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker, out in enumerate(outs)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert "ready\n" == proc.stdout.readline()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        finished = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert [(0, "")] * WORKERS == [
        (proc.returncode, stderr) for proc, (_, stderr) in zip(procs, finished, strict=True)
    ]
    return [msgspec.json.decode(out.read_bytes(), type=list[Acked]) for out in outs]


def test_concurrent_appends_keep_every_acknowledged_batch(tmp_path: Path) -> None:
    """Racing writers get gapless seqs, one batch each, and a chain that verifies."""
    db = tmp_path / "pwf.db"
    with SqliteStore(db, create=True):
        pass
    acked = _run_workers(db, tmp_path)
    batches = [batch for worker in acked for batch in worker]
    total = sum(len(batch.seqs) for batch in batches)

    with SqliteStore(db, read_only=True) as store:
        report = store.verify()
        stored = {item.seq: item.body.decode() for item in store.read()}
        assert (True, total) == (report.ok, report.events)
        assert (total, WORKERS * BATCHES) == (store.head().seq, store.head().batch)
        assert list(range(1, total + 1)) == list(stored)
        for batch in batches:
            assert batch.bodies == [stored[seq] for seq in batch.seqs]
            assert list(range(batch.seqs[0], batch.seqs[0] + len(batch.seqs))) == batch.seqs
            assert batch.seqs == [item.seq for item in store.find(request_id=batch.request)]

    assert WORKERS * BATCHES == len(batches)
    assert list(range(1, WORKERS * BATCHES + 1)) == sorted(batch.batch[0] for batch in batches)
    assert all(len(set(batch.batch)) == 1 for batch in batches)
    for worker in acked:
        firsts = [batch.seqs[0] for batch in worker]
        assert sorted(firsts) == firsts
