"""Racing processes on one database: one key runs once, interleaved writers keep a whole log,
a backup taken mid-write is exactly a prefix of the live log, and prunes applied mid-write
lose nothing acknowledged.

Processes are released together: each is forked from a parent that imported
pwf already (``_forked.py``), prints ``ready`` and then blocks on stdin, so the
race is for SQLite's write lock, not for interpreter start-up.  No test
asserts on timing; how much the writers actually interleaved is a figure, not
a condition.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from pwf import canonical
from pwf.cli._options import open_store
from pwf.commands.prune import iso_utc
from pwf.events import CommandRecorded, open_body
from pwf.store.pruned import prove_pruned
from pwf.store.sqlite import SqliteStore
from pwf.verify import check

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.reliability._forked import Forked, spawn
    from tests.reliability._reliability import (
        AT,
        START,
        TIMEOUT,
        Ack,
        assert_sound,
        init,
        log_state,
        missing,
        parse_acks,
        pwf,
        request_line,
        spawn_writer,
        stop,
        wait_line,
    )
    from tests.reliability.conftest import Figures
else:
    from _forked import Forked, spawn
    from _reliability import (
        AT,
        START,
        TIMEOUT,
        Ack,
        assert_sound,
        init,
        log_state,
        missing,
        parse_acks,
        pwf,
        request_line,
        spawn_writer,
        stop,
        wait_line,
    )

pytestmark = pytest.mark.slow

PART: Final = "test_races"
RACERS: Final = 6
ROUNDS: Final = 3
LOCKSTEP: Final = 90
"""Answers each of two writers gives in strict alternation before both run freely."""


def gated_pwf(*args: str) -> Forked:
    """Start ``pwf ARGS`` in a forked process that says ``ready`` first; returns once it did."""
    process = spawn("gated", *args, stdin=subprocess.PIPE)
    try:
        assert process.stdout is not None
        assert b"ready\n" == wait_line(process.stdout)
    except BaseException:
        stop(process)
        raise
    return process


def race_one_key(db: Path, number: int) -> list[Any]:
    """RACERS processes send one (clientId, idempotencyKey) with their own request ids."""
    run = f"race-run-{number}"
    payload = {**START, "originSessionId": f"race-s-{number}"}
    lines = [
        request_line(
            "run.start", payload, rid=f"race-{number}-{racer}", key=f"race-{number}", run_id=run
        )
        for racer in range(RACERS)
    ]
    racers: list[Forked] = []
    try:
        racers.extend(gated_pwf("request", "--db", str(db), "--at", str(AT)) for _ in lines)
        for racer, line in zip(racers, lines, strict=True):
            assert racer.stdin is not None
            racer.stdin.write(line + b"\n")
        finished = [racer.communicate(timeout=300) for racer in racers]
    finally:
        for racer in racers:
            stop(racer)
    ended = [(racer.returncode, err) for racer, (_, err) in zip(racers, finished, strict=True)]
    assert [(0, b"")] * RACERS == ended
    return [_json(out.rstrip(b"\n")) for out, _ in finished]


def _json(line: bytes) -> Any:
    """A response line as plain JSON values, indexable without casts."""
    return canonical.parse_line(line)


def test_one_idempotency_key_runs_once(tmp_path: Path, figures: Figures) -> None:
    """Exactly one ``accepted``, the rest ``adopted`` with its receipt, one run reserved."""
    db = tmp_path / "state.db"
    init(db)
    for number in range(ROUNDS):
        answers = race_one_key(db, number)
        figures.add(PART, "races run")
        figures.add(PART, "processes raced", RACERS)
        outcomes = sorted(answer["outcome"] for answer in answers)
        assert ["accepted"] + ["adopted"] * (RACERS - 1) == outcomes
        assert 1 == len({canonical.encode(answer["receipt"]) for answer in answers})
        with SqliteStore(db, read_only=True) as store:
            reserved = list(store.find(type="run.reserved", run_id=f"race-run-{number}"))
            recorded = list(store.find(client_id="cli-R", idempotency_key=f"race-{number}"))
            _names, [(runs,)] = store.reader().table(
                "SELECT count(*) FROM runs WHERE run_id = ?", (f"race-run-{number}",)
            )
        entries = [open_body(item.body) for item in recorded]
        assert (1, 1) == (len(reserved), runs)
        assert 1 == [entry.type for entry in entries].count("command.recorded")
        assert 1 == len({entry.batch for entry in entries}), "the key's events span batches"
    assert_sound(db)


def cli_lines(count: int) -> list[bytes]:
    """Start, look at and cancel ``count`` runs: three batches each, all for ``cli-run-*``."""
    lines: list[bytes] = []
    for number in range(count):
        run = f"cli-run-{number}"
        start = {**START, "originSessionId": f"cli-s-{number}"}
        for operation, payload in (("run.start", start), ("run.status", {}), ("run.cancel", {})):
            rid = f"cli-{operation}-{number}"
            lines.append(request_line(operation, payload, rid=rid, run_id=run) + b"\n")
    return lines


def owners(db: Path) -> list[str]:
    """Which writer made each batch, in log order, read from the run ids' prefixes."""
    by_batch: dict[int, str] = {}
    with SqliteStore(db, read_only=True) as store:
        for entry in store.entries():
            run = entry.event.index_run_id()
            if run is not None:
                by_batch.setdefault(entry.batch, run.split("-run-")[0])
    return [by_batch[batch] for batch in sorted(by_batch)]


def interleave(writer: Forked, cli: Forked, lines: list[bytes]) -> tuple[bytes, bytes]:
    """One writer answer, one ``pwf request`` answer, and so on; returns what each printed."""
    assert writer.stdin is not None
    assert writer.stdout is not None
    assert cli.stdin is not None
    assert cli.stdout is not None
    acks, answers = b"", b""
    for line in lines:
        writer.stdin.write(b"next\n")
        acks += wait_line(writer.stdout)
        cli.stdin.write(line)
        answers += wait_line(cli.stdout)
    return acks, answers


def test_two_writers_interleave_into_one_whole_log(tmp_path: Path, figures: Figures) -> None:
    """A Host-API writer and ``pwf request`` alternate batch by batch, then race freely.

    Each commits on its own connection right after the other's commit, so a head
    read outside the transaction, or cached, would fork the chain or reuse a seq.
    """
    db = tmp_path / "state.db"
    init(db)
    lines = cli_lines(60)
    writer = spawn_writer(db, "A", steps=300, gate="step", clock=AT, errors=tmp_path / "a.err")
    try:
        cli = gated_pwf("request", "--db", str(db), "--at", str(AT))
    except BaseException:
        stop(writer)
        raise
    try:
        assert writer.stdout is not None
        assert writer.stdin is not None
        assert b"ready\n" == wait_line(writer.stdout)
        acks, answers = interleave(writer, cli, lines[:LOCKSTEP])
        writer.stdin.write(b"free\n")
        cli_out, cli_err = cli.communicate(b"".join(lines[LOCKSTEP:]), timeout=300)
        writer_out, _ = writer.communicate(timeout=300)
    finally:
        stop(writer)
        stop(cli)
    assert (0, b"") == (cli.returncode, cli_err)
    assert 0 == writer.returncode, (tmp_path / "a.err").read_text()
    replies = [_json(line) for line in (answers + cli_out).splitlines()]
    assert len(lines) == len(replies)
    assert {"accepted"} == {reply["outcome"] for reply in replies}
    acks_all = parse_acks(acks + writer_out) + [
        Ack("request", reply["requestId"], "cli-R", "", "accepted") for reply in replies
    ]
    assert [] == missing(db, acks_all)
    assert_sound(db)
    made = owners(db)
    switches = sum(a != b for a, b in itertools.pairwise(made))
    assert switches >= LOCKSTEP, "the lockstep phase did not alternate the writers"
    figures.add(PART, "races run")
    figures.add(PART, "processes raced", 2)
    figures.add(PART, "batches interleaved", switches)


def backup_record(store: SqliteStore, destination: Path) -> int:
    """The first seq of the batch that recorded the backup to ``destination``."""
    for stored in store.find(type="command.recorded", client_id="pwf-cli"):
        entry = open_body(stored.body)
        event = entry.event
        assert isinstance(event, CommandRecorded)
        receipt = canonical.parse_line(bytes(event.receipt))  # type: ignore[arg-type]
        if receipt == {"destination": str(destination)}:
            return min(item.seq for item in store.find(batch=entry.batch))
    raise AssertionError(f"no state.backup record for {destination}")


def assert_prefix_snapshot(live: Path, copy: Path) -> int:
    """The copy verifies on its own and is the live log exactly up to a seq before its record."""
    with open_store(str(copy), read_only=True) as snapshot:
        found = check(snapshot)
        assert found.ok, (found.chain, found.difference)
        head = snapshot.head()
        bodies = [item.body for item in snapshot.read()]
    with SqliteStore(live, read_only=True) as store:
        assert bodies == [item.body for item in store.read(1, head.seq)]
        assert head.seq < backup_record(store, copy)  # writers commit while it copies
    return head.seq


def test_backup_while_a_writer_writes_is_a_prefix_snapshot(
    tmp_path: Path, figures: Figures
) -> None:
    """``pwf state backup`` between a writer's batches: each copy is a whole, sound prefix."""
    db = tmp_path / "state.db"
    init(db)
    writer = spawn_writer(db, "B", steps=0, gate="0", clock=AT, errors=tmp_path / "b.err")
    copies = [tmp_path / "backups" / f"copy-{number}.db" for number in range(3)]
    try:
        assert writer.stdout is not None
        assert b"ready\n" == wait_line(writer.stdout)
        # The writer never pauses and SQLite's lock is not fair: on a loaded machine a backup
        # can wait seconds for the write lock its record takes.  Waiting is not what this
        # test is about (the next tests pin the writer's side), so the backups wait long.
        made = [
            pwf("state", "backup", str(copy), "--db", str(db), busy_timeout_ms=TIMEOUT * 1000)
            for copy in copies
        ]
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate(timeout=300)
    finally:
        stop(writer)
    assert -signal.SIGKILL == writer.returncode, (tmp_path / "b.err").read_text()
    assert [(0, b"")] * len(copies) == [(result.returncode, result.stderr) for result in made]
    assert [] == missing(db, parse_acks(out))
    assert_sound(db)
    heads = [assert_prefix_snapshot(db, copy) for copy in copies]
    assert heads == sorted(heads)
    figures.add(PART, "races run", len(copies))
    figures.add(PART, "processes raced", 1 + len(copies))
    figures.add(PART, "backups checked", len(copies))


def _latest_at(db: Path) -> int:
    """The writer's newest time: the prunes' own records carry the wall clock, not its clock."""
    with SqliteStore(db, read_only=True) as store:
        _names, [(at,)] = store.reader().table(
            "SELECT max(at) FROM events WHERE type != 'log.compacted'"
            " AND coalesce(client_id, '') != 'pwf-cli'"
        )
    return int(at)


def _wait_for_events(db: Path, count: int, writer: Forked) -> None:
    """Block until the writer has committed ``count`` more events (no timing is asserted)."""
    with SqliteStore(db, read_only=True) as store:
        start = store.head().seq
        for _ in range(TIMEOUT * 20):
            if store.head().seq >= start + count:
                return
            assert writer.poll() is None, "the writer stopped"
            time.sleep(0.05)
    raise AssertionError(f"the writer did not write {count} events")


def test_prune_while_a_writer_writes_loses_nothing(tmp_path: Path, figures: Figures) -> None:
    """Two ``pwf state prune --apply`` while a writer writes: nothing acknowledged is lost.

    Each prune's cutoff is a second before the newest event, so it removes
    runs that finished while the writer moved on.  Afterwards the live log
    verifies, each backup proves the bodies the prune after it took, the log that
    followed it, and every acknowledged answer is in the live log or, for a
    pruned run, in a backup.
    """
    db = tmp_path / "state.db"
    init(db)
    writer = spawn_writer(db, "P", steps=0, gate="0", clock=AT, errors=tmp_path / "p.err")
    backups = [tmp_path / "backups" / f"prune-{number}.sqlite" for number in range(2)]
    made = []
    drained: list[bytes] = []
    try:
        assert writer.stdout is not None
        assert wait_line(writer.stdout) == b"ready\n"
        # Read its acknowledgements as they come: a full pipe would stall the writer.
        reader = threading.Thread(target=lambda: drained.append(writer.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        for backup in backups:
            _wait_for_events(db, 300, writer)
            cutoff = iso_utc(_latest_at(db) - 1000)
            args = ("--before", cutoff, "--apply", "--backup", str(backup), "--json")
            made.append(pwf("state", "prune", "--db", str(db), *args))
        _wait_for_events(db, 50, writer)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
    finally:
        stop(writer)
    assert writer.returncode == -signal.SIGKILL, (tmp_path / "p.err").read_text()
    out = b"".join(drained)
    assert [(result.returncode, result.stderr) for result in made] == [(0, b"")] * len(made), [
        result.stdout for result in made
    ]
    reports = [json.loads(result.stdout)["report"] for result in made]
    assert all(report["applied"] for report in reports)
    acks = parse_acks(out)
    lost = missing(db, acks)
    for backup in reversed(backups):
        lost = missing(backup, lost)
    assert lost == []
    assert_sound(db)
    proved = pwf("log", "verify", "--db", str(db), "--backup", str(backups[-1]))
    assert (proved.returncode, proved.stderr) == (0, b"")
    with SqliteStore(backups[-1], read_only=True) as later:
        proof = prove_pruned(later, later.connection, backups[0])
        assert proof is not None
        assert proof.failure is None, proof.failure
    figures.add(PART, "races run", len(backups))
    figures.add(PART, "processes raced", 1 + len(backups))
    figures.add(PART, "prunes applied", len(backups))
    figures.add(PART, "runs pruned", sum(report["selectedRuns"] for report in reports))


FILL_STEPS: Final = 800
"""Runs the filling writer drives before the maintenance starts (some 8 000 events)."""
SHORT_BUSY_MS: Final = 250
"""A busy timeout far shorter than a backup of the filled log takes."""


def _filled(db: Path, tmp_path: Path) -> None:
    init(db)
    filler = spawn_writer(db, "F", steps=FILL_STEPS, gate="0", clock=AT, errors=tmp_path / "f.err")
    try:
        filler.communicate(timeout=TIMEOUT)
    finally:
        stop(filler)
    assert filler.returncode == 0, (tmp_path / "f.err").read_text()


def _through(
    db: Path, tmp_path: Path, prefix: str, busy_timeout_ms: int | None, work: Callable[[], None]
) -> list[Ack]:
    """Run ``work`` while a writer writes; kill it after; it must not have died on its own."""
    errors = tmp_path / f"{prefix}.err"
    writer = spawn_writer(
        db,
        prefix,
        steps=0,
        gate="0",
        clock=AT + 100_000_000,
        errors=errors,
        busy_timeout_ms=busy_timeout_ms,
    )
    drained: list[bytes] = []
    try:
        assert writer.stdout is not None
        assert wait_line(writer.stdout) == b"ready\n"
        reader = threading.Thread(target=lambda: drained.append(writer.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        _wait_for_events(db, 30, writer)
        work()
        _wait_for_events(db, 30, writer)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
    finally:
        stop(writer)
    assert writer.returncode == -signal.SIGKILL, errors.read_text()
    return parse_acks(b"".join(drained))


def test_writers_keep_writing_through_a_backup_and_a_prune_of_a_large_log(
    tmp_path: Path, figures: Figures
) -> None:
    """No writer is held off for the copy: a 250 ms busy timeout survives two backups.

    A backup copies a read snapshot while writers commit; only its adoption
    and its record take the write lock.  A prune holds it to seal and
    install its compacted image (ADR 0051), so the writer through it keeps
    the default busy timeout.  Every acknowledged answer is in the live log or, for a pruned
    run, in the prune's backup, and the log verifies with projections equal
    to a rebuild.
    """
    db = tmp_path / "state.db"
    _filled(db, tmp_path)
    copies = [tmp_path / "backups" / f"copy-{number}.db" for number in range(2)]
    made: list[subprocess.CompletedProcess[bytes]] = []

    def back_up() -> None:
        made.extend(pwf("state", "backup", str(copy), "--db", str(db)) for copy in copies)

    acks = _through(db, tmp_path, "B", SHORT_BUSY_MS, back_up)
    assert [(0, b"")] * len(copies) == [(result.returncode, result.stderr) for result in made]
    backup = tmp_path / "backups" / "prune.sqlite"
    pruned: list[subprocess.CompletedProcess[bytes]] = []

    def prune() -> None:
        args = ("--before", iso_utc(AT + FILL_STEPS * 50), "--apply", "--backup", str(backup))
        pruned.append(pwf("state", "prune", "--db", str(db), *args, "--json"))

    acks += _through(db, tmp_path, "P", None, prune)
    [done] = pruned
    assert (done.returncode, done.stderr) == (0, b"")
    report = json.loads(done.stdout)["report"]
    assert report["applied"]
    assert report["selectedRuns"] > 0
    assert [] == missing(backup, missing(db, acks))
    assert_sound(db)
    for copy in copies:
        assert_sound(copy)
    proved = pwf("log", "verify", "--db", str(db), "--backup", str(backup))
    assert (proved.returncode, proved.stderr) == (0, b"")
    figures.add(PART, "races run", 2)
    figures.add(PART, "processes raced", 2 + len(copies) + 1)
    figures.add(PART, "backups checked", len(copies))
    figures.add(PART, "prunes applied")
    figures.add(PART, "runs pruned", report["selectedRuns"])


TRAFFIC: Final = Path(__file__).resolve().parents[2] / "scripts" / "demo_traffic.py"
TRAFFIC_RUNS: Final = 60
"""Runs of the demo's traffic in the log a prune compacts under a writer: a few thousand events."""


def _traffic(db: Path) -> int:
    """Fill ``db`` with the demo's traffic; the cutoff that prunes the older half of its runs."""
    spec = importlib.util.spec_from_file_location("demo_traffic", TRAFFIC)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    init(db)
    traffic = module.Traffic(str(db), 5)
    for index in range(TRAFFIC_RUNS):
        traffic.run(index)
    store = traffic.store
    finished = [
        row[0]
        for row in store.reader().table(
            "SELECT finished_at FROM runs WHERE finished_at IS NOT NULL ORDER BY finished_at"
        )[1]
    ]
    store.close()
    return int(finished[len(finished) // 2]) + 1


def test_a_writer_with_the_default_busy_timeout_writes_throughout_a_prune(
    tmp_path: Path, figures: Figures
) -> None:
    """The prune seals and installs its image under the lock, nothing more (ADR 0051).

    A writer with the default busy timeout starts before the prune and
    writes until after it; it must never fail (it exits on the first
    unexpected answer, ``database is locked`` included), every answer it
    acknowledged is in the live log or, for a pruned run, in the backup,
    and the log verifies and is proven by its backup.
    """
    db = tmp_path / "state.db"
    cutoff = _traffic(db)
    events = log_state(db).seq
    backup = tmp_path / "backups" / "prune.sqlite"
    pruned: list[subprocess.CompletedProcess[bytes]] = []

    def prune() -> None:
        args = ("--before", iso_utc(cutoff), "--apply", "--backup", str(backup), "--json")
        pruned.append(pwf("state", "prune", "--db", str(db), *args))

    acks = _through(db, tmp_path, "W", None, prune)
    [done] = pruned
    assert (done.returncode, done.stderr) == (0, b""), done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["applied"]
    assert report["selectedRuns"] >= TRAFFIC_RUNS // 3
    assert acks
    assert [] == missing(backup, missing(db, acks))
    assert_sound(db)
    proved = pwf("log", "verify", "--db", str(db), "--backup", str(backup))
    assert (proved.returncode, proved.stderr) == (0, b"")
    verified = pwf("verify", "--db", str(db))
    assert verified.returncode == 0, verified.stderr
    figures.add(PART, "races run")
    figures.add(PART, "processes raced", 2)
    figures.add(PART, "prunes applied")
    figures.add(PART, "runs pruned", report["selectedRuns"])
    assert events > TRAFFIC_RUNS * 20
