"""A lone host decides ahead of the shared log's lock and writes in one round trip (ADR 0062).

When another host wrote between the decision and the write, the head's
check fails, nothing is written or kept locally, and the decision is made
again under the lock: the log and the answers are those of the same
requests run one after another on one SQLite file.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

import psycopg
import pytest

from pwf.host import Host
from pwf.protocol.client import parse_request
from pwf.readmodel import ReadModel
from pwf.store.postgres import LOCK_KEY, PostgresStore
from pwf.store.sqlite import SqliteStore
from pwf.store.unit import NOT_REPEATABLE, OnceOnly, Repeatable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.postgres._recording import mirrored_host, recording, round_trips

    from pwf.protocol.client import ClientResponse
else:
    from _recording import mirrored_host, recording, round_trips

AT: Final = 1_764_403_200_000
CHECK: Final = "SELECT 1 / count(*) FROM _pwf_head WHERE id = 1 AND seq = %s"
WRITE: Final = "WITH b AS (INSERT INTO _pwf_batches"
"""How the statement that writes a batch begins: its batch row comes first (ADR 0102)."""
IDLE_LIMIT: Final = "SET LOCAL idle_in_transaction_session_timeout = 5000"
"""A write under the lock may wait on its process at most the busy timeout (ADR 0121)."""


class _Hosts:
    """Hosts on one shared log, and one host on a SQLite file of its own (the serial run)."""

    def __init__(self, url: str, folder: Path, client_line: Callable[..., bytes]) -> None:
        PostgresStore(url, create=True).close()
        self.url, self.line = url, client_line
        self.stores = {name: mirrored_host(url, folder / f"{name}.db") for name in ("a", "b", "c")}
        model = ReadModel()
        alone = SqliteStore(folder / "alone.db", create=True, hooks=[model])
        alone.install(model.install)
        self.alone = (alone, Host(alone))

    def send(self, name: str, number: int, operation: str = "run.start") -> ClientResponse:
        """Send ``operation`` about ``run-number`` to host ``name`` at ``AT + number``."""
        line = self.line(number, operation).strip()
        return self.stores[name][1].request(parse_request(line), AT + number)

    def serial(self, number: int, operation: str = "run.start") -> ClientResponse:
        """The same request on the SQLite file of its own."""
        line = self.line(number, operation).strip()
        return self.alone[1].request(parse_request(line), AT + number)

    def between(self, name: str, interleaved: Callable[[], object]) -> list[bool]:
        """Run ``interleaved`` once, after host ``name`` decided ahead and before it writes.

        Returns the outcomes of the host's checks of the head, one per call
        until the next :meth:`between`.
        """
        log = self.stores[name][0].shared.log
        original = type(log).commit_if_head.__get__(log)  # not an earlier call's wrapper
        outcomes: list[bool] = []

        def commit_if_head(*args: Any, **kwargs: Any) -> bool:
            if not outcomes:
                interleaved()
            outcomes.append(original(*args, **kwargs))
            return bool(outcomes[-1])

        log.commit_if_head = commit_if_head  # type: ignore[method-assign]
        return outcomes

    def bodies(self, name: str) -> list[bytes]:
        """The shared log's events, as host ``name``'s caught-up copy holds them."""
        store = self.stores[name][0]
        store.catch_up()
        return [event.body for event in store.read()]

    def serial_bodies(self) -> list[bytes]:
        """The events of the SQLite file of its own."""
        return [event.body for event in self.alone[0].read()]

    def close(self) -> None:
        """Close every store."""
        for store, _ in self.stores.values():
            store.close()
        self.alone[0].close()


@pytest.fixture
def made(pg_url: str, tmp_path: Path, client_line: Callable[..., bytes]) -> Iterator[_Hosts]:
    """Three hosts on a fresh shared log and a SQLite file of its own."""
    hosts = _Hosts(pg_url, tmp_path, client_line)
    yield hosts
    hosts.close()


class TestAlone:
    """No other host writes: one round trip, and SQLite commits after PostgreSQL."""

    def test_a_lone_host_takes_one_round_trip(self, made: _Hosts) -> None:
        """The lock, the head's check and the write, in one pipeline: one implicit transaction."""
        made.send("a", 1)
        seen = recording(made.stores["a"][0])
        assert "accepted" == made.send("a", 2).outcome
        trips = round_trips(seen)
        assert 1 == len(trips), trips
        assert [f"SELECT pg_advisory_xact_lock({LOCK_KEY})"] == trips[0][:1]
        assert trips[0][1].startswith(CHECK)
        assert trips[0][2].startswith(WRITE)
        assert 3 == len(trips[0])
        assert [("sqlite", "COMMIT")] == [entry for entry in seen if entry[1] == "COMMIT"]
        assert 4 == made.stores["b"][0].catch_up()  # committed, for every other connection

    def test_a_lone_host_answers_after_its_commit(self, made: _Hosts) -> None:
        """The pipeline's end commits: SQLite commits after it, and the rows are in the log."""
        made.send("a", 1)
        seen = recording(made.stores["a"][0])
        made.stores["a"][0].before_local_commit = lambda: seen.append(("pg", "<visible>"))
        log = made.stores["a"][0].shared.log
        original = type(log).commit_if_head.__get__(log)

        def commit_if_head(*args: Any, **kwargs: Any) -> bool:
            done = original(*args, **kwargs)
            with psycopg.connect(made.url) as other:
                row = other.execute("SELECT max(seq) FROM events").fetchone()
            seen.append(("pg", f"<head {row[0] if row else None}>"))
            return bool(done)

        log.commit_if_head = commit_if_head  # type: ignore[method-assign]
        made.send("a", 2)
        marks = [sql for _, sql in seen if sql.startswith("<")]
        assert ["<head 4>", "<visible>"] == marks
        assert _local_commit_after(seen, "<visible>")

    def test_a_decision_that_writes_nothing_checks_the_head_only(self, made: _Hosts) -> None:
        """An adopted retry writes nothing: one statement, no lock, no transaction."""
        made.send("a", 1)
        seen = recording(made.stores["a"][0])
        assert "adopted" == made.send("a", 1).outcome
        trips = round_trips(seen)
        assert 1 == len(trips), trips
        assert trips[0][0].startswith(CHECK)
        assert 1 == len(trips[0])

    def test_a_transaction_not_run_twice_decides_under_the_lock(self, made: _Hosts) -> None:
        """Only callers that can decide again opt in; a plain transaction takes the lock first."""
        made.send("a", 1)
        seen = recording(made.stores["a"][0])
        with made.stores["a"][0].transaction():
            pass
        trips = round_trips(seen)
        assert ["BEGIN", IDLE_LIMIT, f"SELECT pg_advisory_xact_lock({LOCK_KEY})"] == trips[0][:3]

    def test_the_answers_and_log_of_one_file(self, made: _Hosts) -> None:
        """Starts, retries and reads on one lone host make the bytes one SQLite file makes."""
        for number in range(1, 6):
            for operation in ("run.start", "run.start", "run.status", "run.cancel"):
                assert made.send("a", number, operation) == made.serial(number, operation)
        assert made.bodies("a") == made.serial_bodies()


def _local_commit_after(seen: list[tuple[str, str]], mark: str) -> bool:
    """True when SQLite's COMMIT comes after ``mark`` in ``seen``."""
    at = seen.index(("pg", mark))
    return ("sqlite", "COMMIT") in seen[at:]


class TestAnotherHostWroteMeanwhile:
    """The head's check fails: nothing is written, and the decision is made again under the lock."""

    def test_the_same_client_and_key_runs_once(self, made: _Hosts) -> None:
        """Host b records the request first; a's decision ahead is thrown away and a adopts."""
        made.send("a", 1)
        made.send("a", 2)  # a is alone and caught up: it decides the next request ahead
        checks = made.between("a", lambda: made.send("b", 3))
        assert "adopted" == made.send("a", 3).outcome
        assert [False] == checks
        for number in (1, 2, 3, 3):
            made.serial(number)
        assert made.bodies("a") == made.serial_bodies()
        with psycopg.connect(made.url) as connection:
            row = connection.execute("SELECT count(*) FROM _pwf_recorded").fetchone()
        assert row is not None
        assert 3 == row[0]

    def test_a_decision_that_wrote_nothing_is_made_again(self, made: _Hosts) -> None:
        """run-2 is unknown ahead of the lock, but b started it meanwhile: a's status accepted."""
        made.send("a", 1)
        checks = made.between("a", lambda: made.send("b", 2))
        answer = made.send("a", 2, "run.status")
        assert [False] == checks
        made.serial(1)
        made.serial(2)
        assert made.serial(2, "run.status") == answer
        assert "accepted" == answer.outcome
        assert made.bodies("a") == made.serial_bodies()

    def test_the_log_and_answers_are_those_of_the_serial_run(self, made: _Hosts) -> None:
        """Interleaved starts land before a's: the bytes and answers of that serial order.

        After each stale decision a's next request locks and folds; the
        status request after it finds nobody wrote, so a is alone again.
        """
        answers, checks = [made.send("a", 1)], []
        for number in range(2, 8):
            interleaved: list[ClientResponse] = []

            def meanwhile(into: list[ClientResponse] = interleaved, n: int = number) -> None:
                into.append(made.send("b" if n % 2 else "c", n + 100))

            checks.append(made.between("a", meanwhile))
            answers += [made.send("a", number)]
            answers += [*interleaved, made.send("a", number, "run.status")]
        assert [[False]] * 6 == checks
        serial = [made.serial(1)]
        for number in range(2, 8):
            own = made.serial(number + 100)
            serial += [made.serial(number), own, made.serial(number, "run.status")]
        assert serial == answers
        assert made.bodies("a") == made.serial_bodies()
        assert made.bodies("b") == made.bodies("c") == made.serial_bodies()

    def test_nothing_is_kept_locally_from_the_stale_decision(self, made: _Hosts) -> None:
        """The local transaction of the decision ahead rolls back before the locked one begins."""
        made.send("a", 1)
        seen = recording(made.stores["a"][0])
        made.between("a", lambda: made.send("b", 2))
        made.send("a", 3)
        local = [sql for place, sql in seen if place == "sqlite"]
        ends = [sql for sql in local if sql in {"BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"}]
        assert ["BEGIN IMMEDIATE", "ROLLBACK", "BEGIN IMMEDIATE", "COMMIT"] == ends

    def test_after_a_stale_decision_the_next_takes_the_lock_first(self, made: _Hosts) -> None:
        """A host that just saw another host write locks and frees it early, as ADR 0053 does."""
        made.send("a", 1)
        made.between("a", lambda: made.send("b", 2))
        made.send("a", 3)
        made.send("b", 4)
        seen = recording(made.stores["a"][0])
        made.send("a", 5)
        trips = round_trips(seen)
        assert ["BEGIN", "SET LOCAL synchronous_commit = off"] == trips[0][:2]

    def test_a_host_alone_again_decides_ahead_again(self, made: _Hosts) -> None:
        """Once a locked transaction finds nobody else wrote, the next one decides ahead."""
        made.send("a", 1)
        made.send("b", 2)
        made.send("a", 3)  # folds b's: others write
        made.send("a", 4)  # folds nothing: alone again
        seen = recording(made.stores["a"][0])
        made.send("a", 5)
        assert 1 == len(round_trips(seen))


@pytest.mark.parametrize("round_no", range(3))
def test_three_hosts_racing_one_key_execute_it_once(
    made: _Hosts, tmp_path: Path, round_no: int
) -> None:
    """Three hosts, each in a thread of its own, send the same client + key at once."""
    made.send("a", 1)
    numbers = range(10 + 10 * round_no, 20 + 10 * round_no)
    answers: dict[str, list[str]] = {name: [] for name in "xyz"}
    gate = threading.Barrier(3)

    def host(name: str) -> None:
        store, host = mirrored_host(made.url, tmp_path / f"{name}.db")
        try:
            store.catch_up()
            for number in numbers:
                line = made.line(number).strip()
                gate.wait()
                answers[name].append(host.request(parse_request(line), AT + number).outcome)
        finally:
            store.close()

    threads = [threading.Thread(target=host, args=(name,)) for name in "xyz"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(len(answers[name]) == len(numbers) for name in "xyz"), answers
    for index in range(len(numbers)):
        outcomes = sorted(answers[name][index] for name in "xyz")
        assert ["accepted", "adopted", "adopted"] == outcomes
    with psycopg.connect(made.url) as connection:
        row = connection.execute("SELECT count(*) FROM _pwf_recorded").fetchone()
    assert row is not None
    assert 1 + len(numbers) == row[0]
    for number in (1, *numbers):
        made.serial(number)
    assert made.bodies("a") == made.serial_bodies()
    report = made.stores["a"][0].verify()
    assert report.first_bad_seq is None, report


class TestUnits:
    """Only work marked repeatable decides ahead; work that may not run twice takes the lock."""

    def test_once_only_work_decides_under_the_lock(self, made: _Hosts) -> None:
        """A store's unit of work runs ``OnceOnly`` work after the lock, never ahead of it."""
        made.send("a", 1)
        store = made.stores["a"][0]
        seen = recording(store)
        assert store.head().seq == store.run(OnceOnly(lambda tx: tx.head.seq))
        trips = round_trips(seen)
        assert ["BEGIN", IDLE_LIMIT, f"SELECT pg_advisory_xact_lock({LOCK_KEY})"] == trips[0][:3]

    def test_repeatable_work_decides_ahead(self, made: _Hosts) -> None:
        """The same work marked ``Repeatable`` checks the head after deciding: no lock, no BEGIN."""
        made.send("a", 1)
        store = made.stores["a"][0]
        seen = recording(store)
        assert store.head().seq == store.run(Repeatable(lambda tx: tx.head.seq))
        trips = round_trips(seen)
        assert 1 == len(trips), trips
        assert trips[0][0].startswith(CHECK)

    def test_the_path_that_repeats_refuses_once_only_work(self, made: _Hosts) -> None:
        """Handed to the mirror's path that may run it twice, ``OnceOnly`` work is refused unrun."""
        store = made.stores["a"][0]
        ran: list[int] = []
        once = OnceOnly(lambda tx: ran.append(tx.head.seq))
        with pytest.raises(TypeError, match=NOT_REPEATABLE):
            store.shared.run(store.local, once, lambda: None)  # type: ignore[arg-type]
        assert [] == ran
