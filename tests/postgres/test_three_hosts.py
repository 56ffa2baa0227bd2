"""Three hosts, separate processes with their own projection files, on one shared log.

They race the same client + key, start again and again while the others
write, report turns for one session, and one is killed in the middle of its
commands.  Afterwards no request was executed twice, the log verifies, and
the three hosts' digests are identical and equal a rebuild of the shared log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

import psycopg
import pytest
from click.testing import CliRunner

from pwf import canonical
from pwf.cli import cli
from pwf.diff import digest_database

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration._harness import Fixture, coordinate, step_message
    from tests.postgres.conftest import Hosts
else:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))  # noqa: PTH118, PTH120
    from _harness import Fixture, coordinate, step_message

pytestmark = pytest.mark.slow

HOSTS: Final = ("a", "b", "c")
AT: Final = 1_764_403_200_000
PWF: Final = (sys.executable, "-m", "pwf")


def _start(hosts: Hosts, name: str, lines: bytes, at: int) -> subprocess.Popen[bytes]:
    """Host ``name`` as its own process, answering ``lines`` (``pwf request``)."""
    source = hosts.folder / f"{name}-{at}-{len(lines)}.jsonl"
    source.write_bytes(lines)
    with source.open("rb") as stdin:
        return subprocess.Popen(
            [*PWF, "request", "--db", str(hosts.db(name)), "--store", hosts.url, "--at", str(at)],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def _finish(process: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    out, err = process.communicate(timeout=120)
    assert 0 == process.returncode, err.decode()
    return [json.loads(line) for line in out.splitlines()]


def _turn(epoch: str, message: str, number: int, state: str) -> bytes:
    payload: dict[str, object] = {
        "targetSessionId": "s-1",
        "coordinatorEpoch": epoch,
        "workflowMessageId": message,
        "workflowTurnId": f"turn-{number}",
        "runId": "run-1",
        "state": state,
    }
    if state == "ended":
        payload["stopReason"] = "stop"
        payload["responseSessionEntryId"] = None
    request = {
        "schema": "pi-workflows.client.v1",
        "type": "request",
        "requestId": f"turn-{number}-{state}",
        "clientId": "cli-T",
        "idempotencyKey": f"turn-{number}-{state}",
        "operation": "workflowTurn.report",
        "payload": payload,
    }
    return canonical.encode(request) + b"\n"


def _recorded(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT request_id, client_id, idempotency_key FROM _pwf_recorded"
        ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def _accepted_starts(url: str) -> Counter[str]:
    """How many times each run was started, from the log's own events."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT run_id FROM events WHERE type = 'run.reserved'"
        ).fetchall()
    return Counter(str(row[0]) for row in rows)


@pytest.fixture
def session_fixture(hosts: Hosts, monkeypatch: pytest.MonkeyPatch) -> Fixture:
    """Fixture F built through host ``a``: ``run-1`` waiting, with a coordinator on ``s-1``."""
    with monkeypatch.context() as patched:
        patched.setenv("PWF_STORE", hosts.url)
        return Fixture.f(hosts.db("a"))


def test_three_hosts_on_one_log(
    hosts: Hosts,
    session_fixture: Fixture,
    client_line: Callable[..., bytes],
    tmp_path: Path,
) -> None:
    """Overlapping requests from three host processes: once each, one log, one state."""
    epoch = coordinate(session_fixture)
    message = step_message(session_fixture)
    session_fixture.close()
    # The same client + key from all three at once: one accepted, two adopted.
    racing = [_start(hosts, name, client_line(100), AT + 1) for name in HOSTS]
    outcomes = sorted(_finish(process)[0]["outcome"] for process in racing)
    assert ["accepted", "adopted", "adopted"] == outcomes
    # Rounds of overlapping runs and turns for one session; host c is killed mid-way once.
    for round_number in range(2):
        processes = {}
        for index, name in enumerate(HOSTS):
            first = 200 + 10 * round_number + 3 * index
            lines = b"".join(client_line(n) for n in range(first, first + 8))
            turns = b"".join(
                _turn(epoch, message, 10 * round_number + n, state)
                for n in range(3)
                for state in ("started", "ended")
            )
            processes[name] = _start(hosts, name, turns + lines, AT + 10 + round_number)
        if round_number == 1:
            time.sleep(0.3)
            processes["c"].send_signal(signal.SIGKILL)
            processes["c"].communicate(timeout=60)
            del processes["c"]
        for process in processes.values():
            _finish(process)
    # Host c comes back and retries everything it was sent in the killed round.
    retried = b"".join(client_line(n) for n in range(216, 224))
    assert {"accepted", "adopted"} >= {
        answer["outcome"] for answer in _finish(_start(hosts, "c", retried, AT + 11))
    }
    recorded = _recorded(hosts.url)
    assert len(recorded) == len({(client, key) for _, client, key in recorded})
    assert [] == [run for run, times in _accepted_starts(hosts.url).items() if times != 1]
    for name in HOSTS:
        assert 0 == hosts(name, "query", "runs").exit_code
    verified = hosts("a", "log", "verify", "--json")
    assert (0, True) == (verified.exit_code, json.loads(verified.output)["ok"])
    rebuilt = str(tmp_path / "rebuilt.db")
    exported = hosts("b", "log", "export").stdout_bytes
    loaded = CliRunner().invoke(cli, ["log", "import", "--db", rebuilt], input=exported)
    assert 0 == loaded.exit_code, loaded.output
    digests = [digest_database(str(hosts.db(name))).all for name in HOSTS]
    assert [digest_database(rebuilt).all] * 3 == digests
