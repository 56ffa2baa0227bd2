"""A prune keeps every seq and every proof (ADR 0103, issue 33's fifth item).

Three runs are started at 1 000, 2 000 and 3 000; ``run-1`` is cancelled at
4 000 and ``run-2`` at 6 000, ``run-3`` stays queued.  A cutoff of 5 000
makes ``run-1`` the only tree to go.  Before the prune a checkpoint is
signed and proofs are printed; after it every seq still names the same
event, the checkpoint and every proof still verify, the proofs printed
again are the same bytes, and the backup proves each removed body against
the leaf the log kept.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

Run = Callable[..., Result]
CUTOFF = "1970-01-01T00:00:05.000Z"


def _bytes(value: object) -> bytes:
    assert isinstance(value, bytes)
    return value


def _rows(path: Path) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(
            "SELECT seq, batch, type, content_hash, prev_hash, body FROM events ORDER BY seq"
        ).fetchall()
    finally:
        connection.close()


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    path = tmp_path / "live.db"
    assert run("init", "--db", str(path), "--origin", "example.com/pruned").exit_code == 0
    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2, 3))
    lines += client_line(1, "run.cancel", at=4000) + client_line(2, "run.cancel", at=6000)
    done = run("request", "--db", str(path), stdin=lines)
    assert (done.exit_code, done.stdout.count('"outcome":"accepted"')) == (0, 5), done.stdout
    return path


@pytest.fixture
def key(run: Run, tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "log.key"
    made = run("log", "keygen", "example.com/pruned", "--out", str(path))
    assert made.exit_code == 0, made.output
    return path, made.stdout.splitlines()[-1]


_PROOF = ("seq", "index", "treeSize", "leafHash", "rootHash", "path")


def _path(proof: dict[str, object]) -> dict[str, object]:
    """An inclusion proof's own members, without the checkpoint a signed one carries."""
    return {name: proof[name] for name in _PROOF}


def _prune(run: Run, live: Path, backup: Path) -> None:
    done = run(
        "state", "prune", "--db", str(live), "--before", CUTOFF, "--apply",
        "--backup", str(backup), "--at", "9000",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "applied: true\n" in done.stdout


def test_every_seq_still_names_the_same_event(run: Run, live: Path, tmp_path: Path) -> None:
    before = _rows(live)
    _prune(run, live, tmp_path / "b.sqlite")
    after = _rows(live)
    assert len(after) == len(before) + 2  # the prune's record and log.pruned
    gone = [row for row in after[: len(before)] if row[5] is None]
    assert [row[0] for row in gone] == [
        row[0]
        for row in before
        if b'"runId":"run-1"' in _bytes(row[5]) and row[2] != "command.recorded"
    ]
    for old, new in zip(before, after, strict=False):
        assert old[:5] == new[:5]  # seq, batch, type, hashes
        assert new[5] is None or new[5] == old[5]
    assert run("verify", "--db", str(live)).exit_code == 0
    assert run("log", "verify", "--db", str(live)).exit_code == 0
    assert run("log", "verify", "--db", str(live), "--chain-only").exit_code == 0
    listing = run("query", "runs", "--db", str(live)).stdout.splitlines()
    assert sorted(line.split()[0] for line in listing[1:]) == ["run-2", "run-3"]


def test_checkpoints_and_proofs_from_before_still_verify(
    run: Run, live: Path, tmp_path: Path, key: tuple[Path, str]
) -> None:
    private, vkey = key
    size = len(_rows(live))
    note = tmp_path / "before.checkpoint"
    note.write_text(run("log", "checkpoint", "--db", str(live), "--key", str(private)).stdout)
    proofs = {
        seq: run(
            "log", "prove", str(seq), "--db", str(live), "--key", str(private), "--json"
        ).stdout
        for seq in range(1, size + 1)
    }
    consistency = run("log", "prove", "--consistency", "2", "--db", str(live), "--json").stdout
    _prune(run, live, tmp_path / "b.sqlite")
    checked = run(
        "log", "verify", "--db", str(live), "--checkpoint", str(note), "--vkey", vkey
    )  # fmt: skip
    assert checked.exit_code == 0, checked.output
    for seq, printed in proofs.items():
        proof = tmp_path / f"proof-{seq}.json"
        proof.write_text(printed)
        assert run("proof", "verify", str(proof), "--vkey", vkey).exit_code == 0
        again = run(
            "log", "prove", str(seq), "--size", str(size), "--db", str(live), "--json"
        ).stdout  # fmt: skip
        assert _path(json.loads(again)) == _path(json.loads(printed))
    same = run(
        "log", "prove", "--consistency", "2", "--size", str(size), "--db", str(live), "--json"
    )  # fmt: skip
    assert json.loads(same.stdout) == json.loads(consistency)


def test_the_backup_proves_each_removed_body(run: Run, live: Path, tmp_path: Path) -> None:
    backup = tmp_path / "b.sqlite"
    _prune(run, live, backup)
    proved = run("log", "verify", "--db", str(live), "--backup", str(backup))
    assert proved.exit_code == 0, proved.output
    assert "events log.pruned took, with the content hash and Merkle leaf the log kept" in (
        proved.stdout
    )
    other = tmp_path / "other.sqlite"
    other.write_bytes(backup.read_bytes()[:-1] + b"\x01")
    refused = run("log", "verify", "--db", str(live), "--backup", str(other))
    assert refused.exit_code != 0


def test_an_anchor_before_the_prune_holds_without_the_backup(
    run: Run, live: Path, tmp_path: Path
) -> None:
    anchor = run("log", "head", "--db", str(live)).stdout.split()[0]
    _prune(run, live, tmp_path / "b.sqlite")
    held = run("log", "verify", "--db", str(live), "--expect-head", anchor)
    assert held.exit_code == 0, held.output


def test_reads_that_need_a_removed_body_name_the_backup(
    run: Run, live: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "b.sqlite"
    _prune(run, live, backup)
    exported = run("log", "export", "--db", str(live))
    assert exported.exit_code == 2
    assert "pruned" in exported.stderr
    assert str(backup.absolute()) in exported.stderr
    replayed = run("replay", "--db", str(live), "--until", "3", "--out", str(tmp_path / "r.db"))
    assert replayed.exit_code == 2
    assert str(backup.absolute()) in replayed.stderr
    at_head = run("replay", "--db", str(live), "--out", str(tmp_path / "h.db"))
    assert at_head.exit_code == 0, at_head.output
    assert run("diff", str(live), str(tmp_path / "h.db")).exit_code == 0


def _first_pruned(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        return int(connection.execute("SELECT min(seq) FROM _pwf_pruned").fetchone()[0])
    finally:
        connection.close()


def _edit(path: Path, sql: str, *params: object) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute(sql, params)
        connection.commit()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("DELETE FROM _pwf_pruned WHERE seq = ?", "neither its bytes nor the leaf hash"),
        ("UPDATE _pwf_pruned SET leaf = zeroblob(32) WHERE seq = ?", "Merkle tree"),
        # the next event's bytes name it in prevHash: their hash no longer matches
        ("UPDATE _pwf_events SET content_hash = zeroblob(32) WHERE seq = ?", "content hash"),
        ("UPDATE _pwf_events SET data = NULL WHERE seq = ? + 1", "neither its bytes nor the leaf"),
    ],
    ids=["leaf deleted", "leaf changed", "hash changed", "bytes removed outside a prune"],
)
def test_damage_to_what_a_prune_kept_is_named_by_seq(  # noqa: PLR0913, PLR0917 - fixtures
    run: Run,
    live: Path,
    tmp_path: Path,
    client_line: Callable[..., bytes],
    damage: str,
    reason: str,
) -> None:
    """A kept leaf is bound by the tree's stored nodes once its 16 leaves are complete."""
    _prune(run, live, tmp_path / "b.sqlite")
    lines = b"".join(client_line(number, at=10_000 + number) for number in range(10, 20))
    assert run("request", "--db", str(live), stdin=lines).exit_code == 0
    seq = _first_pruned(live)
    assert run("log", "verify", "--db", str(live)).exit_code == 0
    _edit(live, damage, seq)
    bad = run("log", "verify", "--db", str(live), "--json")
    assert bad.exit_code == 1, bad.output
    found = json.loads(bad.stdout)
    assert found["ok"] is False
    # a kept leaf is named by the event that completes the stored subtree holding it
    last = 16 if reason == "Merkle tree" else seq + 1
    assert seq <= found["firstBadSeq"] <= last
    assert reason in found["reason"]


def test_signed_proofs_and_receipts_of_a_pruned_event_name_the_backup(
    run: Run, live: Path, tmp_path: Path, key: tuple[Path, str]
) -> None:
    """A signed proof carries the event's bytes: for a pruned seq they are in the backup."""
    private, _vkey = key
    backup = tmp_path / "b.sqlite"
    _prune(run, live, backup)
    seq = _first_pruned(live)
    signed = run("log", "prove", str(seq), "--db", str(live), "--key", str(private), "--json")
    assert signed.exit_code == 2
    assert f"seq {seq} was pruned: its bytes are in the backup {backup}" in signed.stderr
    assert len(signed.stderr.strip().splitlines()) == 1
    bare = run("log", "prove", str(seq), "--db", str(live), "--json")
    assert bare.exit_code == 0, bare.output
    receipt = run("log", "receipt", "r-1", "--db", str(live), "--key", str(private))
    assert receipt.exit_code == 2
    assert "was pruned: its bytes are in the backup" in receipt.stderr
