"""The chain walk over seq ranges in several processes finds what the sequential walk finds.

The log is seven events in four batches (seqs 1 | 2 3 4 | 5 6 | 7).  Two
processes walk 1-4 and 5-7, three walk 1-3, 4-5 and 6-7, so damage is done
inside a range and on both sides of a boundary.  Tampering goes straight to
the ``events`` view with SQL, as an attacker or a damaged disk would change
format v1's table (:func:`tests._tamper.editable`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from typing import TYPE_CHECKING, Any, Final

import pytest

from pwf import canonical
from pwf.errors import ChainError, StoreError
from pwf.store import Head, chainwalk
from pwf.store.chainwalk import ranges, walk_chain, walk_rows
from pwf.store.rows import COLUMNS, verify_rows
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from pathlib import Path

    from tests._tamper import editable
    from tests.integration._inprocess import ranges_in_process

    from pwf.events import Sealed

    AppendBatches = Callable[..., list[list[Sealed]]]
    Reseal = Callable[[dict[str, Any]], bytes]
else:
    from _inprocess import ranges_in_process

    from _tamper import editable

SIZES: Final = (1, 3, 2, 1)
EVENTS: Final = sum(SIZES)
EMPTY: Final = Head(seq=0, content_hash=None, batch=0)
PROCESSES: Final = (1, 2, 3)
FORKED_EVERY: Final = 10
"""The every-offset tests walk each tenth offset with real forks, the others in this process."""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, fill: AppendBatches) -> Path:
    """The seven events in four batches, appended once for the module and checkpointed."""
    path = tmp_path_factory.mktemp("chainwalk") / "pwf.db"
    with SqliteStore(path, create=True) as store:
        fill(store, SIZES)
        store.checkpoint()
    return path


@pytest.fixture
def log(pristine: Path, db_path: Path) -> Iterator[SqliteStore]:
    """A store holding seven events in four batches: a copy of :func:`pristine`'s bytes.

    Appending them again for each of the module's few hundred cases cost
    more than all its walks (ADR 0067); every case still damages a file of
    its own.
    """
    db_path.parent.mkdir(parents=True)
    shutil.copyfile(pristine, db_path)
    with SqliteStore(db_path) as store:
        editable(store.connection)
        yield store


def _body(store: SqliteStore, seq: int) -> bytes:
    [stored] = store.read(seq, seq)
    return stored.body


def _set(store: SqliteStore, seq: int, **columns: object) -> None:
    editable(store.connection)
    for column, value in columns.items():
        store.connection.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (value, seq))  # noqa: S608 - column names come from the test itself


def _forks(number: int) -> AbstractContextManager[object]:
    """Real forks for every :data:`FORKED_EVERY`-th offset, the same ranges here for the rest.

    A fork of the test process costs some thirty times the walk of its range,
    and the other tests of this module fork for every case (ADR 0054).
    """
    return contextlib.nullcontext() if number % FORKED_EVERY == 0 else ranges_in_process()


def _changed(body: bytes, offset: int) -> bytes:
    new = ord("0") if body[offset] != ord("0") else ord("1")
    return body[:offset] + bytes([new]) + body[offset + 1 :]


def _fault(store: SqliteStore, processes: int, origin: Head = EMPTY) -> tuple[int, str]:
    with pytest.raises(ChainError) as caught:
        walk_chain(store.path, origin, processes=processes)
    return caught.value.seq, caught.value.reason


def _sequential(store: SqliteStore, origin: Head = EMPTY) -> tuple[int, str]:
    return _fault(store, 1, origin)


def _store_says(store: SqliteStore) -> tuple[int | None, str | None]:
    """What the store's own chain-only verify reports: the reference for seq and reason."""
    report = store.verify(deep=False)
    return report.first_bad_seq, report.reason


def test_ranges_cut_the_log_as_the_tests_assume() -> None:
    """Two ranges are 1-4 and 5-7, three are 1-3, 4-5 and 6-7; no range is ever empty."""
    assert [(1, 4), (5, 7)] == ranges(1, 7, 2)
    assert [(1, 3), (4, 5), (6, 7)] == ranges(1, 7, 3)
    assert [(5, 5), (6, 6)] == ranges(5, 6, 9)


class TestIntactLog:
    """An untouched log walks to its head however it is split."""

    @pytest.mark.parametrize("processes", [*PROCESSES, 7, None])
    def test_returns_the_head(self, log: SqliteStore, processes: int | None) -> None:
        """The last event's seq, hash and batch are the store's head."""
        assert log.head() == walk_chain(log.path, EMPTY, processes=processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_empty_log_returns_the_origin(self, store: SqliteStore, processes: int) -> None:
        """No event: the walk ends where it starts."""
        assert EMPTY == walk_chain(store.path, EMPTY, processes=processes)

    def test_agrees_with_the_store_on_an_intact_log(self, log: SqliteStore) -> None:
        """The store's own chain walk reports the same head."""
        assert log.verify(deep=False).head == walk_chain(log.path, EMPTY, processes=2)


class TestWalkRows:
    """``walk_rows`` walks rows a caller already holds (PostgreSQL, the snapshot re-walk)."""

    @staticmethod
    def _rows(store: SqliteStore) -> list[tuple[object, ...]]:
        return store.connection.execute(
            "SELECT seq, CAST(content_hash AS BLOB), body FROM events ORDER BY seq"
        ).fetchall()

    def test_returns_the_head(self, log: SqliteStore) -> None:
        """DOMAIN §2.1: the head is the last event's seq, content hash and batch."""
        assert log.head() == walk_rows(self._rows(log), EMPTY)
        assert Head(seq=EVENTS, content_hash=log.head().content_hash, batch=len(SIZES)) == (
            walk_rows(self._rows(log), EMPTY)
        )

    def test_a_walk_from_a_later_origin_checks_the_link_to_it(self, log: SqliteStore) -> None:
        """Rows after an origin (a batch's end) must hang off it: prevHash names its hash."""
        rows = self._rows(log)
        fourth = json.loads(_body(log, 4))
        origin = Head(seq=4, content_hash=fourth["contentHash"], batch=fourth["batch"])
        assert log.head() == walk_rows(rows[4:], origin)
        with pytest.raises(ChainError) as caught:
            walk_rows(rows[4:], Head(seq=4, content_hash=None, batch=fourth["batch"]))
        assert 5 == caught.value.seq


class TestTamperedBytes:
    """A changed byte is found at its seq, inside a range or on either side of a boundary."""

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [1, 2, 3, 4, 5, 6, 7])
    def test_middle_byte(self, log: SqliteStore, processes: int, seq: int) -> None:
        """One byte in the middle of one body names that seq, with the sequential reason."""
        body = _body(log, seq)
        _set(log, seq, body=_changed(body, len(body) // 2))
        assert (seq, "content hash does not match the event's bytes") == _fault(log, processes)

    @pytest.mark.parametrize("seq", [4, 5])
    def test_every_byte_at_the_boundary(self, log: SqliteStore, seq: int) -> None:
        """Every offset of the last event of one range and the first of the next is caught."""
        body = _body(log, seq)
        missed = []
        for number, offset in enumerate(range(0, len(body), 3)):
            _set(log, seq, body=_changed(body, offset))
            with _forks(number):
                found = _fault(log, 2)
            if found != _sequential(log) or found != _store_says(log) or found[0] != seq:
                missed.append(offset)
        _set(log, seq, body=body)
        assert [] == missed

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_stale_hash_column(self, log: SqliteStore, processes: int) -> None:
        """A content_hash column naming other bytes is a hash fault at its seq."""
        _set(log, 5, content_hash="f" * 64)
        assert (5, "content hash does not match the event's bytes") == _fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [3, 4, 5, 6])
    def test_consistent_forgery_breaks_the_next_link(
        self, log: SqliteStore, forge: Reseal, processes: int, seq: int
    ) -> None:
        """A re-sealed event with a matching column is caught by the next prevHash."""
        document = json.loads(_body(log, seq))
        document["data"]["outcome"] = "rejected"
        forged = forge(document)
        _set(log, seq, body=forged, content_hash=json.loads(forged)["contentHash"])
        reason = "prevHash does not match the previous event's contentHash"
        assert (seq + 1, reason) == _fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize(("first", "second"), [(1, 2), (4, 5), (3, 6), (2, 7)])
    def test_swapped_bodies(
        self, log: SqliteStore, processes: int, first: int, second: int
    ) -> None:
        """Two exchanged bodies are reported at the earlier one, as the sequential walk does."""
        one, two = _body(log, first), _body(log, second)
        _set(log, first, body=two)
        _set(log, second, body=one)
        found = _fault(log, processes)
        assert (first, _store_says(log)) == (found[0], found)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_seq_member_that_lies(self, log: SqliteStore, forge: Reseal, processes: int) -> None:
        """A re-sealed body that names another seq is refused at its position."""
        document = json.loads(_body(log, 5))
        document["seq"] = 50
        forged = forge(document)
        _set(log, 5, body=forged, content_hash=json.loads(forged)["contentHash"])
        reason = "the seq in the stored bytes does not match its position"
        assert (5, reason) == _fault(log, processes)


class TestMissingEvents:
    """Gaps are named by their first missing seq, with the next stored seq."""

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize(
        ("deleted", "missing", "next_stored"),
        [((1,), 1, 2), ((4,), 4, 5), ((5,), 5, 6), ((3, 4, 5), 3, 6), ((6,), 6, 7)],
    )
    def test_gap(
        self,
        log: SqliteStore,
        processes: int,
        deleted: tuple[int, ...],
        missing: int,
        next_stored: int,
    ) -> None:
        """A deleted run of events, inside a range or across a boundary."""
        for seq in deleted:
            log.connection.execute("DELETE FROM events WHERE seq = ?", (seq,))
        expected = (missing, f"seq {missing} is missing (next stored is {next_stored})")
        assert expected == _fault(log, processes)
        assert expected == _store_says(log)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_cut_tail_walks_to_the_last_stored_event(
        self, log: SqliteStore, processes: int
    ) -> None:
        """Without its last batches the walk ends at seq 4; the head is the caller's to compare."""
        log.connection.execute("DELETE FROM events WHERE seq >= 5")
        assert 4 == walk_chain(log.path, EMPTY, processes=processes).seq


class TestUpto:
    """``upto`` stops the walk after a seq, as a caller's snapshot saw the log."""

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("upto", [1, 4, 5, 6])
    def test_stops_after_upto(self, log: SqliteStore, processes: int, upto: int) -> None:
        """The walk ends at ``upto``, whatever follows it, even a damaged event."""
        body = _body(log, EVENTS)
        _set(log, EVENTS, body=_changed(body, len(body) // 2))
        document = json.loads(_body(log, upto))
        expected = Head(seq=upto, content_hash=document["contentHash"], batch=document["batch"])
        assert expected == walk_chain(log.path, EMPTY, processes=processes, upto=upto)
        assert EVENTS == _fault(log, processes)[0]

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_a_log_shorter_than_upto_ends_early(self, log: SqliteStore, processes: int) -> None:
        """Without its last batches the walk ends at seq 4, upto or not."""
        log.connection.execute("DELETE FROM events WHERE seq >= 5")
        assert 4 == walk_chain(log.path, EMPTY, processes=processes, upto=EVENTS).seq

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_a_gap_before_upto_is_named(self, log: SqliteStore, processes: int) -> None:
        """A missing seq before ``upto`` names the next stored seq, even one after ``upto``."""
        log.connection.execute("DELETE FROM events WHERE seq IN (5, 6)")
        expected = (5, "seq 5 is missing (next stored is 7)")
        with pytest.raises(ChainError) as caught:
            walk_chain(log.path, EMPTY, processes=processes, upto=6)
        assert expected == (caught.value.seq, caught.value.reason)


class TestBatches:
    """A batch may stay or step by one, and the first event opens the batch after the origin's."""

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [5, 6, 7])
    def test_batch_jump(self, log: SqliteStore, forge: Reseal, processes: int, seq: int) -> None:
        """A self-consistent event whose batch jumps ahead is refused at its seq."""
        document = json.loads(_body(log, seq))
        before = json.loads(_body(log, seq - 1))["batch"]
        document["batch"] = 9
        forged = forge(document)
        _set(log, seq, body=forged, content_hash=json.loads(forged)["contentHash"])
        if seq < EVENTS:  # keep the next link intact so the batch is the first fault
            following = json.loads(_body(log, seq + 1))
            following["prevHash"] = json.loads(forged)["contentHash"]
            following["batch"] = 9
            again = forge(following)
            _set(log, seq + 1, body=again, content_hash=json.loads(again)["contentHash"])
        assert (seq, f"batch 9 does not follow batch {before}") == _fault(log, processes)


class TestOrigin:
    """A log whose first stored event is not seq 1 walks from the head it continues."""

    @staticmethod
    def _cut(log: SqliteStore, last: int) -> Head:
        """Delete seqs up to ``last``; return the head they left behind."""
        document = json.loads(_body(log, last))
        log.connection.execute("DELETE FROM events WHERE seq <= ?", (last,))
        return Head(seq=last, content_hash=document["contentHash"], batch=document["batch"])

    @pytest.fixture
    def cut(self, log: SqliteStore) -> tuple[SqliteStore, Head]:
        """The log without its first two batches (seqs 1-4): it starts at seq 5, batch 3."""
        return log, self._cut(log, 4)

    @pytest.mark.parametrize("processes", [*PROCESSES, 5])
    def test_walks_from_the_origin(self, cut: tuple[SqliteStore, Head], processes: int) -> None:
        """Seqs 3-7 chain from the origin's hash; the batch rule starts from its batch."""
        store, origin = cut
        assert store.head() == walk_chain(store.path, origin, processes=processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_wrong_origin_hash(self, cut: tuple[SqliteStore, Head], processes: int) -> None:
        """The first event must name the origin's hash."""
        store, origin = cut
        wrong = Head(seq=origin.seq, content_hash="0" * 64, batch=origin.batch)
        reason = "prevHash does not match the previous event's contentHash"
        assert (5, reason) == _fault(store, processes, wrong)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_first_event_must_open_the_next_batch(self, log: SqliteStore, processes: int) -> None:
        """Cut inside batch 2, seq 3 opens no batch after the origin's; one batch back it does."""
        origin = self._cut(log, 2)
        assert (3, "batch 2 does not follow batch 2") == _fault(log, processes, origin)
        moved = Head(seq=origin.seq, content_hash=origin.content_hash, batch=origin.batch - 1)
        assert log.head() == walk_chain(log.path, moved, processes=processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_events_before_the_origin(self, log: SqliteStore, processes: int) -> None:
        """An origin past the first stored event: that event is out of place."""
        document = json.loads(_body(log, 4))
        origin = Head(seq=4, content_hash=document["contentHash"], batch=document["batch"])
        assert (5, "seq 5 is missing (next stored is 1)") == _fault(log, processes, origin)

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [5, 6, 7])
    def test_tampered_after_the_origin(
        self, cut: tuple[SqliteStore, Head], processes: int, seq: int
    ) -> None:
        """A changed byte after a cut is found at its seq."""
        store, origin = cut
        body = _body(store, seq)
        _set(store, seq, body=_changed(body, len(body) // 3))
        found = _fault(store, processes, origin)
        assert (seq, _sequential(store, origin)) == (found[0], found)


class TestFailures:
    """A walking process that fails is an error of the walk, never a verdict on the chain."""

    def test_a_failing_process_is_a_store_error(
        self, log: SqliteStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An exception in another range's process comes back as a StoreError."""
        walk = chainwalk._walk

        def failing(
            uri: str, low: int | None, high: int | None, origin: Head | None, deep: bool
        ) -> object:
            if low is not None:
                raise RuntimeError("disk on fire")
            return walk(uri, low, high, origin, deep)

        monkeypatch.setattr(chainwalk, "_walk", failing)
        with pytest.raises(StoreError, match="disk on fire"):
            walk_chain(log.path, EMPTY, processes=2)

    def test_a_missing_database_is_a_store_error(self, tmp_path: Any) -> None:
        """A path with no database behind it cannot be walked."""
        with pytest.raises(StoreError):
            walk_chain(tmp_path / "absent.db", EMPTY, processes=2)


def _deep_fault(store: SqliteStore, processes: int, origin: Head = EMPTY) -> tuple[int, str]:
    with pytest.raises(ChainError) as caught:
        walk_chain(store.path, origin, processes=processes, deep=True)
    return caught.value.seq, caught.value.reason


def _deep_reference(store: SqliteStore, origin: Head = EMPTY) -> tuple[int, str]:
    """What the one-process deep walk of ``pwf log verify`` reports."""
    with pytest.raises(ChainError) as caught:
        verify_rows(store.connection.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq"), origin)  # noqa: S608 - constant columns
    return caught.value.seq, caught.value.reason


class TestDeep:
    """The deep walk split over ranges reports what the one-process deep walk reports."""

    @pytest.mark.parametrize("processes", [*PROCESSES, 7])
    def test_returns_the_head(self, log: SqliteStore, processes: int) -> None:
        """An intact log walks to its head however it is split."""
        assert log.head() == walk_chain(log.path, EMPTY, processes=processes, deep=True)

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [1, 2, 3, 4, 5, 6, 7])
    @pytest.mark.parametrize(
        "damage",
        ["middle byte", "run_id column", "type column", "at column", "gap", "batch jump"],
    )
    def test_damage_is_named_as_one_process_names_it(
        self, log: SqliteStore, forge: Reseal, processes: int, seq: int, damage: str
    ) -> None:
        """Bytes, columns, gaps and forged batches: same seq, same reason, any split."""
        body = _body(log, seq)
        if damage == "middle byte":
            _set(log, seq, body=_changed(body, len(body) // 2))
        elif damage == "gap":
            log.connection.execute("DELETE FROM events WHERE seq = ?", (seq,))
            if seq == EVENTS:  # a cut tail walks to the last stored event; the head tells
                assert EVENTS - 1 == walk_chain(log.path, EMPTY, processes=processes, deep=True).seq
                assert log.verify().first_bad_seq == EVENTS
                return
        elif damage == "batch jump":
            document = json.loads(body)
            document["batch"] = 9
            forged = forge(document)
            _set(log, seq, body=forged, content_hash=json.loads(forged)["contentHash"])
        else:
            column = damage.split(maxsplit=1)[0]
            _set(log, seq, **{column: "run-x" if column != "at" else 1})
        expected = _deep_reference(log)
        assert expected[0] == seq or damage == "batch jump"
        assert expected == _deep_fault(log, processes)
        assert expected == (log.verify().first_bad_seq, log.verify().reason)

    @pytest.mark.parametrize("seq", [4, 5])
    def test_every_byte_at_the_boundary(self, log: SqliteStore, seq: int) -> None:
        """Every offset of the last event of one range and the first of the next."""
        body = _body(log, seq)
        missed = []
        for number, offset in enumerate(range(0, len(body), 3)):
            _set(log, seq, body=_changed(body, offset))
            with _forks(number):
                found = _deep_fault(log, 2)
            if found != _deep_reference(log):
                missed.append(offset)
        _set(log, seq, body=body)
        assert [] == missed

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize(("first", "second"), [(1, 2), (4, 5), (3, 6), (2, 7)])
    def test_swapped_rows(self, log: SqliteStore, processes: int, first: int, second: int) -> None:
        """Two exchanged rows, columns and all, break the links at the earlier seq."""
        rows = {
            seq: log.connection.execute(
                "SELECT batch, type, at, run_id, content_hash, prev_hash, body"
                " FROM events WHERE seq = ?",
                (seq,),
            ).fetchone()
            for seq in (first, second)
        }
        names = ("batch", "type", "at", "run_id", "content_hash", "prev_hash", "body")
        _set(log, second, **dict(zip(names, rows[first], strict=True)))
        _set(log, first, **dict(zip(names, rows[second], strict=True)))
        expected = _deep_reference(log)
        assert expected == _deep_fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_from_an_origin(self, log: SqliteStore, processes: int) -> None:
        """A log cut after seq 4 walks from the head it continues, and its first link counts."""
        document = json.loads(_body(log, 4))
        log.connection.execute("DELETE FROM events WHERE seq <= 4")
        origin = Head(seq=4, content_hash=document["contentHash"], batch=document["batch"])
        assert log.head() == walk_chain(log.path, origin, processes=processes, deep=True)
        wrong = Head(seq=4, content_hash="0" * 64, batch=origin.batch)
        assert _deep_reference(log, wrong) == _deep_fault(log, processes, wrong)


class TestForgedBodies:
    """Re-sealed bodies the fast path cannot read are judged by the exact rules (DOMAIN §2.1).

    The events after a forged one are re-sealed to name it, so the forged
    event's own link is the only thing that can fail.
    """

    @staticmethod
    def _forge(log: SqliteStore, forge: Reseal, seq: int, document: dict[str, Any]) -> None:
        for at in range(seq, EVENTS + 1):
            forged = forge(document)
            _set(log, at, body=forged, content_hash=json.loads(forged)["contentHash"])
            if at < EVENTS:
                document = json.loads(_body(log, at + 1))
                document["prevHash"] = json.loads(forged)["contentHash"]

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_the_top_level_batch_counts_not_one_inside_data(
        self, log: SqliteStore, forge: Reseal, processes: int
    ) -> None:
        """A jump to batch 9 is refused although ``data`` holds a batch that would follow."""
        document = json.loads(_body(log, 5))
        document["batch"] = 9
        document["data"] = {**document["data"], "a": 1, "batch": 3}
        self._forge(log, forge, 5, document)
        assert (5, "batch 9 does not follow batch 2") == _fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_the_top_level_prev_hash_counts_not_one_inside_data(
        self, log: SqliteStore, forge: Reseal, processes: int
    ) -> None:
        """A wrong ``prevHash`` is refused although ``data`` names the right one."""
        document = json.loads(_body(log, 5))
        right = json.loads(_body(log, 4))["contentHash"]
        document["prevHash"] = "0" * 64
        document["data"] = {**document["data"], "a": 1, "prevHash": right}
        self._forge(log, forge, 5, document)
        reason = "prevHash does not match the previous event's contentHash"
        assert (5, reason) == _fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [1, 2])
    def test_a_batch_that_is_not_a_number_follows_nothing(
        self, log: SqliteStore, forge: Reseal, processes: int, seq: int
    ) -> None:
        """Seq 1 must open batch 1 and seq 2 stay in it or open batch 2: a text "1" does neither."""
        document = json.loads(_body(log, seq))
        document["batch"] = "1"
        self._forge(log, forge, seq, document)
        assert seq == _fault(log, processes)[0]

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("case", [(2, 0, 1), (2, 3, 1), (6, 2, 3), (6, 5, 3)])
    def test_a_batch_may_not_step_back_or_jump_by_two(
        self, log: SqliteStore, forge: Reseal, processes: int, case: tuple[int, int, int]
    ) -> None:
        """After a batch that stayed (seq 2) or stepped (seq 6), only the same or the next one."""
        seq, batch, before = case
        document = json.loads(_body(log, seq))
        document["batch"] = batch
        self._forge(log, forge, seq, document)
        assert (seq, f"batch {batch} does not follow batch {before}") == _fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("batch", [2, 5])
    def test_a_batch_after_one_read_exactly_may_not_step_back_or_jump_by_two(
        self, log: SqliteStore, forge: Reseal, processes: int, batch: int
    ) -> None:
        """Seq 5, of another schema, opens batch 3 on the exact path; seq 6 must then stay in 3."""
        document = json.loads(_body(log, 5))
        document["schema"] = "pwf.event.v0"
        self._forge(log, forge, 5, document)
        document = json.loads(_body(log, 6))
        document["batch"] = batch
        self._forge(log, forge, 6, document)
        assert (6, f"batch {batch} does not follow batch 3") == _fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [1, 4])
    def test_a_body_without_its_content_hash_is_refused_at_its_seq(
        self, log: SqliteStore, processes: int, seq: int
    ) -> None:
        """An event without a ``contentHash`` member has no hash to chain."""
        document = json.loads(_body(log, seq))
        del document["contentHash"]
        _set(log, seq, body=canonical.encode(document))
        assert seq == _fault(log, processes)[0]

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [1, 5])
    def test_a_content_hash_inside_data_is_not_the_events_own(
        self, log: SqliteStore, forge: Reseal, processes: int, seq: int
    ) -> None:
        """Only the top-level ``contentHash`` is the event's own; one inside ``data`` is data."""
        document = json.loads(_body(log, seq))
        document["data"] = {**document["data"], "contentHash": "0" * 64}
        self._forge(log, forge, seq, document)
        last = json.loads(_body(log, EVENTS))
        head = Head(seq=EVENTS, content_hash=last["contentHash"], batch=last["batch"])
        assert head == walk_chain(log.path, EMPTY, processes=processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_log_compacted_inside_the_log_is_refused(
        self, log: SqliteStore, forge: Reseal, processes: int
    ) -> None:
        """DOMAIN §13.2: ``log.compacted`` may only open a log, wherever its links hold."""
        document = json.loads(_body(log, 6))
        document["type"] = "log.compacted"
        self._forge(log, forge, 6, document)
        assert (6, "log.compacted may only open a log") == _fault(log, processes)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_an_event_of_another_schema_may_stay_in_its_batch(
        self, log: SqliteStore, forge: Reseal, processes: int
    ) -> None:
        """The chain rules read no schema: seq 3 of another schema stays in batch 2 and walks."""
        document = json.loads(_body(log, 3))
        document["schema"] = "pwf.event.v0"
        self._forge(log, forge, 3, document)
        last = json.loads(_body(log, EVENTS))
        head = Head(seq=EVENTS, content_hash=last["contentHash"], batch=last["batch"])
        assert head == walk_chain(log.path, EMPTY, processes=processes)


class TestDeepLinks:
    """The deep walk checks each link once the event itself is sound (DOMAIN §2.1)."""

    @pytest.mark.parametrize("processes", PROCESSES)
    @pytest.mark.parametrize("seq", [3, 4, 6])
    def test_a_consistent_forgery_breaks_the_next_link(
        self, log: SqliteStore, forge: Reseal, processes: int, seq: int
    ) -> None:
        """A re-sealed event with its hash column matching is caught by the next prevHash."""
        document = json.loads(_body(log, seq))
        document["data"]["outcome"] = "rejected"
        forged = forge(document)
        _set(log, seq, body=forged, content_hash=json.loads(forged)["contentHash"])
        reason = "prevHash does not match the previous event's contentHash"
        with pytest.raises(ChainError) as caught:
            walk_chain(log.path, EMPTY, processes=processes, deep=True)
        assert (seq + 1, reason) == (caught.value.seq, caught.value.reason)

    @pytest.mark.parametrize("processes", PROCESSES)
    def test_the_first_event_must_open_the_batch_after_the_origin(
        self, log: SqliteStore, processes: int
    ) -> None:
        """Cut inside batch 2, seq 3 stays in the origin's batch: refused at seq 3."""
        document = json.loads(_body(log, 2))
        log.connection.execute("DELETE FROM events WHERE seq <= 2")
        origin = Head(seq=2, content_hash=document["contentHash"], batch=document["batch"])
        with pytest.raises(ChainError) as caught:
            walk_chain(log.path, origin, processes=processes, deep=True)
        assert (3, "batch 2 does not follow batch 2") == (caught.value.seq, caught.value.reason)


def _rows(store: SqliteStore, pruned: frozenset[int]) -> list[tuple[object, ...]]:
    """The bytes-only walk's rows of the log, the events at ``pruned`` without their bytes."""
    rows = list(chainwalk.stored_rows(store.connection, None, None, deep=False))
    return [(*row[:2], None, *row[3:]) if row[0] in pruned else tuple(row) for row in rows]


def _walk_fault(rows: list[tuple[object, ...]], origin: Head = EMPTY) -> tuple[int, str]:
    with pytest.raises(ChainError) as caught:
        walk_rows(rows, origin)
    return caught.value.seq, caught.value.reason


class TestPrunedRows:
    """A pruned event (ADR 0103) is walked by its kept hash, batch and link, with its bytes gone."""

    @pytest.mark.parametrize("pruned", [(1,), (2, 3), (4,), (7,), (1, 2, 3, 4, 5, 6, 7)])
    def test_the_walk_reaches_the_same_head(
        self, log: SqliteStore, pruned: tuple[int, ...]
    ) -> None:
        whole = walk_rows(_rows(log, frozenset()), EMPTY)
        assert walk_rows(_rows(log, frozenset(pruned)), EMPTY) == whole
        assert whole.seq == EVENTS

    @pytest.mark.parametrize("seq", [1, 2, 5, 7])
    def test_a_range_may_open_on_a_pruned_event(self, log: SqliteStore, seq: int) -> None:
        """Ranges open where a batch does (the first event of each of the four batches)."""
        whole = _rows(log, frozenset())
        rows = _rows(log, frozenset({seq}))
        origin = EMPTY
        if seq > 1:
            hash_before, batch_before = whole[seq - 2][1], whole[seq - 2][3]
            assert isinstance(hash_before, bytes)
            assert isinstance(batch_before, int)
            origin = Head(seq - 1, hash_before.decode(), batch_before)
        assert walk_rows(rows[seq - 1 :], origin) == walk_rows(whole[seq - 1 :], origin)

    @pytest.mark.parametrize("seq", [2, 4, 6])
    def test_a_changed_kept_hash_breaks_the_next_link(self, log: SqliteStore, seq: int) -> None:
        rows = _rows(log, frozenset({seq}))
        rows[seq - 1] = (seq, b"0" * 64, None, *rows[seq - 1][3:])
        found, reason = _walk_fault(rows)
        assert found == seq + 1
        assert "prevHash" in reason

    @pytest.mark.parametrize("seq", [2, 4, 6])
    def test_a_changed_link_is_named_at_the_pruned_seq(self, log: SqliteStore, seq: int) -> None:
        rows = _rows(log, frozenset({seq}))
        rows[seq - 1] = (*rows[seq - 1][:4], "0" * 64)
        assert _walk_fault(rows)[0] == seq

    @pytest.mark.parametrize("seq", [1, 2, 4, 6])
    def test_a_changed_batch_is_named_at_the_pruned_seq(self, log: SqliteStore, seq: int) -> None:
        rows = _rows(log, frozenset({seq}))
        batch = rows[seq - 1][3]
        assert isinstance(batch, int)
        rows[seq - 1] = (*rows[seq - 1][:3], batch + 5, rows[seq - 1][4])
        assert _walk_fault(rows)[0] in {seq, seq + 1}

    @pytest.mark.parametrize("seq", [1, 3, 7])
    def test_a_pruned_row_out_of_place_is_named(self, log: SqliteStore, seq: int) -> None:
        rows = _rows(log, frozenset({seq}))
        rows[seq - 1] = (seq + 10, *rows[seq - 1][1:])
        found, reason = _walk_fault(rows)
        assert found == seq
        assert "missing" in reason

    @pytest.mark.parametrize(
        "damage",
        [
            lambda row: (row[0], None, None, *row[3:]),
            lambda row: (row[0], row[1], None, None, row[4]),
            lambda row: (row[0], row[1], None, str(row[3])),
            lambda row: row[:3],
        ],
        ids=["no hash", "no batch", "batch as text", "short row"],
    )
    @pytest.mark.parametrize("seq", [1, 4])
    def test_a_pruned_row_without_its_kept_columns_is_refused(
        self, log: SqliteStore, seq: int, damage: Callable[[tuple[object, ...]], tuple[object, ...]]
    ) -> None:
        rows = _rows(log, frozenset({seq}))
        rows[seq - 1] = damage(rows[seq - 1])
        assert _walk_fault(rows) == (seq, "the pruned event's hash or batch is not stored")

    def test_a_range_opening_on_a_pruned_event_inside_a_batch_is_refused(
        self, log: SqliteStore
    ) -> None:
        """As for an event with its bytes: cut inside batch 2, seq 3 must open batch 3."""
        whole = _rows(log, frozenset())
        rows = _rows(log, frozenset({3}))
        hash_before, batch_before = whole[1][1], whole[1][3]
        assert isinstance(hash_before, bytes)
        assert isinstance(batch_before, int)
        origin = Head(2, hash_before.decode(), batch_before)
        expected = _walk_fault(whole[2:], origin)
        assert _walk_fault(rows[2:], origin) == expected == (3, "batch 2 does not follow batch 2")
