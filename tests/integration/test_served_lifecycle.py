"""``pwf serve`` under load and across crashes: stop, kill -9, recovery, coordinators (HOST §1).

A run parked on an interaction is built in direct mode first (wall-clock
times, so the served host's clock continues from them); a coordinator then
attaches, reports its branch and starts a model turn over the socket.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from pwf.client import HostClient, HostUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._harness import ATTEMPT, NODE, Fixture
    from tests.integration._served import Served, line, pwf, rows, run_start, short_dir, until
else:
    from _harness import ATTEMPT, NODE, Fixture
    from _served import Served, line, pwf, rows, run_start, short_dir, until

pytestmark = pytest.mark.slow

SESSION = "s-1"
SHORT_LEASE_MS = 6_000
"""A lease a restart waits out in seconds; six heartbeats long, so a loaded machine keeps it."""
SHORT_HEARTBEAT_MS = 1_000


@pytest.fixture
def db() -> Iterator[Path]:
    """A database holding run-1 parked on an interaction for session s-1 (10 min budget)."""
    with short_dir() as directory:
        path = directory / "state.db"
        now = time.time_ns() // 1_000_000
        fixture = Fixture(path)
        fixture.start(at=now)
        fixture.launch(at=now)
        fixture.ready(at=now)
        fixture.ok("node.started", {"nodeId": NODE, "timeoutMs": 600_000}, attempt=ATTEMPT)
        fixture.request_interaction(at=now)
        fixture.close()
        yield path


def _step(db: Path) -> str:
    [(message,)] = rows(db, "SELECT workflow_message_id FROM workflow_messages WHERE kind = 'step'")
    return str(message)


def _attempt(db: Path) -> tuple[Any, ...]:
    [row] = rows(
        db,
        "SELECT status, deadline_at, updated_at FROM node_attempts WHERE attempt_id = ?",
        ATTEMPT,
    )
    return row


def _session(epoch: str, **members: object) -> dict[str, object]:
    return {"targetSessionId": SESSION, "coordinatorEpoch": epoch, **members}


def _watch(client: HostClient, rid: str) -> str:
    """Attach ``client`` as the coordinator of s-1; its epoch."""
    watched = client.request(
        json.loads(
            line(
                "view.session.watch",
                {"subscriptionId": "sub-1", "sessionId": SESSION, "coordinator": True},
                rid=f"{rid}-watch",
            )
        )
    )
    assert "accepted" == watched["outcome"], watched
    return str(watched["receipt"]["coordinatorEpoch"])  # type: ignore[index]


def _coordinate(client: HostClient, db: Path, rid: str) -> str:
    """Attach ``client`` as the coordinator of s-1 and report the step message on its branch."""
    epoch = _watch(client, rid)
    entries = [{"workflowMessageId": _step(db), "piSessionEntryId": "entry-1"}]
    payload = _session(epoch, entries=entries, isIdle=False, hasPendingMessages=False)
    reported = client.request(json.loads(line("workflowMessage.reportBranch", payload, rid=rid)))
    assert "accepted" == reported["outcome"], reported
    return epoch


def _start_turn(client: HostClient, db: Path, epoch: str) -> None:
    payload = _session(
        epoch, workflowMessageId=_step(db), workflowTurnId="t-1", runId="run-1", state="started"
    )
    started = client.request(json.loads(line("workflowTurn.report", payload, rid="turn-1")))
    assert "accepted" == started["outcome"], started


class _Load:
    """Clients sending run.start requests until stopped; what each got back."""

    def __init__(self, served: Served, clients: int) -> None:
        self.served = served
        self.answers: dict[str, str] = {}
        self.sent: set[str] = set()
        self.errors: list[dict[str, object]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, args=(number,)) for number in range(clients)
        ]
        for thread in self._threads:
            thread.start()

    def _work(self, number: int) -> None:
        counter = number * 100_000 + 1000
        try:
            client = self.served.client()
        except HostUnavailableError:
            return
        with client:
            while not self._stop.is_set():
                counter += 1
                self.sent.add(f"r-{counter}")
                try:
                    answer = client.request(run_start(counter, client=f"load-{number}"))
                except HostUnavailableError:
                    return
                self.answers[str(answer["requestId"])] = str(answer["outcome"])
                if answer["outcome"] not in ("accepted", "unavailable"):
                    self.errors.append(answer)

    def join(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)


def _recorded(db: Path) -> set[str]:
    return {str(row[0]) for row in rows(db, "SELECT request_id FROM host_commands")}


class TestCoordinators:
    """A coordinator belongs to its connection (DOMAIN §5.13, §10.5; HOST §1.16, §2.4)."""

    def test_another_connection_takes_over_and_a_closed_one_detaches(self, db: Path) -> None:
        """The old coordinator is fenced and its turn inactive; closing the new one detaches it."""
        served = Served(db)
        try:
            first, second = served.client(), served.client()
            old = _coordinate(first, db, "a")
            _start_turn(first, db, old)
            assert "waiting" == _attempt(db)[0]
            new = _watch(second, "b")
            assert "interrupted" == _attempt(db)[0]
            fenced = first.request(
                json.loads(
                    line(
                        "workflowMessage.reportBranch",
                        _session(old, entries=[], isIdle=False, hasPendingMessages=False),
                        rid="a-late",
                    )
                )
            )
            assert ("rejected", "Workflow session coordinator was replaced") == (
                fenced["outcome"],
                fenced["error"],
            )
            [(connection,)] = rows(db, "SELECT connection_id FROM session_coordinators")
            assert second.connection_id == connection
            second.close()
            until(lambda: not rows(db, "SELECT 1 FROM session_coordinators"), what="detach")
            detached = rows(
                db,
                "SELECT count(*) FROM events WHERE type = 'session.coordinator_detached'"
                " AND json_extract(body, '$.data.coordinatorEpoch') = ?",
                new,
            )
            assert [(1,)] == detached
            first.close()
            assert 0 == served.terminate()
        finally:
            served.close()


class TestStop:
    """SIGTERM and host.stop finish in-flight work, release, clean up, exit 0 (HOST §1.17-§1.20)."""

    def test_sigterm_under_load(self, db: Path) -> None:
        """Every answered request is recorded; the claim, the lock and the socket are gone."""
        served = Served(db)
        try:
            load = _Load(served, 6)
            until(lambda: len(load.answers) >= 60, what="load")
            served.process.send_signal(signal.SIGTERM)
            assert 0 == served.process.wait(120), served.stderr()
            load.join()
        finally:
            served.close()
        accepted = {rid for rid, outcome in load.answers.items() if outcome == "accepted"}
        unavailable = {rid for rid, outcome in load.answers.items() if outcome == "unavailable"}
        assert {"accepted", "unavailable"} >= set(load.answers.values()), load.errors
        assert accepted <= _recorded(db)
        assert not unavailable & _recorded(db)
        assert [(None, None)] == rows(db, "SELECT host_id, expires_at FROM host_state")
        state = db.parent / "host"
        assert not (state / "host.sock").exists()
        assert not (state / "host.lock.json").exists()
        assert "[pwf host] stopped" in served.stderr()
        assert 0 == pwf("verify", "--db", str(db)).returncode

    def test_host_stop_is_recorded_and_a_replay_does_not_stop_the_next_host(self, db: Path) -> None:
        """``host.stop`` answers ``{stopping:true}`` and stops; the same key later is adopted."""
        served = Served(db)
        try:
            with served.client() as client:
                stop = client.request(line("host.stop", rid="stop-1"))
            assert ("accepted", {"stopping": True}) == (stop["outcome"], stop["receipt"])
            assert 0 == served.process.wait(120)
        finally:
            served.close()
        again = Served(db)
        try:
            with again.client() as client:
                replay = client.request(line("host.stop", rid="stop-1"))
                assert "adopted" == replay["outcome"]
                status = client.request(line("host.status", rid="status-after"))
                assert "accepted" == status["outcome"]
            assert again.process.poll() is None
            assert 0 == again.terminate()
        finally:
            again.close()


class TestCrash:
    """kill -9 under load, then a restart (HOST §1.7, DOMAIN §10.6)."""

    def test_kill_under_load_then_restart(self, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Acknowledged requests survive, the chain verifies, recovery credits the downtime.

        The hosts run with a 6 s lease renewed every second (``PWF_LEASE_MS``,
        ``PWF_HEARTBEAT_MS``), so the restart waits seconds, not the default
        30 s, for the dead host's lease to run out; the recovery is the same.
        """
        monkeypatch.setenv("PWF_LEASE_MS", str(SHORT_LEASE_MS))
        monkeypatch.setenv("PWF_HEARTBEAT_MS", str(SHORT_HEARTBEAT_MS))
        served = Served(db)
        try:
            coordinator = served.client()
            epoch = _coordinate(coordinator, db, "a")
            _start_turn(coordinator, db, epoch)
            load = _Load(served, 6)
            until(lambda: len(load.answers) >= 60, what="load")
            served.kill()
            load.join()
            coordinator.close()
        finally:
            served.close()
        acknowledged = {rid for rid, outcome in load.answers.items() if outcome == "accepted"}
        assert acknowledged <= _recorded(db)
        [(heartbeat, old_host, expires)] = rows(
            db, "SELECT heartbeat_at, host_id, expires_at FROM host_state"
        )
        assert old_host is not None
        assert expires - heartbeat == SHORT_LEASE_MS, "the lease is not the one set"
        [(turn_started,)] = rows(db, "SELECT started_at FROM workflow_turns")
        before = _attempt(db)

        # The dead host's lease still guards the claim (HOST §1.8) until it runs out.
        until(lambda: time.time_ns() // 1_000_000 > expires + 50, 90, "the old lease to expire")
        again = Served(db)
        try:
            [(claimed_at,)] = rows(
                db, "SELECT started_at FROM host_state WHERE epoch = 2 AND host_id IS NOT NULL"
            )
            [(idle, cause)] = rows(
                db,
                "SELECT json_extract(body, '$.data.idleMs'), json_extract(body, '$.data.cause')"
                " FROM events WHERE type = 'attempt.deadline_shifted' ORDER BY seq DESC LIMIT 1",
            )
            assert ("host.recovery", claimed_at - max(heartbeat, turn_started)) == (cause, idle)
            status, deadline, _ = _attempt(db)
            assert ("interrupted", before[1] + idle) == (status, deadline)
            retried = min(acknowledged)
            number = int(retried.split("-")[1])
            result = pwf(
                "call",
                "--db",
                str(db),
                stdin=run_start(number, client=f"load-{number // 100_000}") + b"\n",
            )
            assert "adopted" == json.loads(result.stdout)["outcome"], result
            assert 0 == again.terminate()
        finally:
            again.close()
        assert 0 == pwf("log", "verify", "--db", str(db)).returncode
        verified = pwf("verify", "--db", str(db))
        assert 0 == verified.returncode, verified.stdout + verified.stderr
