"""The contract every log implementation keeps, run against each of them (STYLE §7).

Append, gapless seq, the chain, range streaming, look-ups by indexed
columns, verify against a corpus of faults, and concurrent appenders.  The
same expectations hold for SQLite and for PostgreSQL, written from the log's
rules (DOMAIN §3, ADR 0005), not from either store's output.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest

from pwf import canonical
from pwf.errors import InputError
from pwf.events import Actor, open_body
from pwf.store import Head, VerifyReport

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.contract.conftest import Backend

SIZES = (1, 3, 2, 1)
"""Batches of the test log: seqs 1 | 2 3 4 | 5 6 | 7."""
EVENTS = sum(SIZES)
AT = 1_764_403_200_000
ACTOR = Actor(type="session", id="session-main")


class Abort(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a test to abandon a transaction half way."""


@pytest.fixture
def log(backend: Backend, fill: Callable[..., Any]) -> Backend:
    """A log of seven events in four batches."""
    fill(backend.store, SIZES)
    return backend


def _append_then_abort(store: Any, event: Any) -> None:
    with store.transaction() as tx:
        tx.append([event], at=AT, actor=ACTOR)
        raise Abort


def _stage_then_abort(tx: Any, event: Any) -> None:
    with tx.savepoint():
        tx.stage([event], at=AT, actor=ACTOR)
        raise Abort


def _body(backend: Backend, seq: int) -> bytes:
    [stored] = backend.store.read(seq, seq)
    body: bytes = stored.body
    return body


class TestAppend:
    """Batches get gapless seqs, one batch number each, and extend the chain."""

    def test_seqs_batches_and_chain(self, log: Backend) -> None:
        """Seq 1..7 in batches 1, 2, 2, 2, 3, 3, 4, each prevHash the previous contentHash."""
        entries = list(log.store.entries())
        assert list(range(1, EVENTS + 1)) == [entry.seq for entry in entries]
        assert [1, 2, 2, 2, 3, 3, 4] == [entry.batch for entry in entries]
        prev = [None] + [entry.content_hash for entry in entries[:-1]]
        assert prev == [entry.prev_hash for entry in entries]

    def test_content_hash_is_over_the_stored_bytes(self, log: Backend) -> None:
        """Each body's SHA-256 without its contentHash member is that member."""
        for stored in log.store.read():
            document = json.loads(stored.body)
            claimed = document.pop("contentHash")
            assert hashlib.sha256(canonical.encode(document)).hexdigest() == claimed
            assert canonical.encode(json.loads(stored.body)) == stored.body

    def test_head_is_the_last_event(self, log: Backend) -> None:
        """The head names the last seq, its hash and its batch."""
        last = list(log.store.entries())[-1]
        assert Head(seq=EVENTS, content_hash=last.content_hash, batch=4) == log.store.head()

    def test_empty_log(self, backend: Backend) -> None:
        """A new log has the zero head and verifies."""
        assert Head(0, None, 0) == backend.store.head()
        assert VerifyReport(events=0, head=Head(0, None, 0)) == backend.store.verify()

    def test_staged_events_share_one_batch(self, backend: Backend, command: Any) -> None:
        """Everything staged in one transaction is one batch with gapless seqs."""
        with backend.store.transaction() as tx:
            tx.stage([command(1)], at=AT, actor=ACTOR)
            tx.stage([command(2), command(3)], at=AT, actor=ACTOR)
        assert [(1, 1), (2, 1), (3, 1)] == [(e.seq, e.batch) for e in backend.store.entries()]

    def test_a_raising_transaction_leaves_nothing(self, log: Backend, command: Any) -> None:
        """Nothing of a transaction that raises is kept, and the next append continues."""
        head = log.store.head()
        with pytest.raises(Abort):
            _append_then_abort(log.store, command(50))
        assert head == log.store.head()
        assert head == log.current(log.open()).head()
        [sealed] = log.store.append([command(51)], at=AT, actor=ACTOR)
        assert (EVENTS + 1, head.content_hash) == (sealed.entry.seq, sealed.entry.prev_hash)

    def test_a_savepoint_undoes_its_block_only(self, backend: Backend, command: Any) -> None:
        """A raising savepoint drops its events; what was staged before it stays."""
        with backend.store.transaction() as tx:
            tx.stage([command(1)], at=AT, actor=ACTOR)
            with pytest.raises(Abort):
                _stage_then_abort(tx, command(2))
            tx.stage([command(3)], at=AT, actor=ACTOR)
        entries = list(backend.store.entries())
        assert [1, 2] == [entry.seq for entry in entries]
        assert ["req-1", "req-3"] == [entry.event.request_id for entry in entries]
        assert backend.store.verify().ok

    def test_other_connections_see_committed_batches_only(
        self, backend: Backend, command: Any
    ) -> None:
        """A second connection sees a batch once, and only once, it commits."""
        other = backend.open()
        with backend.store.transaction() as tx:
            tx.append([command(1)], at=AT, actor=ACTOR)
            assert 0 == backend.current(other).head().seq
        assert 1 == backend.current(other).head().seq


class TestReading:
    """Ranges stream in seq order; look-ups use the indexed columns."""

    @pytest.mark.parametrize(
        ("first", "last", "expected"),
        [(1, None, [1, 2, 3, 4, 5, 6, 7]), (3, 5, [3, 4, 5]), (7, None, [7]), (8, None, [])],
    )
    def test_ranges(self, log: Backend, first: int, last: int | None, expected: list[int]) -> None:
        """``read(first, last)`` yields exactly the seqs in the range."""
        assert expected == [stored.seq for stored in log.store.read(first, last)]

    def test_read_bytes_equal_sealed_bytes(self, backend: Backend, fill: Any) -> None:
        """What is read back is byte for byte what was sealed."""
        batches = fill(backend.store, [2, 1])
        sealed = [item.body for batch in batches for item in batch]
        assert sealed == [stored.body for stored in backend.store.read()]

    def test_a_log_no_prune_touched_has_no_pruned_seqs(self, log: Backend) -> None:
        """``pruned`` reads the backend's record of the seqs a prune took: none, in any range.

        A prune's own are read by ``tests/cli/test_cli_prune.py`` (a file) and
        ``tests/postgres/test_prune_shared.py`` (the shared log's hosts).
        """
        assert [] == list(log.store.pruned())
        assert [] == list(log.store.pruned(3, 5))
        assert [] == list(log.store.pruned(8))

    def test_a_long_range_streams(self, backend: Backend, fill: Any) -> None:
        """Thousands of events stream in order through several fetches."""
        fill(backend.store, [500] * 5)
        seqs = [stored.seq for stored in backend.store.read(2, None)]
        assert list(range(2, 2501)) == seqs

    @pytest.mark.parametrize(
        ("where", "expected"),
        [
            ({"type": "command.recorded"}, [1, 2, 3, 4, 5, 6, 7]),
            ({"run_id": "run-1"}, [1, 4, 7]),
            ({"request_id": "req-5"}, [5, 6]),
            ({"client_id": "client-a", "idempotency_key": "idem-2"}, [2, 3, 4]),
            ({"batch": 3}, [5, 6]),
            ({"request_id": "nobody"}, []),
        ],
    )
    def test_lookups(self, log: Backend, where: dict[str, Any], expected: list[int]) -> None:
        """Look-ups find the events the causes (one per batch) and bodies name."""
        assert expected == [stored.seq for stored in log.store.find(**where)]

    @pytest.mark.parametrize(
        ("where", "expected"),
        [
            ({"at_least": AT + 1}, [2, 3, 4, 5, 6, 7]),
            ({"at_most": AT + 1}, [1, 2, 3, 4]),
            ({"at_least": AT + 1, "at_most": AT + 2}, [2, 3, 4, 5, 6]),
            ({"at_least": AT + 2, "run_id": "run-1"}, [7]),
            ({"at_least": AT + 1, "after": 3, "until": 5}, [4, 5]),
            ({"at_least": AT + 4}, []),
            ({"at_least": AT + 2, "at_most": AT + 1}, []),
        ],
    )
    def test_lookups_within_times(
        self, log: Backend, where: dict[str, Any], expected: list[int]
    ) -> None:
        """Time bounds keep the events whose batch's time is within them, as their bytes say."""
        found = [stored.seq for stored in log.store.find(**where)]
        assert expected == found
        low, high = where.get("at_least", 0), where.get("at_most", 2**53)
        said = [
            stored.seq for stored in log.store.read() if low <= open_body(stored.body).at <= high
        ]
        assert set(found) <= set(said)

    def test_a_time_bound_is_a_whole_number(self, log: Backend) -> None:
        """A time bound is epoch milliseconds; text is refused before anything is read."""
        with pytest.raises(InputError, match="at_least is a time in epoch milliseconds"):
            list(log.store.find(at_least="yesterday"))

    def test_an_idempotency_key_needs_its_client(self, log: Backend) -> None:
        """A key is unique per client only, so it is never looked up alone."""
        with pytest.raises(InputError, match="together with its client id"):
            list(log.store.find(idempotency_key="idem-1"))


def _forged(backend: Backend, seq: int, edit: Callable[[dict[str, Any]], None]) -> bytes:
    document = json.loads(_body(backend, seq))
    edit(document)
    del document["contentHash"]
    document["contentHash"] = hashlib.sha256(canonical.encode(document)).hexdigest()
    return canonical.encode(document)


def _flip(body: bytes, offset: int) -> bytes:
    return body[:offset] + bytes([(body[offset] + 1) % 256]) + body[offset + 1 :]


def _revision(document: dict[str, Any]) -> None:
    document["data"]["revision"] += 1


FAULTS: dict[str, tuple[Callable[[Backend], None], int, int]] = {
    "changed byte": (
        lambda b: b.tamper("UPDATE events SET body = ? WHERE seq = 4", _flip(_body(b, 4), 30)),
        4,
        3,
    ),
    "resealed body, old columns": (
        lambda b: b.tamper("UPDATE events SET body = ? WHERE seq = 3", _forged(b, 3, _revision)),
        3,
        2,
    ),
    "resealed body and hash column": (
        lambda b: b.tamper(
            "UPDATE events SET body = ?, content_hash = ? WHERE seq = 3",
            body := _forged(b, 3, _revision),
            json.loads(body)["contentHash"],
        ),
        4,
        3,
    ),
    "deleted row": (lambda b: b.tamper("DELETE FROM events WHERE seq = 5"), 5, 4),
    "deleted tail": (lambda b: b.tamper("DELETE FROM events WHERE seq = 7"), 7, 6),
    "column disagrees": (
        lambda b: b.tamper("UPDATE events SET run_id = 'run-x' WHERE seq = 2"),
        2,
        1,
    ),
    "head hash moved": (
        lambda b: b.tamper("UPDATE _pwf_head SET content_hash = ?", "0" * 64),
        7,
        7,
    ),
}
"""A minimal fault corpus: (tamper, first bad seq, events found good before it)."""


class TestVerify:
    """Verify walks the stored bytes and names the first bad seq, the same on every store."""

    def test_clean_log(self, log: Backend) -> None:
        """An untouched log verifies, deeply and chain-only."""
        for deep in (True, False):
            report = log.store.verify(deep=deep)
            assert (True, EVENTS, log.store.head()) == (report.ok, report.events, report.head)

    @pytest.mark.parametrize("fault", sorted(FAULTS))
    def test_fault_is_found_at_its_seq(self, log: Backend, fault: str) -> None:
        """Each fault of the corpus is reported at its first bad seq, with a one-line reason."""
        tamper, bad, good = FAULTS[fault]
        tamper(log)
        report = log.open().verify()
        assert (bad, good) == (report.first_bad_seq, report.events)
        assert report.reason
        assert "\n" not in report.reason

    @pytest.mark.parametrize("fault", ["changed byte", "deleted row", "resealed body, old columns"])
    def test_chain_only_finds_byte_faults(self, log: Backend, fault: str) -> None:
        """The chain-only walk finds faults in the bytes and the sequence too."""
        tamper, bad, _ = FAULTS[fault]
        tamper(log)
        assert bad == log.open().verify(deep=False).first_bad_seq


def _after_a_proven_head(backend: Backend, fill: Callable[..., Any]) -> Head:
    """Twenty events, proven; then twenty more, which complete nodes of the stored tree."""
    fill(backend.store, [1] * 20)
    proven: VerifyReport = backend.store.verify()
    assert proven.ok
    fill(backend.store, [1] * 20, start=21)
    return proven.head


class TestVerifyAfter:
    """A verify after a proven head walks what follows it and says what a whole walk says."""

    @pytest.mark.parametrize("deep", [True, False])
    def test_an_intact_log(self, backend: Backend, fill: Callable[..., Any], deep: bool) -> None:
        """The same report as the whole walk, from the proven head and from the head itself."""
        proven = _after_a_proven_head(backend, fill)
        whole = backend.store.verify(deep=deep)
        assert (True, 40) == (whole.ok, whole.events)
        assert whole == backend.store.verify(deep=deep, after=proven)
        assert whole == backend.store.verify(deep=deep, after=whole.head)

    @pytest.mark.parametrize("deep", [True, False])
    def test_bytes_before_the_head_are_not_read(
        self, backend: Backend, fill: Callable[..., Any], deep: bool
    ) -> None:
        """A byte changed inside a stored group of 16 shows in a whole walk only."""
        proven = _after_a_proven_head(backend, fill)
        backend.tamper("UPDATE events SET body = ? WHERE seq = 2", _flip(_body(backend, 2), 30))
        assert 2 == backend.store.verify(deep=deep).first_bad_seq
        assert backend.store.verify(deep=deep, after=proven).ok

    def test_a_fault_after_the_head_is_named_alike(
        self, backend: Backend, fill: Callable[..., Any]
    ) -> None:
        """The first bad seq, the events before it and the reason of the whole walk."""
        proven = _after_a_proven_head(backend, fill)
        backend.tamper("UPDATE events SET body = ? WHERE seq = 25", _flip(_body(backend, 25), 30))
        whole = backend.store.verify()
        assert (25, 24) == (whole.first_bad_seq, whole.events)
        assert whole == backend.store.verify(after=proven)

    def test_a_tree_node_completed_after_the_head_is_checked(
        self, backend: Backend, fill: Callable[..., Any]
    ) -> None:
        """The node that seq 32 completes is compared, as the whole walk compares it."""
        proven = _after_a_proven_head(backend, fill)
        backend.tamper("UPDATE _pwf_tree SET hash = ? WHERE pos = 1", bytes(32))
        whole = backend.store.verify()
        assert (32, "Merkle tree") == (whole.first_bad_seq, whole.reason and "Merkle tree")
        assert whole == backend.store.verify(after=proven)

    @pytest.mark.parametrize("moved", ["hash", "seq"])
    def test_a_head_the_log_does_not_hold_walks_it_whole(
        self, backend: Backend, fill: Callable[..., Any], moved: str
    ) -> None:
        """Another hash at the head's seq, or a seq past the log's, is no proven head."""
        proven = _after_a_proven_head(backend, fill)
        backend.tamper("UPDATE events SET body = ? WHERE seq = 2", _flip(_body(backend, 2), 30))
        other = (
            Head(proven.seq, "0" * 64, proven.batch)
            if moved == "hash"
            else Head(proven.seq + 100, proven.content_hash, proven.batch)
        )
        assert 2 == backend.store.verify(after=other).first_bad_seq

    def test_a_rewrite_after_the_head_walks_it_whole(
        self, backend: Backend, fill: Callable[..., Any]
    ) -> None:
        """An event after the head typed as a prune, compaction or migration: the whole log."""
        proven = _after_a_proven_head(backend, fill)
        backend.tamper("UPDATE events SET body = ? WHERE seq = 2", _flip(_body(backend, 2), 30))
        backend.tamper("UPDATE events SET type = 'log.pruned' WHERE seq = 30")
        assert 2 == backend.store.verify(after=proven).first_bad_seq


class TestConcurrentAppenders:
    """Writers on separate connections never fork the chain or leave a gap."""

    def test_threads_on_their_own_connections(self, backend: Backend, command: Any) -> None:
        """Four writers appending ten batches each make one gapless, verified chain."""
        writers, batches = 4, 10
        start = threading.Barrier(writers)
        failures: list[BaseException] = []

        def write(index: int) -> None:
            try:
                with backend.connect() as store:
                    start.wait()
                    for n in range(batches):
                        number = 1000 * (index + 1) + 2 * n
                        store.append([command(number), command(number + 1)], at=AT, actor=ACTOR)
            except BaseException as error:  # noqa: BLE001 - reported by the test below
                failures.append(error)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [] == failures
        entries = list(backend.current(backend.store).entries())
        assert list(range(1, writers * batches * 2 + 1)) == [entry.seq for entry in entries]
        assert list(range(1, writers * batches + 1)) == sorted({e.batch for e in entries})
        report = backend.store.verify()
        assert (True, writers * batches * 2) == (report.ok, report.events)
        assert all(open_body(s.body).seq == s.seq for s in backend.store.read())
