"""A served ``state.backup`` or ``state.prune`` makes its copy off the writer thread (ADR 0114).

Before, the copy and its proof ran on the writer thread between the write
transactions that validate and record the request.  At a million events
that took a minute: every other request and the claim's renewal waited, and
the host lost its claim and stopped.  Here the copy is held on purpose;
the host decides and answers other requests meanwhile.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.errors import CommandError
from pwf.host import _backup

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.integration._hosted import Hosted
    from tests.integration._served import init, line, rows, run_start, short_dir
else:
    from _hosted import Hosted
    from _served import init, line, rows, run_start, short_dir


@pytest.fixture
def hosted() -> Iterator[tuple[Hosted, Path]]:
    with short_dir() as tmp:
        db = tmp / "state.db"
        init(db)
        host = Hosted(db)
        try:
            yield host, tmp
        finally:
            host.close()


def _held_copy(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Hold each backup's proof until the second event is set; the first says one is held."""
    copying, release = threading.Event(), threading.Event()
    real = _backup._verify_copy

    def held(*args: object, **kwargs: object) -> None:
        copying.set()
        assert release.wait(60)
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_backup, "_verify_copy", held)
    return copying, release


def test_other_requests_are_answered_while_a_backup_copies(
    hosted: tuple[Hosted, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, tmp = hosted
    copying, release = _held_copy(monkeypatch)
    destination = tmp / "backups" / "b.db"
    with host.client() as backing_up, host.client() as other:
        backing_up.send(
            line("state.backup", {"destination": str(destination)}, rid="b", client="ops")
        )
        assert copying.wait(60)
        started = time.monotonic()
        for number in range(5):
            other.send(run_start(number))
            assert other.response(f"r-{number}")[0]["outcome"] == "accepted"
        other.send(line("host.status", rid="s"))
        assert other.response("s")[0]["outcome"] == "accepted"
        assert time.monotonic() - started < 30  # not held behind the copy
        release.set()
        answer = backing_up.response("b")[0]
    assert answer["outcome"] == "accepted", answer
    assert destination.exists()
    recorded = rows(host.options.db, "SELECT outcome FROM host_commands WHERE request_id = 'b'")
    assert recorded == [("accepted",)]


def test_a_backup_that_fails_off_the_writer_is_recorded_rejected(
    hosted: tuple[Hosted, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, tmp = hosted

    def failing(*_args: object, **_kwargs: object) -> None:
        raise CommandError("the backup's log is broken at seq 3")

    monkeypatch.setattr(_backup, "_verify_copy", failing)
    destination = tmp / "b.db"
    with host.client() as client:
        client.send(line("state.backup", {"destination": str(destination)}, rid="b"))
        answer = client.response("b")[0]
        assert answer["outcome"] == "rejected"
        assert "broken at seq 3" in str(answer["error"])
        client.send(line("state.backup", {"destination": str(destination)}, rid="b"))
        again = client.response("b")[0]  # the retry adopts the recorded rejection
    assert again["outcome"] == "rejected"
    assert not destination.exists()
    recorded = rows(host.options.db, "SELECT outcome FROM host_commands WHERE request_id = 'b'")
    assert recorded == [("rejected",)]


PRUNE_CUTOFF = "1970-01-01T00:00:05.000Z"
"""Selects ``run-1``, cancelled at 4 000 (the lines' own times)."""


def _prunable(db: Path, client_line: Callable[..., bytes]) -> None:
    """Three runs; ``run-1`` finished before :data:`PRUNE_CUTOFF`."""
    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2, 3))
    lines += client_line(1, "run.cancel", at=4000) + client_line(2, "run.cancel", at=6000)
    done = CliRunner().invoke(cli, ["request", "--db", str(db)], input=lines)
    assert done.stdout.count('"outcome":"accepted"') == 5, done.stdout


def test_other_requests_are_answered_while_a_prune_backs_up(
    monkeypatch: pytest.MonkeyPatch, client_line: Callable[..., bytes]
) -> None:
    """The prune's copy and fold run off the writer; its install and record on it."""
    with short_dir() as tmp:
        db = tmp / "state.db"
        init(db)
        _prunable(db, client_line)
        host = Hosted(db)
        try:
            copying, release = _held_copy(monkeypatch)
            payload = {"before": PRUNE_CUTOFF, "apply": True, "backupPath": str(tmp / "p.db")}
            with host.client() as pruning, host.client() as other:
                pruning.send(line("state.prune", payload, rid="p", client="ops"))
                assert copying.wait(60)
                started = time.monotonic()
                other.send(run_start(10))
                assert other.response("r-10")[0]["outcome"] == "accepted"
                assert time.monotonic() - started < 30  # not held behind the copy
                release.set()
                answer = pruning.response("p")[0]
            assert answer["outcome"] == "accepted", answer
            receipt = answer["receipt"]
            assert isinstance(receipt, dict)
            assert receipt["applied"] is True
        finally:
            host.close()
        assert rows(db, "SELECT run_id FROM runs ORDER BY run_id") == [
            ("run-10",),
            ("run-2",),
            ("run-3",),
        ]
        verified = CliRunner().invoke(cli, ["verify", "--db", str(db)])
        assert verified.exit_code == 0, verified.output
        proved = CliRunner().invoke(
            cli, ["log", "verify", "--db", str(db), "--backup", str(tmp / "p.db")]
        )
        assert proved.exit_code == 0, proved.output
