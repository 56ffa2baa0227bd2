"""A host on the shared log connects again once PostgreSQL is back (ADR 0112).

Before, a served host kept the connection PostgreSQL's restart closed:
every write after was rejected ``cannot reach PostgreSQL (the connection is
closed)`` until the host itself was restarted, and its claim's renewal
failed the same way until the claim ran out.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import psycopg
import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.client import HostClient, socket_path, wait_for_host
from pwf.errors import StoreError
from pwf.store.postgres import PostgresStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests._pg import Server as Postgres

pytestmark = pytest.mark.slow


@pytest.fixture
def restartable(postgres_server: Postgres) -> Iterator[Postgres]:
    """A server of its own that a test may stop as a crash would, kept durable."""
    server = type(postgres_server)(postgres_server.bin_dir, durable=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _outcome(client: HostClient, line: bytes, rid: str) -> str:
    client.send(line)
    answer = client.response(rid)[0]
    return f"{answer['outcome']} {answer.get('error') or ''}".strip()


def test_a_served_host_writes_again_once_postgresql_is_back(
    restartable: Postgres, tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    url = restartable.create_database()
    db = tmp_path / "local.db"
    assert 0 == CliRunner().invoke(cli, ["init", "--db", str(db), "--store", url]).exit_code
    with (tmp_path / "serve.err").open("wb") as err:
        host = subprocess.Popen(
            [sys.executable, "-m", "pwf", "serve", "--db", str(db), "--store", url],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_for_host(socket_path(db), timeout=60).close()
        with HostClient.connect(socket_path(db), timeout=60) as client:
            assert _outcome(client, client_line(1), "r-1") == "accepted"
            restartable.crash()
            assert "cannot reach PostgreSQL" in _outcome(client, client_line(2), "r-2")
            restartable.restart()
            assert _outcome(client, client_line(3), "r-3") == "accepted"
            assert _outcome(client, client_line(2), "r-2") == "accepted"  # the retry
        assert host.poll() is None
    finally:
        host.terminate()
        host.wait(60)
    verified = CliRunner().invoke(cli, ["log", "verify", "--db", str(db), "--store", url])
    assert verified.exit_code == 0, verified.output


def test_a_store_connects_again_to_the_same_log_only(restartable: Postgres) -> None:
    url = restartable.create_database()
    store = PostgresStore(url, create=True)
    try:
        head = store.head()
        restartable.crash()
        with pytest.raises(StoreError, match="cannot reach PostgreSQL"):
            store.head()
        restartable.restart()
        assert store.head() == head
        with psycopg.connect(url, autocommit=True) as other:
            other.execute("UPDATE _pwf_meta SET value = 'another' WHERE key = 'log_id'")
        store.connection.close()  # as a restart closes it
        with pytest.raises(StoreError, match="now holds another log"):
            store.head()
        with pytest.raises(StoreError, match="now holds another log"):
            store.head()  # and each call after, until the process starts again
    finally:
        store.close()


def test_a_host_that_finds_postgresql_gone_says_so_in_one_line(
    restartable: Postgres, tmp_path: Path
) -> None:
    url = restartable.create_database()
    db = tmp_path / "local.db"
    assert 0 == CliRunner().invoke(cli, ["init", "--db", str(db), "--store", url]).exit_code
    restartable.crash()
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pwf", "status", "--db", str(db), "--store", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    restartable.restart()
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1, result.stderr
    assert "cannot reach PostgreSQL" in result.stderr
    assert time.monotonic() - started < 60
