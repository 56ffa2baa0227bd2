"""Every walker of the whole log, on logs with served hosts' events, below and above every split.

A fold of at least :data:`pwf.fold.parallel.SPLIT_FROM` events gives some
read models to a forked process; a walk of at least
:data:`pwf.store.chainwalk.PARALLEL_FROM` (``DEEP_PARALLEL_FROM`` deep) events
splits the chain into seq ranges.  A served log holds tables that a read
model makes only on its first event (``host_state``), and those must cross
the split like the others (issue: ``pwf verify`` of a 25 000-event served log
failed with ``no such table: main.host_state``).  The thresholds are lowered
here so that small logs cross them; the real sizes are exercised by
``bench/bench_log.py`` and were measured by hand (ADR 0074).

Each log interleaves direct-mode traffic (every event type of a run's life:
sessions, claims, step messages, turns, interactions with submissions and
rejections, follow-ups) with served hosts that claim, answer and release, so
every event type stands on both sides of a seq split, and the host events lie
between direct ones.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pwf.fold.parallel
import pwf.store.chainwalk
from pwf.cli import cli
from pwf.commands.prune import iso_utc

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration._harness import session_history, traffic_module
    from tests.integration._hosted import Hosted
    from tests.integration._served import Served, line, run_start

    from pwf.client import HostClient
else:
    from _harness import session_history, traffic_module
    from _hosted import Hosted
    from _served import Served, line, run_start

ROOT: Final = Path(__file__).resolve().parents[2]
MODES: Final = ("one process", "split")


def _traffic(db: Path, seed: int, part: int) -> Any:
    """The demo's traffic generator on ``db``: seeded clock, and ids of their own per ``part``."""
    traffic = traffic_module().Traffic(str(db), seed)
    traffic.ids = itertools.count(part * 100_000 + 1)
    return traffic


def _answer(client: HostClient, request: bytes) -> dict[str, Any]:
    found: dict[str, Any] = client.request(request)
    return found


def _serve_some(client: HostClient, first: int, count: int) -> None:
    """``count`` run starts (``run-1001``…, apart from the traffic's) and a status read."""
    for number in range(1000 + first, 1000 + first + count):
        answer = _answer(client, run_start(number))
        assert answer["outcome"] == "accepted", answer
    assert _answer(client, line("host.status", rid=f"status-{first}"))["outcome"] == "accepted"


def _mode(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Every split threshold below (``split``) or above (``one process``) any log here."""
    low = mode == "split"
    monkeypatch.setattr(pwf.fold.parallel, "SPLIT_FROM", 1 if low else 10**9)
    monkeypatch.setattr(pwf.fold.parallel, "processors", lambda: 2)
    monkeypatch.setattr(pwf.store.chainwalk, "PARALLEL_FROM", 2 if low else 10**9)
    monkeypatch.setattr(pwf.store.chainwalk, "DEEP_PARALLEL_FROM", 2 if low else 10**9)


def _pwf(*args: str) -> Any:
    """``pwf ARGS`` in this process, so the thresholds set here hold in its forks too."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _digest(db: Path) -> str:
    result = _pwf("digest", str(db), "--json")
    assert result.exit_code == 0, result.output
    found: str = json.loads(result.output)["all"]
    return found


def _types(db: Path, *, upto: int | None = None, after: int | None = None) -> set[str]:
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute(
            "SELECT DISTINCT type FROM events WHERE seq <= ? AND seq > ?",
            (upto if upto is not None else 2**62, after if after is not None else 0),
        ).fetchall()
    finally:
        connection.close()
    return {row[0] for row in rows}


def _head(db: Path) -> int:
    connection = sqlite3.connect(db)
    try:
        found: int = connection.execute("SELECT max(seq) FROM events").fetchone()[0]
    finally:
        connection.close()
    return found


def _session_history(db: Path) -> None:
    """A session's coordinator, branch and turn reports, a cleared terminal, a waiting run."""
    fx, _ = session_history(db)
    fx.close()


def _direct(db: Path, seed: int, part: int, runs: range) -> None:
    traffic = _traffic(db, seed, part)
    for index in runs:
        traffic.run(index)
    traffic.store.close()


def _served(db: Path, first: int, count: int) -> None:
    served = Served(db)
    try:
        with contextlib.closing(served.client()) as client:
            _serve_some(client, first, count)
        assert served.terminate() == 0, served.stderr()
    finally:
        served.close()


@pytest.fixture(scope="module")
def served_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session, direct traffic, a served host, traffic, a second served host, traffic."""
    folder = Path(tempfile.mkdtemp(prefix="pwf-", dir="/tmp"))
    db = folder / "state.db"
    _session_history(db)
    _direct(db, 5, 1, range(10, 14))
    _served(db, 1, 6)
    _direct(db, 6, 2, range(20, 24))
    _served(db, 20, 4)
    _direct(db, 7, 3, range(30, 32))
    kept = tmp_path_factory.mktemp("served") / "state.db"
    kept.write_bytes(db.read_bytes())
    shutil.rmtree(folder)
    return kept


@pytest.fixture
def log(served_log: Path, tmp_path: Path) -> Path:
    """A fresh copy of the served log for one test."""
    copy = tmp_path / "state.db"
    copy.write_bytes(served_log.read_bytes())
    return copy


def test_the_log_has_host_events_between_direct_traffic(served_log: Path) -> None:
    """The fixture is what the walkers must cross: host events with traffic on both sides."""
    connection = sqlite3.connect(served_log)
    try:
        claims = [
            row[0]
            for row in connection.execute(
                "SELECT seq FROM events WHERE type = 'host.claimed' ORDER BY seq"
            )
        ]
    finally:
        connection.close()
    assert len(claims) == 2
    head = _head(served_log)
    middle = claims[0]
    before, after = _types(served_log, upto=middle - 1), _types(served_log, after=middle)
    traffic = {
        "run.started", "run.claimed", "worker.message_recorded",
        "attempt.started", "interaction.requested", "submission.recorded", "interaction.settled",
        "run.finished", "command.recorded",
    }  # fmt: skip
    assert traffic <= before
    assert traffic <= after
    sessions = {"session.coordinator_attached", "session.branch_reported", "turn.started"}
    assert sessions <= before
    assert {"host.claimed", "host.released"} <= _types(served_log, after=middle - 1)
    assert claims[1] < head


@pytest.mark.parametrize("mode", MODES)
def test_verify_rebuild_replay_and_digest_agree(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """``verify``, ``rebuild``, ``replay`` and ``digest``, either side of each split."""
    _mode(monkeypatch, mode)
    live = _digest(log)
    checked = _pwf("verify", "--db", str(log), "--json")
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.output)["ok"] is True
    chain = _pwf("log", "verify", "--db", str(log))
    assert chain.exit_code == 0, chain.output
    head = _head(log)
    for until in (head, head // 2):
        out = tmp_path / f"replay-{until}.db"
        replayed = _pwf("replay", "--db", str(log), "--until", str(until), "--out", str(out))
        assert replayed.exit_code == 0, replayed.output
        assert _pwf("log", "verify", "--db", str(out)).exit_code == 0
        if until == head:
            assert _digest(out) == live
    rebuilt = _pwf("rebuild", "--db", str(log))
    assert rebuilt.exit_code == 0, rebuilt.output
    assert _digest(log) == live


@pytest.mark.parametrize("mode", MODES)
def test_prune_compaction_and_its_proof(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A prune compacts the served log, its backup proves, and the result verifies and rebuilds."""
    _mode(monkeypatch, mode)
    backup = tmp_path / "backup.db"
    pruned = _pwf(
        "state", "prune", "--db", str(log), "--before", iso_utc(1_900_000_000_000),
        "--apply", "--backup", str(backup), "--json",
    )  # fmt: skip
    assert pruned.exit_code == 0, pruned.output
    proved = _pwf("log", "verify", "--db", str(log), "--backup", str(backup))
    assert proved.exit_code == 0, proved.output
    checked = _pwf("verify", "--db", str(log))
    assert checked.exit_code == 0, checked.output
    live = _digest(log)
    assert _pwf("rebuild", "--db", str(log)).exit_code == 0
    assert _digest(log) == live


@contextlib.contextmanager
def _hosted(db: Path, now: int) -> Iterator[Hosted]:
    hosted = Hosted(db, clock=lambda: now)
    try:
        yield hosted
    finally:
        hosted.close()


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(min_value=0, max_value=2**16),
    plan=st.lists(st.sampled_from(["traffic", "served"]), min_size=1, max_size=5),
)
def test_a_random_log_folds_to_the_same_digests_split_and_unsplit(
    seed: int, plan: list[str]
) -> None:
    """Random direct traffic and served hosts: split and unsplit replays give the same digests."""
    with (
        tempfile.TemporaryDirectory(prefix="pwf-", dir="/tmp") as scratch,
        pytest.MonkeyPatch.context() as patch,
    ):
        db = Path(scratch) / "state.db"
        assert _pwf("init", "--db", str(db)).exit_code == 0
        now = 1_785_600_010_000
        for step, what in enumerate(plan):
            if what == "traffic":
                traffic = _traffic(db, seed + step, step)
                traffic.now = now
                for index in range(2):
                    traffic.run(step * 10 + index)
                now = traffic.now
                traffic.store.close()
            else:
                with _hosted(db, now) as hosted, contextlib.closing(hosted.client()) as client:
                    _serve_some(client, step * 10, 2)
                now += 1_000
        digests = []
        for mode in MODES:
            _mode(patch, mode)
            out = Path(scratch) / f"{mode}.db"
            replayed = _pwf("replay", "--db", str(db), "--until", str(_head(db)), "--out", str(out))
            assert replayed.exit_code == 0, replayed.output
            digests.append(_digest(out))
        assert digests == [_digest(db)] * 2
