"""The log's Merkle tree: kept by every path that writes events, proven by verify (ADR 0083)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pwf import merkle
from pwf.store import tree as stored_tree
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests._tamper import editable
else:
    from _tamper import editable

PWF = str(Path(sys.executable).with_name("pwf"))


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 MTH, recursively (an implementation apart from pwf's)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


def _exported(db: Path) -> list[bytes]:
    """The log's events as `pwf log export` writes them, without the newlines."""
    out = subprocess.run(
        [PWF, "log", "export", "--db", str(db)], check=True, capture_output=True
    ).stdout
    return out.splitlines()


def _root(db: Path) -> bytes:
    with SqliteStore(db, read_only=True) as store:
        found = stored_tree.proofs(store.connection, store.head())
        return found.root()


def _pwf(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([PWF, *args], capture_output=True, check=False)


def test_the_tree_is_rfc_9162_over_the_exported_bytes(
    store: SqliteStore, fill: Callable[..., Any]
) -> None:
    """After batches of appends the root is MTH over the export's lines, at every size."""
    fill(store, [3] * 13)
    leaves = _exported(store.path)
    assert 39 == len(leaves)
    found = stored_tree.proofs(store.connection, store.head())
    for size in range(1, 40):
        assert _mth(leaves[:size]) == found.root(size)
    stored = store.connection.execute("SELECT count(*) FROM _pwf_tree").fetchone()[0]
    assert merkle.stored_for(39) == stored == 3  # subtrees of 16 leaves and up: 0-15, 16-31, 0-31


def test_a_rolled_back_savepoint_leaves_the_tree_of_what_stays(
    store: SqliteStore, command: Callable[..., Any], actor: Any
) -> None:
    """A block undone inside the transaction undoes its tree rows; the next append continues."""
    store.append([command(0)], at=1, actor=actor)
    with store.transaction() as tx:
        tx.append([command(1)], at=1, actor=actor)
        with pytest.raises(RuntimeError):
            _undone(tx, [command(2), command(3)], actor)
        tx.append([command(4)], at=1, actor=actor)
    assert store.verify().ok
    assert _mth(_exported(store.path)) == _root(store.path)


def _undone(tx: Any, events: list[Any], actor: Any) -> None:
    """Append ``events`` inside a savepoint that then fails."""
    with tx.savepoint():
        tx.append(events, at=1, actor=actor)
        raise RuntimeError


def test_verify_names_a_changed_node_at_the_seq_that_completed_it(
    store: SqliteStore, fill: Callable[..., Any]
) -> None:
    """A changed tree row is a fault at the seq whose append wrote it."""
    fill(store, [2] * 20)
    store.close()
    db = store.path
    second = merkle.stored_position(4, 1)  # leaves 16-31: written with seq 32
    with sqlite3.connect(db) as connection:
        kept = connection.execute("SELECT hash FROM _pwf_tree WHERE pos = ?", (second,)).fetchone()
        connection.execute("UPDATE _pwf_tree SET hash = zeroblob(32) WHERE pos = ?", (second,))
    report = SqliteStore(db, read_only=True).verify()
    said = f"the Merkle tree's node at position {second}, completed by this event, is not the log's"
    assert (32, said) == (report.first_bad_seq, report.reason)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE _pwf_tree SET hash = ? WHERE pos = ?", (kept[0], second))
        first = connection.execute("SELECT hash FROM _pwf_tree WHERE pos = 0").fetchone()
        connection.execute("UPDATE _pwf_tree SET hash = zeroblob(32) WHERE pos = 0")
    assert 16 == SqliteStore(db, read_only=True).verify().first_bad_seq
    result = _pwf("log", "verify", "--db", str(db), "--chain-only")
    assert 1 == result.returncode
    assert b"bad: seq 16: the Merkle tree's node at position 0" in result.stderr
    with editable(sqlite3.connect(db)) as connection:
        connection.execute("UPDATE _pwf_tree SET hash = ? WHERE pos = 0", (first[0],))
        connection.execute("DELETE FROM events WHERE seq > 20")
        connection.execute(
            "UPDATE _pwf_head SET seq = 20, content_hash = ("
            "SELECT content_hash FROM events WHERE seq = 20), batch = 10"
        )
    assert 21 == SqliteStore(db, read_only=True).verify().first_bad_seq  # nodes past the log


def test_a_log_made_before_the_tree_gets_it_on_its_first_write(
    store: SqliteStore, fill: Callable[..., Any], command: Callable[..., Any], actor: Any
) -> None:
    """Without ``_pwf_tree`` the file verifies; its next append builds the whole tree."""
    fill(store, [2] * 12)
    store.close()
    with sqlite3.connect(store.path) as connection:
        connection.execute("DROP TABLE _pwf_tree")
    with SqliteStore(store.path) as older:
        assert older.verify().ok
        older.append([command(99)], at=1, actor=actor)
        assert older.verify().ok
    assert _mth(_exported(store.path)) == _root(store.path)


def test_a_log_made_before_the_tree_gets_it_from_pwf_log_prove(
    store: SqliteStore, fill: Callable[..., Any]
) -> None:
    """`pwf log prove` builds the tree of an older file first, then answers from it."""
    fill(store, [3] * 3)
    store.close()
    with sqlite3.connect(store.path) as connection:
        connection.execute("DROP TABLE _pwf_tree")
    result = _pwf("log", "prove", "4", "--db", str(store.path), "--json")
    assert 0 == result.returncode, result.stderr
    proof = json.loads(result.stdout)
    leaves = _exported(store.path)
    assert _mth(leaves).hex() == proof["rootHash"]
    assert merkle.verify_inclusion(
        merkle.leaf_hash(leaves[3]),
        3,
        9,
        [bytes.fromhex(item) for item in proof["path"]],
        bytes.fromhex(proof["rootHash"]),
    )


def test_import_replay_and_backup_copies_carry_the_same_tree(
    store: SqliteStore, fill: Callable[..., Any], tmp_path: Path
) -> None:
    """`pwf log import`, `pwf replay --out` and `pwf state backup` make files with the tree."""
    fill(store, [2] * 6)
    store.close()
    db = store.path
    leaves = _exported(db)
    exported = tmp_path / "log.jsonl"
    exported.write_bytes(b"".join(leaf + b"\n" for leaf in leaves))
    imported = tmp_path / "imported.db"
    assert 0 == _pwf("init", "--db", str(imported)).returncode
    assert 0 == _pwf("log", "import", str(exported), "--db", str(imported)).returncode
    assert _mth(leaves) == _root(imported)
    replayed = tmp_path / "replayed.db"
    result = _pwf("replay", "--db", str(db), "--until", "7", "--out", str(replayed), "--json")
    assert 0 == result.returncode, result.stderr
    reached = json.loads(result.stdout)["seq"]
    backup = tmp_path / "backup.db"
    result = _pwf("state", "backup", str(backup), "--db", str(imported))
    assert 0 == result.returncode, result.stderr
    assert _mth(_exported(imported)) == _root(imported)  # with the state.backup event now
    assert _mth(leaves[:reached]) == _root(replayed)  # whole batches only
    assert _mth(_exported(backup)) == _root(backup)  # and the state.backup event after them
    for copy in (imported, replayed, backup):
        assert 0 == _pwf("log", "verify", "--db", str(copy)).returncode


def test_a_replay_of_a_log_without_the_tree_makes_the_copy_its_tree(
    store: SqliteStore, fill: Callable[..., Any], tmp_path: Path
) -> None:
    """The copy's tree is made from the bytes it copies, not copied."""
    fill(store, [2] * 4)
    store.close()
    older = tmp_path / "older.db"
    shutil.copy(store.path, older)
    with sqlite3.connect(older) as connection:
        connection.execute("DROP TABLE _pwf_tree")
    out = tmp_path / "out.db"
    assert 0 == _pwf("replay", "--db", str(older), "--until", "8", "--out", str(out)).returncode
    assert _mth(_exported(older)) == _root(out)
