"""A writer that stops while it holds the shared log's lock is ended by PostgreSQL (ADR 0121).

A write transaction on the shared log may wait on its own process between
two statements at most the busy timeout (never less than a second).  Past
it PostgreSQL ends the session, rolls its transaction back and frees the
lock: a process stopped or frozen in the middle of a write, or a network
link gone, no longer holds every other host's writes and heartbeats.  An
operator's step that works between its statements under the lock (a
prune's check of its backup) lifts the limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from pwf.errors import StoreError
from pwf.events import Actor
from pwf.store.postgres import PostgresStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.postgres._served_shared import served_log, short_lease_host, started
    from tests.postgres.conftest import Hosts
else:
    from _served_shared import served_log, short_lease_host, started

AT = 1_764_403_200_000
ACTOR = Actor(type="session", id="session-main")
_HOLDER = """
import sys, time
from pwf.store.postgres import PostgresStore
with PostgresStore(sys.argv[1], busy_timeout_ms=500) as log:
    try:
        with log.transaction() as tx:
            print("held", flush=True)
            time.sleep(float(sys.argv[2]))
    except Exception as error:
        print(error, flush=True)
"""


def _events(url: str) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT count(*) FROM events").fetchone()
    assert row is not None
    return int(row[0])


def _stopped_under_the_lock(store: PostgresStore, command: Any, while_stopped: Any) -> float:
    """Append in a write transaction, then wait in it for ``while_stopped``; how long that took."""
    with store.transaction() as tx:
        tx.append([command(1)], at=AT, actor=ACTOR)
        began = time.monotonic()
        while_stopped()  # this process sends PostgreSQL nothing meanwhile: it is stopped
        return time.monotonic() - began


def test_a_writer_stopped_under_the_lock_is_ended_and_the_others_write(
    hosts: Hosts, client_line: Callable[..., bytes], command: Any
) -> None:
    """The others' writes go through within the limit; the stopped one's is refused, unwritten."""
    before = _events(hosts.url)

    def other_write() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "pwf", "request", "--db", str(hosts.db("b")),
             "--store", hosts.url],
            input=client_line(1),
            capture_output=True,
            timeout=60,
            check=False,
        )  # fmt: skip

    answered: list[subprocess.CompletedProcess[bytes]] = []
    with PostgresStore(hosts.url, busy_timeout_ms=300) as stopped:  # held idle at most 1 s
        with pytest.raises(StoreError) as ended:
            _stopped_under_the_lock(stopped, command, lambda: answered.append(other_write()))
        [done] = answered
        assert (done.returncode, done.stdout.count(b'"outcome":"accepted"')) == (0, 1), done
        assert "held the log's lock idle too long; nothing of it was written" in str(ended.value)
        assert len(str(ended.value).splitlines()) == 1
        assert _events(hosts.url) == before + 2  # the other's run.start and its record only
        with stopped.transaction() as again:  # the next write connects anew
            again.append([command(2)], at=AT, actor=ACTOR)
    assert _events(hosts.url) == before + 3
    assert hosts("b", "log", "verify").exit_code == 0


def test_a_served_host_outlives_a_writer_stopped_under_the_lock_past_its_lease(
    hosts: Hosts, client_line: Callable[..., bytes]
) -> None:
    """Before, the host's renewals were refused busy until its 3 s lease ran out: exit 3."""
    with short_lease_host(hosts, busy_ms=500) as host:
        holder = subprocess.run(
            [sys.executable, "-c", _HOLDER, hosts.url, "6"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        out = holder.stdout.decode()
        assert out.startswith("held\n"), holder
        assert "held the log's lock idle too long" in out, out
        assert host.poll() is None, served_log(hosts).read_text()
        started(hosts.db("served"), client_line(1))
    logged = served_log(hosts).read_text()
    assert "host claim lost" not in logged
    assert "Traceback" not in logged


def test_a_prune_that_works_under_the_lock_longer_than_the_limit_is_not_ended(
    hosts: Hosts,
    client_line: Callable[..., bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its backup's hash under the lock takes 1.5 s, past the 1 s limit: it lifts the limit."""
    from pwf.host import prune  # noqa: PLC0415 - this test's

    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2))
    lines += client_line(1, "run.cancel", at=4000)
    assert hosts("a", "request", stdin=lines).exit_code == 0
    monkeypatch.setenv("PWF_BUSY_TIMEOUT_MS", "200")
    hashed: Callable[[Path], str] = vars(prune)["file_sha256"]

    def slow(path: Path) -> str:
        time.sleep(1.5)
        return hashed(path)

    monkeypatch.setattr(prune, "file_sha256", slow)
    done = hosts(
        "a", "state", "prune", "--before", "1970-01-01T00:00:05.000Z", "--apply",
        "--backup", str(tmp_path / "b.sqlite"), "--at", "9000", "--json",
    )  # fmt: skip
    assert json.loads(done.stdout)["outcome"] == "accepted", done.output
    assert hosts("b", "log", "verify").exit_code == 0
