"""Nothing is answered or kept locally before PostgreSQL has flushed it (ADR 0053).

A shared-log commit does not wait for its WAL flush, so the advisory lock is
free for the next host at once; a flush barrier then comes before the local
commit.  The order of statements is pinned through a recording connection,
and a server stopped as a crash would stop it, in the middle of three hosts'
requests, loses none that was answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any, Final

import psycopg
import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.diff import digest_database
from pwf.errors import StoreError
from pwf.protocol.client import parse_request
from pwf.store.postgres import PostgresStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests._pg import Server
    from tests.postgres._recording import mirrored_host, recording, round_trips
    from tests.postgres.conftest import Hosts

    from pwf.protocol.client import ClientResponse
else:
    from _recording import mirrored_host, recording, round_trips

AT: Final = 1_764_403_200_000
FLUSH: Final = "pg_logical_emit_message"
LOG_WRITE: Final = {
    "sqlite": "INSERT INTO main._pwf_events",
    "pg": "WITH b AS (INSERT INTO _pwf_batches",
}
"""How the statement writing a batch's events begins (ADR 0102): in PostgreSQL, its batch row's."""


def _at(seen: list[tuple[str, str]], where: str, start: str, after: int = -1) -> int:
    """The index of the first statement of ``where`` after ``after`` starting with ``start``."""
    for index, (place, sql) in enumerate(seen):
        if index > after and place == where and sql.startswith(start):
            return index
    pytest.fail(f"no {where} statement {start!r} after {after} in {seen}")


@pytest.fixture
def pair(
    pg_url: str, tmp_path: Path, client_line: Callable[..., bytes]
) -> Iterator[tuple[Callable[[str, int], ClientResponse], Any]]:
    """Two hosts ``a`` and ``b`` on a fresh log: ``send(name, n)`` starts ``run-n`` there."""
    PostgresStore(pg_url, create=True).close()
    opened = {name: mirrored_host(pg_url, tmp_path / f"{name}.db") for name in ("a", "b")}

    def send(name: str, number: int) -> ClientResponse:
        line = client_line(number).strip()
        return opened[name][1].request(parse_request(line), AT + number)

    yield send, {name: store for name, (store, _) in opened.items()}
    for store, _ in opened.values():
        store.close()


class TestOrder:
    """Each keeps the durability rule; writers that take turns release the lock before the flush."""

    def test_a_lone_host_commits_synchronously(self, pair: Any) -> None:
        """No other host writes: the commit itself flushes, as it always did, before SQLite's.

        The decision made ahead of the lock (ADR 0062) is one implicit
        transaction, committed synchronously at the end of its pipeline.
        """
        send, stores = pair
        send("a", 1)
        seen = recording(stores["a"])
        send("a", 2)
        lock = _at(seen, "pg", "SELECT pg_advisory_xact_lock")
        assert not [sql for _, sql in seen if "synchronous_commit" in sql or FLUSH in sql]
        assert _at(seen, "sqlite", "COMMIT") > _at(seen, "pg", "]", lock)

    def test_taking_turns_the_flush_comes_after_the_lock(self, pair: Any) -> None:
        """Another host writes: fold its events, commit without waiting, barrier, SQLite."""
        send, stores = pair
        send("a", 1)
        send("b", 2)
        send("a", 3)  # folds b's batch under the lock: another host writes, so ...
        send("b", 4)
        seen = recording(stores["a"])
        send("a", 5)  # ... this one folds b's next batch under the lock and frees it early
        begin = _at(seen, "pg", "BEGIN")
        assert _at(seen, "sqlite", LOG_WRITE["sqlite"]) > begin
        assert seen[begin + 1] == ("pg", "SET LOCAL synchronous_commit = off")
        assert seen[begin + 2][1].startswith("SET LOCAL idle_in_transaction_session_timeout")
        assert seen[begin + 3][1].startswith("SELECT pg_advisory_xact_lock")
        written = _at(seen, "pg", LOG_WRITE["pg"], begin)
        commit = _at(seen, "pg", "COMMIT", written)
        assert seen[commit + 1] == ("pg", f"SELECT {FLUSH}(true, 'pwf.flush', '')")
        assert _at(seen, "sqlite", "COMMIT") > commit + 1
        assert [sql for place, sql in seen if place == "sqlite" and sql == "COMMIT"] == ["COMMIT"]
        stores["b"].catch_up()
        assert 1 == len(
            {digest_database(str(store.projections_file.path)).all for store in stores.values()}
        )

    def test_taking_turns_the_write_commit_and_barrier_go_together(self, pair: Any) -> None:
        """Hosts taking turns: two round trips, the lock with the other hosts' events; the rest.

        The first is ``BEGIN``, the early commit, the lock, the head and the
        events after the local head; the second the write, ``COMMIT`` and
        the barrier (ADR 0062: no fold ahead of the lock).
        """
        send, stores = pair
        for name, number in (("a", 1), ("b", 2), ("a", 3), ("b", 4)):
            send(name, number)
        seen = recording(stores["a"])
        send("a", 5)
        trips = round_trips(seen)
        assert 2 == len(trips), trips
        assert ["BEGIN", "SET LOCAL synchronous_commit = off"] == trips[0][:2]
        assert trips[0][-1].startswith("SELECT seq, batch, type")
        assert trips[1][0].startswith(LOG_WRITE["pg"])
        assert ["COMMIT", f"SELECT {FLUSH}(true, 'pwf.flush', '')"] == trips[1][1:]

    def test_folding_alone_still_flushes(self, pair: Any) -> None:
        """A transaction that only folds another host's events flushes before keeping them."""
        send, stores = pair
        send("a", 1)
        send("b", 2)
        seen = recording(stores["a"])
        with stores["a"].transaction():
            pass
        commit = _at(seen, "pg", "COMMIT")
        assert seen[commit + 1][1].startswith(f"SELECT {FLUSH}")
        assert _at(seen, "sqlite", "COMMIT") > commit + 1

    def test_nothing_read_nothing_flushed(self, pair: Any) -> None:
        """A transaction that neither wrote nor folded anything commits without a barrier."""
        send, stores = pair
        send("a", 1)
        seen = recording(stores["a"])
        with stores["a"].transaction():
            pass
        assert not [sql for _, sql in seen if FLUSH in sql]
        assert 0 == stores["a"].catch_up()
        assert not [sql for _, sql in seen if FLUSH in sql]

    def test_a_catch_up_flushes_before_it_commits(self, pair: Any) -> None:
        """A read's catch-up of another host's events flushes before the file keeps them."""
        send, stores = pair
        send("a", 1)
        send("b", 2)
        seen = recording(stores["a"])
        assert stores["a"].catch_up() > 0
        flush = _at(seen, "pg", f"SELECT {FLUSH}")
        inserted = _at(seen, "sqlite", LOG_WRITE["sqlite"])
        assert inserted < flush < _at(seen, "sqlite", "COMMIT", flush)


def _wait_for_events(url: str, count: int, processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with psycopg.connect(url) as connection:
            row = connection.execute("SELECT max(seq) FROM events").fetchone()
        if row is not None and row[0] is not None and int(row[0]) >= count:
            return
        if all(process.poll() is not None for process in processes):
            return
        time.sleep(0.05)
    pytest.fail("the hosts wrote too little")


@pytest.mark.slow
def test_a_crash_loses_no_answered_request(
    tmp_path: Path, client_line: Callable[..., bytes], postgres_server: Server
) -> None:
    """Stop PostgreSQL as a crash would while three hosts write: every answer is in the log.

    The WAL writer is slowed down to ten seconds, so a commit nobody
    flushed stays in PostgreSQL's buffers and is lost by the crash.
    """
    server = type(postgres_server)(
        postgres_server.bin_dir, durable=True, settings=["wal_writer_delay=10000"]
    )
    server.start()
    try:
        url = server.create_database()
        run = CliRunner()
        assert (
            0 == run.invoke(cli, ["init", "--db", str(tmp_path / "a.db"), "--store", url]).exit_code
        )
        processes = []
        for index, name in enumerate("abc"):
            lines = b"".join(client_line(index * 1_000 + n) for n in range(1, 200))
            (tmp_path / f"{name}.jsonl").write_bytes(lines)
            with (tmp_path / f"{name}.jsonl").open("rb") as stdin:
                processes.append(
                    subprocess.Popen(
                        [
                            *(sys.executable, "-m", "pwf", "request"),
                            *("--db", str(tmp_path / f"{name}.db"), "--store", url),
                            *("--at", str(AT)),
                        ],
                        stdin=stdin,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    )
                )
        _wait_for_events(url, 150, processes)
        server.crash()
        answered = []
        for process in processes:
            out, _ = process.communicate(timeout=120)
            answered += [json.loads(line) for line in out.splitlines()]
        server.restart()
        accepted = {answer["requestId"] for answer in answered if answer["outcome"] == "accepted"}
        assert len(accepted) >= 10
        with psycopg.connect(url) as connection:
            recorded = {
                str(row[0]) for row in connection.execute("SELECT request_id FROM _pwf_recorded")
            }
        assert accepted <= recorded, sorted(accepted - recorded)
        verified = run.invoke(
            cli, ["log", "verify", "--db", str(tmp_path / "a.db"), "--store", url]
        )
        assert 0 == verified.exit_code, verified.output
        for name in "abc":
            healed = run.invoke(
                cli,
                ["query", "runs", "--json", "--db", str(tmp_path / f"{name}.db"), "--store", url],
            )
            assert 0 == healed.exit_code, healed.output
        digests = {digest_database(str(tmp_path / f"{name}.db")).all for name in "abc"}
        assert 1 == len(digests)
    finally:
        server.stop()


def test_the_log_is_the_one_sqlite_writes(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    """One workload through three hosts on the shared log and through one file: same bytes.

    Starts, retries (adopted), a key of the run before, status and cancel
    requests go to the hosts in turn, so each folds the others' events on
    the write path before it decides.
    """
    alone = tmp_path / "alone.db"
    run = CliRunner()
    assert 0 == run.invoke(cli, ["init", "--db", str(alone)]).exit_code
    for number in range(1, 10):
        lines = b"".join(
            [
                client_line(number),
                client_line(number),
                client_line(max(number - 1, 1)),
                client_line(number, "run.status"),
                client_line(number, "run.cancel"),
            ]
        )
        at = str(AT + number * 1_000)
        shared = hosts("abc"[number % 3], "request", "--at", at, stdin=lines)
        single = run.invoke(cli, ["request", "--db", str(alone), "--at", at], input=lines)
        assert (0, 0) == (shared.exit_code, single.exit_code), shared.output
        assert shared.output == single.output
    exported = hosts("b", "log", "export").stdout_bytes
    assert 45 < len(exported.splitlines())
    assert exported == run.invoke(cli, ["log", "export", "--db", str(alone)]).stdout_bytes


def test_a_failed_barrier_keeps_nothing_locally(pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit went through but its flush is not confirmed: no answer, no local commit.

    The retry finds the command in the log and is adopted.
    """
    send, stores = pair
    for name, number in (("a", 1), ("b", 2), ("a", 3), ("b", 4)):
        send(name, number)
    before = stores["a"].head()
    monkeypatch.setattr("pwf.store.postgres.append.FLUSH", "SELECT pwf_no_such_barrier()")
    with pytest.raises(StoreError, match="pwf_no_such_barrier"):
        send("a", 5)
    assert before == stores["a"].head()
    monkeypatch.undo()
    assert "adopted" == send("a", 5).outcome
    stores["b"].catch_up()
    assert 1 == len(
        {digest_database(str(store.projections_file.path)).all for store in stores.values()}
    )
