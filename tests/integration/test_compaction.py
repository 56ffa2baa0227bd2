"""Prune apply: projections equal the old ones minus the trees, every seq stays, and it proves.

DOMAIN §13.2 (pwf [D]): "projections after compaction must equal projections
after deleting those trees"; a prune keeps every seq and moves only the
removed events' bytes to its backup (ADR 0103).  Logs compacted before that
(ADR 0018) are still read and proven: they are made here by hand.  The
expected side is computed here the way the original prunes: rows of the
removed runs deleted, their links in recorded commands and terminal views
set null.  Blobs are the log's content,
so a blob stays while a kept event still carries it; the check for them is
that no kept row points at a missing blob and that nothing new appeared.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwf import merkle
from pwf.cli._options import open_store
from pwf.commands.prune import iso_utc
from pwf.errors import InputError, StoreError
from pwf.events import Actor, LogPruned
from pwf.fold.rebuild import rebuild
from pwf.fold.replay import replay
from pwf.host import _compacting
from pwf.store import image, pruned
from pwf.store.compaction import prove
from pwf.store.jsonl import export_jsonl, import_jsonl
from pwf.store.opening import sqlite_file
from pwf.store.sqlite import SqliteStore
from pwf.store.tree import proofs
from pwf.verify import check

if TYPE_CHECKING:
    from tests.integration._harness import (
        Fixture,
        session_history,
        traffic_module,
    )
    from tests.integration._pruning import assert_pruned, prune_failure
else:
    from _harness import (
        Fixture,
        session_history,
        traffic_module,
    )
    from _pruning import assert_pruned, prune_failure

if TYPE_CHECKING:
    from tests._compacted import compact_by_hand
    from tests._dbfile import checkpoint, projections
    from tests._tamper import editable
else:
    from _compacted import compact_by_hand
    from _dbfile import checkpoint, projections
    from _tamper import editable


def _session_history(db: Path) -> tuple[Fixture, int]:
    return session_history(db)


def _traffic_history(
    db: Path, seed: int = 11, runs: int = 20, share: float = 0.5
) -> tuple[Fixture, int]:
    """Runs of the demo's traffic; the cutoff falls after ``share`` of them finished."""
    fx = Fixture(db)
    traffic = traffic_module().Traffic(str(db), seed)
    for index in range(runs):
        traffic.run(index)
    traffic.store.close()
    fx.now = traffic.now
    finished = sorted(row["finished_at"] for row in fx.rows("runs"))
    return fx, finished[min(int(len(finished) * share), len(finished) - 1)]


def _prune(fx: Fixture, cutoff: int, backup: Path, key: str = "prune") -> Any:
    return fx.request(
        "state.prune",
        {"before": iso_utc(cutoff), "apply": True, "backupPath": str(backup)},
        key=key,
        rid=key,
        at=fx.now + 1,
    )


@pytest.mark.parametrize("history", [_session_history, _traffic_history])
def test_compaction_equals_the_old_projections_minus_the_trees(
    tmp_path: Path, history: Any
) -> None:
    fx, cutoff = history(tmp_path / "state.db")
    _assert_compaction_matches(fx, cutoff, tmp_path)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(min_value=0, max_value=2**16),
    runs=st.integers(min_value=1, max_value=8),
    share=st.floats(min_value=0.0, max_value=1.0),
)
def test_compaction_matches_for_any_traffic_and_cutoff(seed: int, runs: int, share: float) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        fx, cutoff = _traffic_history(Path(scratch) / "state.db", seed, runs, share)
        try:
            _assert_compaction_matches(fx, cutoff + 1, Path(scratch))
        finally:
            fx.close()


def _assert_compaction_matches(fx: Fixture, cutoff: int, tmp_path: Path) -> None:
    """Prune before ``cutoff``; the result is the old projections minus the trees, and proves."""
    db = fx.store.projections_file.path
    checkpoint(db)
    old = tmp_path / "old.db"
    shutil.copy(db, old)
    old_blobs = {row["blob_hash"] for row in fx.rows("blobs")}

    answer = _prune(fx, cutoff, tmp_path / "b" / "full.sqlite")
    assert answer.outcome == "accepted", answer
    opening = assert_pruned(fx.store, old, tmp_path / "b" / "full.sqlite", "prune")
    assert opening.removed_run_ids
    assert answer.receipt["selectedRuns"] == len(opening.removed_run_ids)
    new_blobs = {row["blob_hash"] for row in fx.rows("blobs")}
    assert answer.receipt["deletedBlobs"] == len(old_blobs - new_blobs)
    assert check(fx.store).ok
    fx.assert_rebuild_equals_live()


def test_a_pruned_log_replays_at_its_head_and_prunes_again(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fx, cutoff = _traffic_history(db)
    before = fx.store.head()
    first = _prune(fx, cutoff, tmp_path / "b" / "one.sqlite", key="prune-1")
    assert first.outcome == "accepted", first
    assert fx.store.origin().seq == 0  # every seq stays
    [record] = list(fx.store.find(type=LogPruned.TAG))
    assert record.seq > before.seq

    report = replay(fx.store, tmp_path / "replayed.db")
    assert report.head == fx.store.head()
    assert projections(tmp_path / "replayed.db") == projections(fx.store.projections_file.path)
    with pytest.raises(InputError, match=r"was pruned.*replay the backup .*one\.sqlite"):
        replay(fx.store, tmp_path / "gone.db", until_seq=before.seq)
    assert not (tmp_path / "gone.db").exists()
    exported = tmp_path / "log.jsonl"
    with exported.open("wb") as out:
        export_jsonl(fx.store, out, record.seq + 1)  # the part after the pruned seqs
    rebuilt = rebuild(fx.store)
    head = fx.store.head()
    assert rebuilt.seq == head.seq
    assert check(fx.store).ok

    later = max(row["finished_at"] for row in fx.rows("runs")) + 1
    second = _prune(fx, later, tmp_path / "b" / "two.sqlite", key="prune-2")
    assert second.outcome == "accepted", second
    assert fx.store.verify().ok
    assert fx.count("runs") == 0
    assert prune_failure(fx.store, tmp_path / "b" / "two.sqlite") is None
    assert prune_failure(fx.store, tmp_path / "b" / "one.sqlite") is None
    with SqliteStore(tmp_path / "b" / "two.sqlite", read_only=True) as two:
        assert prune_failure(two, tmp_path / "b" / "one.sqlite") is None


def test_a_compacted_log_round_trips_and_replays(tmp_path: Path) -> None:
    """A log compacted before ADR 0103 exports, imports, replays and rebuilds as it did."""
    db = tmp_path / "state.db"
    fx, _cutoff = _traffic_history(db)
    fx.close()
    compact_by_hand(db, tmp_path / "b" / "one.sqlite")
    with SqliteStore(db) as store:
        origin = store.origin()
        assert origin.seq > 0
        exported = tmp_path / "log.jsonl"
        with exported.open("wb") as out:
            export_jsonl(store, out)
        with (
            open_store(str(tmp_path / "copy.db"), create=True) as copy,
            exported.open("rb") as source,
        ):
            head = import_jsonl(copy, source)
            assert head == store.head()
            assert copy.verify().ok
        report = replay(store, tmp_path / "replayed.db", until_seq=origin.seq + 5)
        assert report.head.seq <= origin.seq + 5
        assert report.events == report.head.seq - origin.seq  # the events the file holds
        with pytest.raises(InputError, match=rf"seq {origin.seq} was compacted away.*one\.sqlite"):
            replay(store, tmp_path / "gone.db", until_seq=origin.seq)
        assert prove(store, tmp_path / "b" / "one.sqlite").ok


def test_a_tampered_or_foreign_backup_does_not_prove(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fx, cutoff = _session_history(db)
    backup = tmp_path / "b" / "full.sqlite"
    assert _prune(fx, cutoff, backup).outcome == "accepted"
    data = bytearray(backup.read_bytes())
    data[-10] ^= 0xFF
    forged = tmp_path / "b" / "forged.sqlite"
    forged.write_bytes(bytes(data))
    assert "SHA-256" in (prune_failure(fx.store, forged) or "")
    other, _ = _session_history(tmp_path / "other.db")
    checkpoint(other.store.projections_file.path)
    assert prune_failure(fx.store, tmp_path / "other.db") is not None


@pytest.mark.parametrize(
    ("tamper", "failure"),
    [
        pytest.param(
            "UPDATE _pwf_pruned SET leaf = zeroblob(32)"
            " WHERE seq = (SELECT min(seq) FROM _pwf_pruned)",
            r"its event at seq \d+ is not the leaf kept",
            id="a leaf kept changed",
        ),
        pytest.param(
            "DELETE FROM _pwf_pruned WHERE seq = (SELECT min(seq) FROM _pwf_pruned)",
            r"it holds \d+ of the \d+ bodies log\.pruned took",
            id="a leaf kept lost",
        ),
        pytest.param(
            "INSERT INTO _pwf_pruned (seq, leaf, taken)"
            " SELECT max(taken), zeroblob(32), max(taken) FROM _pwf_pruned",
            r"it holds no bytes of the event at seq \d+",
            id="an event the backup never held",
        ),
    ],
)
def test_a_backup_that_does_not_hold_the_leaves_kept_does_not_prove(
    tmp_path: Path, tamper: str, failure: str
) -> None:
    """The backup named proves each body against the leaf the log kept, and all of them."""
    db = tmp_path / "state.db"
    fx, cutoff = _session_history(db)
    backup = tmp_path / "b" / "full.sqlite"
    assert _prune(fx, cutoff, backup).outcome == "accepted"
    assert prune_failure(fx.store, backup) is None
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute(tamper)
    found = prune_failure(fx.store, backup)
    assert found is not None
    assert re.fullmatch(failure, found)


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_backup_is_proven_a_few_bodies_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Bodies are read in chunks; a leaf wrong in any chunk is named, with the bodies before it.

    Read all at once, the bodies of a prune that took 429 801 events held
    622 MB; in chunks, one chunk's.
    """
    monkeypatch.setattr(pruned, "_CHUNK", 2)
    db = tmp_path / "state.db"
    fx, cutoff = _session_history(db)
    backup = tmp_path / "b" / "full.sqlite"
    assert _prune(fx, cutoff, backup).outcome == "accepted"
    live = sqlite_file(fx.store).connection
    proof = pruned.prove_pruned(fx.store, live, backup)
    assert proof is not None
    assert (None, proof.pruned.removed_events) == (proof.failure, proof.proven)
    assert proof.proven > 4  # more than two chunks
    seqs = [row[0] for row in live.execute("SELECT seq FROM _pwf_pruned ORDER BY seq")]
    wrong = seqs[0] if where == "first" else seqs[-1]
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("UPDATE _pwf_pruned SET leaf = zeroblob(32) WHERE seq = ?", (wrong,))
    found = pruned.prove_pruned(fx.store, sqlite_file(fx.store).connection, backup)
    assert found is not None
    assert (f"its event at seq {wrong} is not the leaf kept", seqs.index(wrong)) == (
        found.failure,
        found.proven,
    )


@pytest.mark.parametrize(
    ("target", "name", "at"),
    [
        pytest.param(_compacting.Prepared, "_fold", 1, id="preparing, off the lock"),
        pytest.param(_compacting, "_copy_rows", 2, id="copying the tail, under the lock"),
        pytest.param(image, "same_shape", 1, id="checking the image, under the lock"),
        pytest.param(image._Progress, "__call__", 2, id="copying the image, under the lock"),
    ],
)
def test_a_prune_that_fails_midway_leaves_everything_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: object, name: str, at: int
) -> None:
    """A failure before the image is installed leaves the live file, and refuses the prune."""
    db = tmp_path / "state.db"
    fx, cutoff = _traffic_history(db)
    before = projections(fx.store.projections_file.path)
    head = fx.store.head()
    calls = {"n": 0}
    original = getattr(target, name)

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == at:
            raise StoreError("the disk went away")
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, failing)
    answer = _prune(fx, cutoff, tmp_path / "b" / "x.sqlite")
    assert (answer.outcome, answer.error) == ("rejected", "prune failed: the disk went away")
    assert list(fx.store.find(type=LogPruned.TAG)) == []
    assert fx.store.head().seq == head.seq + 1  # the recorded rejection
    after = projections(fx.store.projections_file.path)
    after["host_commands"] = [row for row in after["host_commands"] if row[0] != "prune"]
    added = set(after.pop("blobs")) - set(before.pop("blobs"))
    assert after == before
    assert len(added) == 1  # the rejection's error text
    assert not db.with_name(db.name + ".maintenance.lock").exists()
    assert fx.store.verify().ok
    fx.assert_rebuild_equals_live()


def test_the_opening_event_cannot_be_dropped_or_repeated(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fx, _cutoff = _session_history(db)
    fx.close()
    compact_by_hand(db, tmp_path / "b" / "full.sqlite")
    with SqliteStore(db, read_only=True) as compacted:
        origin = compacted.origin()
    opening = origin.seq + 1
    dropped = tmp_path / "dropped.db"
    shutil.copy(db, dropped)
    with editable(sqlite3.connect(dropped)) as raw:
        raw.execute("DELETE FROM events WHERE seq = ?", (opening,))
    with SqliteStore(dropped) as store:
        report = store.verify()
        assert (report.first_bad_seq, report.reason) == (
            1,
            f"seq 1 is missing (next stored is {opening + 1})",
        )
    repeated = tmp_path / "repeated.db"
    shutil.copy(db, repeated)
    with SqliteStore(repeated) as store, store.transaction() as tx:
        event = next(store.entries(opening, opening)).event
        tx.append([event], at=1, actor=Actor(type="host", id="pwf-direct"))
    with SqliteStore(repeated) as store:
        report = store.verify()
        assert report.reason == "log.compacted may only open a log"
        assert report.first_bad_seq == store.head().seq


def test_a_compacted_log_is_a_merkle_tree_from_its_log_compacted_event(tmp_path: Path) -> None:
    """The compacted file's tree (ADR 0083) is RFC 9162's over its events, leaf 0 log.compacted."""
    fx, _cutoff = _traffic_history(tmp_path / "state.db", runs=8)
    fx.close()
    compact_by_hand(tmp_path / "state.db", tmp_path / "b" / "one.sqlite")
    with SqliteStore(tmp_path / "state.db") as store:
        connection = store.connection
        bodies = [
            bytes(row[0]) for row in connection.execute("SELECT body FROM events ORDER BY seq")
        ]
        assert b'"type":"log.compacted"' in bodies[0]
        stored = connection.execute("SELECT count(*) FROM _pwf_tree").fetchone()[0]
        assert merkle.stored_for(len(bodies)) == stored
        tree = proofs(connection, store.head())
        assert merkle.root_from_frontier(_frontier(bodies)) == tree.root()
        assert store.verify().ok


def test_a_pruned_log_keeps_the_tree_of_every_event_it_held(tmp_path: Path) -> None:
    """The pruned file's tree is RFC 9162's over the backup's events: no leaf moved (ADR 0103)."""
    fx, cutoff = _traffic_history(tmp_path / "state.db", runs=8)
    backup = tmp_path / "b" / "one.sqlite"
    assert _prune(fx, cutoff, backup).outcome == "accepted"
    with SqliteStore(backup, read_only=True) as copy:
        bodies = [stored.body for stored in copy.read()]
    connection = sqlite_file(fx.store).connection
    gone = connection.execute("SELECT count(*) FROM events WHERE body IS NULL").fetchone()[0]
    assert gone > 0
    tree = proofs(connection, fx.store.head())
    assert merkle.root_from_frontier(_frontier(bodies)) == tree.root(len(bodies))
    assert fx.store.verify().ok


def _frontier(bodies: list[bytes]) -> list[bytes]:
    frontier: list[bytes] = []
    for index, body in enumerate(bodies):
        frontier, _ = merkle.append_leaf(index, frontier, merkle.leaf_hash(body))
    return frontier
