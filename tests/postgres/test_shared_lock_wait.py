"""A write to the shared log waits for its lock at most the busy timeout, as a SQLite file's does.

ADR 0120.  Before, a host or a ``pwf request`` on the shared log waited for
the log's advisory lock for as long as another session held it: a host
stopped in the middle of a write (a debugger, a frozen machine, a network
link PostgreSQL had not seen die) held every other host's writes, and a
served host's heartbeat, for as long as it stayed so.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import psycopg
import pytest

from pwf.store.postgres.schema import LOCK_KEY

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.postgres._served_shared import served_log, short_lease_host, started
    from tests.postgres.conftest import Hosts
else:
    from _served_shared import served_log, short_lease_host, started


@pytest.fixture
def held(hosts: Hosts) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another session holding the log's write lock in an open transaction."""
    holder = psycopg.connect(hosts.url, autocommit=True)
    holder.execute("BEGIN")
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    try:
        yield holder
    finally:
        holder.close()


def _head(url: str) -> object:
    with psycopg.connect(url) as connection:
        return connection.execute("SELECT max(seq) FROM events").fetchone()


def _request(hosts: Hosts, line: bytes) -> subprocess.CompletedProcess[bytes]:
    """``pwf request`` as host ``a``, in a process of its own that may not wait past 60 s."""
    return subprocess.run(
        [sys.executable, "-m", "pwf", "request", "--db", str(hosts.db("a")), "--store", hosts.url],
        input=line,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_a_request_waits_for_the_lock_the_busy_timeout_then_is_refused(
    hosts: Hosts,
    held: psycopg.Connection[tuple[object, ...]],
    client_line: Callable[..., bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused busy in one line, nothing written; once the lock is free the line is accepted."""
    monkeypatch.setenv("PWF_BUSY_TIMEOUT_MS", "300")
    before = _head(hosts.url)
    began = time.monotonic()
    refused = _request(hosts, client_line(1))
    waited = time.monotonic() - began
    assert refused.returncode == 3, refused.stderr
    lines = refused.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert "the log is locked by another writer" in lines[0]
    assert 0.3 <= waited < 30
    assert _head(hosts.url) == before
    held.execute("ROLLBACK")
    accepted = _request(hosts, client_line(1))
    assert (accepted.returncode, accepted.stdout.count(b'"outcome":"accepted"')) == (0, 1)


def test_a_served_host_keeps_its_claim_through_a_held_lock(
    hosts: Hosts, client_line: Callable[..., bytes]
) -> None:
    """Its heartbeats are refused busy while the lock is held, and renew once it is free."""
    with short_lease_host(hosts, busy_ms=200) as host:
        holder = psycopg.connect(hosts.url, autocommit=True)
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        deadline = time.monotonic() + 20
        while "host claim renewal failed" not in served_log(hosts).read_text():
            assert time.monotonic() < deadline, served_log(hosts).read_text()
            time.sleep(0.1)
        holder.close()
        time.sleep(4)  # past the 3 s lease: only the renewals after the lock kept the claim
        started(hosts.db("served"), client_line(1))
        assert host.poll() is None
    logged = served_log(hosts).read_text()
    assert "the log is locked by another writer" in logged
    assert "Traceback" not in logged
