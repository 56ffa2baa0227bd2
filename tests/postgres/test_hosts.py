"""Several hosts on one shared log: selecting it, catching up, idempotency, export and import."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.diff import digest_database
from pwf.errors import StoreError
from pwf.store import mirror
from pwf.store.postgres import PostgresStore, PostgresTransaction

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.postgres.conftest import Hosts

AT = 1_764_403_200_000


def _pg_count(url: str, sql: str) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def _local_seq(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        return int(connection.execute("SELECT seq FROM _pwf_head").fetchone()[0])
    finally:
        connection.close()


def _answers(result: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.output.splitlines()]


class TestInit:
    """``pwf init --store`` makes the schema once and this host's local file."""

    def test_init_twice_changes_nothing(self, hosts: Hosts) -> None:
        """A second init, from this or another host, keeps the log."""
        again = hosts("b", "init", "--json")
        assert 0 == again.exit_code
        report = json.loads(again.output)
        assert ("pwf.store.v2", 0, str(hosts.db("b"))) == (
            report["format"],
            report["events"],
            report["db"],
        )
        assert 1 == _pg_count(hosts.url, "SELECT count(*) FROM _pwf_meta WHERE key = 'format'")

    def test_pwf_store_from_the_environment(
        self, hosts: Hosts, monkeypatch: pytest.MonkeyPatch, client_line: Callable[..., bytes]
    ) -> None:
        """``$PWF_STORE`` selects the shared log when ``--store`` is not given."""
        monkeypatch.setenv("PWF_STORE", hosts.url)
        monkeypatch.setenv("PWF_DB", str(hosts.db("env")))
        result = CliRunner().invoke(cli, ["request", "--at", str(AT)], input=client_line(1))
        assert (0, "accepted") == (result.exit_code, _answers(result)[0]["outcome"])
        assert 2 <= _pg_count(hosts.url, "SELECT count(*) FROM events")

    def test_a_store_that_is_not_a_url_is_refused(self, tmp_path: Path) -> None:
        """``--store`` takes a postgresql:// URL; anything else is one line and exit 2."""
        result = CliRunner().invoke(cli, ["query", "runs", "--store", str(tmp_path / "x.db")])
        assert 2 == result.exit_code
        assert "is not a postgresql:// URL" in result.output

    def test_a_file_of_another_log_is_refused(self, hosts: Hosts, postgres_server: Any) -> None:
        """A local file that mirrors one log cannot be used with another."""
        other = postgres_server.create_database()
        PostgresStore(other, create=True).close()
        result = CliRunner().invoke(
            cli, ["query", "runs", "--db", str(hosts.db("a")), "--store", other]
        )
        assert 3 == result.exit_code
        assert "mirrors another log" in result.output


class TestCatchUp:
    """Each host folds what the others appended before it reads or decides."""

    def test_a_read_on_another_host_sees_the_request(
        self, hosts: Hosts, client_line: Callable[..., bytes]
    ) -> None:
        """Host b lists the run host a started; with --no-catch-up it reads what it had."""
        assert 0 == hosts("b", "init").exit_code
        started = hosts("a", "request", "--at", str(AT), stdin=client_line(1))
        assert "accepted" == _answers(started)[0]["outcome"]
        stale = hosts("b", "query", "runs", "--json", "--no-catch-up")
        assert [] == json.loads(stale.output)
        fresh = hosts("b", "query", "runs", "--json")
        assert ["run-1"] == [row["run_id"] for row in json.loads(fresh.output)]

    def test_same_client_and_key_on_two_hosts_run_once(
        self, hosts: Hosts, client_line: Callable[..., bytes]
    ) -> None:
        """The second host adopts the first host's outcome: one record, one run."""
        first = hosts("a", "request", "--at", str(AT), stdin=client_line(1))
        second = hosts("b", "request", "--at", str(AT + 5), stdin=client_line(1))
        assert ["accepted", "adopted"] == [
            _answers(first)[0]["outcome"],
            _answers(second)[0]["outcome"],
        ]
        assert 1 == _pg_count(
            hosts.url, "SELECT count(*) FROM events WHERE type = 'command.recorded'"
        )

    def test_digests_agree_and_equal_a_rebuild(
        self, hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
    ) -> None:
        """After interleaved writes the hosts' projections equal a rebuild of the shared log."""
        for number, name in enumerate(["a", "b", "c", "a", "b"], start=1):
            result = hosts(name, "request", "--at", str(AT + number), stdin=client_line(number))
            assert 0 == result.exit_code, result.output
        for name in "abc":
            assert 0 == hosts(name, "query", "runs").exit_code
        exported = hosts("a", "log", "export")
        rebuilt = tmp_path / "rebuilt.db"
        loaded = CliRunner().invoke(
            cli, ["log", "import", "--db", str(rebuilt)], input=exported.stdout_bytes
        )
        assert 0 == loaded.exit_code, loaded.output
        expected = digest_database(str(rebuilt)).all
        assert [expected] * 3 == [digest_database(str(hosts.db(name))).all for name in "abc"]
        verified = hosts("c", "log", "verify", "--json")
        assert (0, True) == (verified.exit_code, json.loads(verified.output)["ok"])
        checked = hosts("b", "verify")
        assert 0 == checked.exit_code, checked.output


SENT = 4
"""Rows per round trip of a long import, in the tests below."""


class RoundTrips(list[int]):
    """How many rows each round trip of a transaction sent to the shared log."""

    failing: int | None = None
    """The round trip that fails, as a lost connection would."""


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    """Round trips of :data:`SENT` rows, each recorded (and, when asked, one failing)."""
    sent = RoundTrips()
    write_rows = PostgresTransaction.write_rows

    def counted(self: PostgresTransaction, rows: Any, **options: Any) -> None:
        sent.append(len(rows))
        if len(sent) == sent.failing:
            raise StoreError("the connection to the shared log was lost")
        write_rows(self, rows, **options)

    monkeypatch.setattr(mirror, "_SENT", SENT)
    monkeypatch.setattr(PostgresTransaction, "write_rows", counted)
    return sent


@pytest.fixture
def seven_runs(tmp_path: Path, client_line: Callable[..., bytes]) -> bytes:
    """The exported log of a SQLite database where seven runs were started."""
    return _exported(str(tmp_path / "alone.db"), client_line, 7)


def _exported(db: str, client_line: Callable[..., bytes], runs: int) -> bytes:
    """The log of a new SQLite database at ``db`` once ``runs`` runs were started, exported."""
    runner = CliRunner()
    assert 0 == runner.invoke(cli, ["init", "--db", db]).exit_code
    lines = b"".join(client_line(n) for n in range(1, runs + 1))
    runner.invoke(cli, ["request", "--db", db, "--at", str(AT)], input=lines)
    exported: bytes = runner.invoke(cli, ["log", "export", "--db", db]).stdout_bytes
    return exported


class TestMoving:
    """A SQLite log moves into PostgreSQL and back, byte for byte."""

    def test_sqlite_to_postgresql_and_back(
        self, pg_url: str, tmp_path: Path, client_line: Callable[..., bytes]
    ) -> None:
        """Export from SQLite, import into PostgreSQL, export again: the same bytes."""
        runner = CliRunner()
        alone = str(tmp_path / "alone.db")
        original = _exported(alone, client_line, 3)
        host = ["--db", str(tmp_path / "h.db"), "--store", pg_url]
        imported = runner.invoke(cli, ["log", "import", *host], input=original)
        assert 0 == imported.exit_code, imported.output
        back = runner.invoke(cli, ["log", "export", *host]).stdout_bytes
        assert original == back
        with psycopg.connect(pg_url) as connection:
            bodies = [
                bytes(row[0]) for row in connection.execute("SELECT body FROM events ORDER BY seq")
            ]
        assert original == b"".join(body + b"\n" for body in bodies)
        assert digest_database(alone).all == digest_database(str(tmp_path / "h.db")).all

    def test_a_long_import_is_sent_a_few_rows_at_a_time(
        self, pg_url: str, tmp_path: Path, seven_runs: bytes, round_trips: RoundTrips
    ) -> None:
        """The rows go in round trips of ``_SENT``, not all at once, and make the same log.

        An import of a million events held every row in memory for one write
        (2.5 GB and more); in chunks it holds one round trip's.
        """
        runner = CliRunner()
        host = ["--db", str(tmp_path / "h.db"), "--store", pg_url]
        imported = runner.invoke(cli, ["log", "import", *host], input=seven_runs)
        assert 0 == imported.exit_code, imported.output
        events = seven_runs.count(b"\n")
        assert (events, SENT) == (sum(round_trips), max(round_trips))
        assert len(round_trips) == -(-events // SENT)
        assert seven_runs == runner.invoke(cli, ["log", "export", *host]).stdout_bytes
        verified = runner.invoke(cli, ["log", "verify", "--json", *host])
        assert (0, True) == (verified.exit_code, json.loads(verified.output)["ok"])

    def test_an_import_that_fails_after_rows_were_sent_leaves_nothing(
        self, pg_url: str, tmp_path: Path, seven_runs: bytes, round_trips: RoundTrips
    ) -> None:
        """A round trip that fails undoes the ones sent before it: the shared log stays empty."""
        round_trips.failing = 3
        local = tmp_path / "h.db"
        failed = CliRunner().invoke(
            cli, ["log", "import", "--db", str(local), "--store", pg_url], input=seven_runs
        )
        assert (3, 3) == (failed.exit_code, len(round_trips)), failed.output  # 3: a store error
        assert "the connection to the shared log was lost" in failed.output
        assert 0 == _pg_count(pg_url, "SELECT count(*) FROM events")
        assert not local.exists()

    def test_import_into_a_log_that_holds_events_is_refused(
        self, hosts: Hosts, client_line: Callable[..., bytes]
    ) -> None:
        """Importing onto a non-empty shared log appends nothing."""
        hosts("a", "request", "--at", str(AT), stdin=client_line(1))
        before = _pg_count(hosts.url, "SELECT count(*) FROM events")
        exported = hosts("a", "log", "export").stdout_bytes
        refused = hosts("b", "log", "import", stdin=exported)
        assert 2 == refused.exit_code
        assert "already holds" in refused.output
        assert before == _pg_count(hosts.url, "SELECT count(*) FROM events")


class TestFileMaintenance:
    """A prune of a shared log backs it up and takes nothing but the selected trees (ADR 0107)."""

    def test_a_prune_that_selects_nothing_backs_up_and_takes_nothing(
        self, hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
    ) -> None:
        hosts("a", "request", "--at", str(AT), stdin=client_line(1))
        target = tmp_path / "copy.sqlite"
        verb = ["state", "prune", "--before", "2020-01-01", "--apply", "--backup", str(target)]
        result = hosts("a", *verb)
        assert 0 == result.exit_code, result.output
        assert "selected runs: 0\n" in result.output
        assert target.exists()
        assert 0 == _pg_count(hosts.url, "SELECT count(*) FROM events WHERE body IS NULL")


KILLED_BETWEEN_COMMITS = r"""
import os, signal, sys
from pwf.host import Host
from pwf.protocol.client import parse_request
from pwf.readmodel import ReadModel
from pwf.store.mirror import MirroredStore
from pwf.store import mirror
from pwf.store.postgres import PostgresStore, PostgresTransaction

db, url, line = sys.argv[1], sys.argv[2], sys.stdin.buffer.read().strip()
model = ReadModel()
store = MirroredStore(db, PostgresStore(url), hooks=[model], install=model.install)
store.before_local_commit = lambda: os.kill(os.getpid(), signal.SIGKILL)
Host(store).request(parse_request(line), int(sys.argv[3]))
"""


class TestCrashBetweenCommits:
    """A host killed after PostgreSQL committed and before SQLite did heals by catching up."""

    @pytest.mark.parametrize("heal", ["read", "command"])
    def test_killed_host_catches_up(
        self, hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path, heal: str
    ) -> None:
        """The killed command is in the log once; the host's file folds it at its next use."""
        assert 0 == hosts("a", "request", "--at", str(AT), stdin=client_line(1)).exit_code
        line = client_line(2).strip()
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_BETWEEN_COMMITS, str(hosts.db("a")), hosts.url, str(AT)],
            input=line,
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert -signal.SIGKILL == killed.returncode, killed.stderr
        shared = _pg_count(hosts.url, "SELECT max(seq) FROM events")
        assert _local_seq(hosts.db("a")) < shared
        if heal == "read":
            assert 0 == hosts("a", "query", "runs", "--json").exit_code
        else:
            again = hosts("a", "request", "--no-catch-up", "--at", str(AT), stdin=line + b"\n")
            assert "adopted" == _answers(again)[0]["outcome"]
        assert shared == _local_seq(hosts.db("a"))
        assert 2 == _pg_count(
            hosts.url, "SELECT count(*) FROM events WHERE type = 'command.recorded'"
        )
        exported = hosts("a", "log", "export").stdout_bytes
        rebuilt = str(tmp_path / "rebuilt.db")
        assert (
            0
            == CliRunner().invoke(cli, ["log", "import", "--db", rebuilt], input=exported).exit_code
        )
        assert digest_database(rebuilt).all == digest_database(str(hosts.db("a"))).all
