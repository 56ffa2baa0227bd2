"""`pwf witness`: cosign only what extends the last checkpoint; `pwf log verify --witness`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Final

PWF: Final = str(Path(sys.executable).with_name("pwf"))


def _pwf(*args: str | Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([PWF, *map(str, args)], input=stdin, capture_output=True, check=False)


def _log(db: Path, requests: list[str]) -> None:
    """A log named example.com/shared holding one host.status per request id."""
    assert 0 == _pwf("init", "--db", db, "--origin", "example.com/shared").returncode
    lines = b"".join(
        json.dumps(
            {
                "clientId": "cli-A",
                "idempotencyKey": rid,
                "operation": "host.status",
                "payload": {},
                "requestId": rid,
                "schema": "pi-workflows.client.v1",
                "type": "request",
            },
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        + b"\n"
        for rid in requests
    )
    assert 0 == _pwf("request", "--db", db, stdin=lines).returncode


def test_a_witness_cosigns_a_consistent_history_and_refuses_a_fork(tmp_path: Path) -> None:
    """First sight taken; an extension with its proof cosigned; a fork refused naming both roots."""
    honest, fork = tmp_path / "honest.db", tmp_path / "fork.db"
    _log(honest, ["a", "b", "c", "d"])
    _log(fork, ["a", "x", "y", "z"])
    log_key, witness_key, directory = tmp_path / "log.key", tmp_path / "w.key", tmp_path / "w"
    vkey = _pwf("log", "keygen", "example.com/log", "--out", log_key).stdout.split()[-1].decode()
    made = _pwf("witness", "keygen", "witness.example/w1", "--out", witness_key)
    wkey = made.stdout.split()[-1].decode()

    def checkpoint(db: Path, size: int) -> Path:
        path = tmp_path / f"{db.stem}-{size}.note"
        path.write_bytes(
            _pwf("log", "checkpoint", "--db", db, "--key", log_key, "--size", str(size)).stdout
        )
        return path

    def consistency(db: Path, old: int, new: int) -> Path:
        path = tmp_path / f"{db.stem}-{old}-{new}.json"
        made = _pwf(
            "log", "prove", "--consistency", str(old), "--size", str(new), "--db", db, "--json"
        )
        path.write_bytes(made.stdout)
        return path

    def cosign(note: Path, *proof: Path) -> subprocess.CompletedProcess[bytes]:
        extra = ("--proof", proof[0]) if proof else ()
        return _pwf(
            "witness", "cosign", note, "--key", witness_key, "--log-vkey", vkey, "--dir", directory,
            *extra,
        )  # fmt: skip

    first = cosign(checkpoint(honest, 1))
    assert 0 == first.returncode, first.stderr
    without = cosign(checkpoint(honest, 3))
    assert 1 == without.returncode
    assert b"no consistency proof from size 1" in without.stderr
    extended = cosign(checkpoint(honest, 3), consistency(honest, 1, 3))
    assert 0 == extended.returncode, extended.stderr
    cosigned = tmp_path / "cosigned.note"
    cosigned.write_bytes(extended.stdout)

    forked = cosign(checkpoint(fork, 4), consistency(fork, 3, 4))
    assert 1 == forked.returncode
    honest_root = json.loads(consistency(honest, 1, 3).read_bytes())["newRoot"]
    fork_root = json.loads(consistency(fork, 3, 4).read_bytes())["newRoot"]
    assert honest_root.encode() in forked.stderr
    assert fork_root.encode() in forked.stderr
    same_size = cosign(checkpoint(fork, 3))
    assert 1 == same_size.returncode
    assert b"two trees of one size" in same_size.stderr
    back = cosign(checkpoint(honest, 2))
    assert b"went back from size 3" in back.stderr

    verified = _pwf(
        "log", "verify", "--db", honest, "--checkpoint", cosigned, "--vkey", vkey, "--witness", wkey
    )
    assert 0 == verified.returncode, verified.stderr
    uncosigned = checkpoint(honest, 3)
    short = _pwf(
        "log", "verify", "--db", honest, "--checkpoint", uncosigned, "--vkey", vkey,
        "--witness", wkey,
    )  # fmt: skip
    assert 1 == short.returncode
    assert b"0 valid witness cosignatures, 1 wanted" in short.stderr
    other = _pwf("log", "verify", "--db", fork, "--checkpoint", cosigned, "--vkey", vkey)
    assert 1 == other.returncode
    assert b"is not the log's" in other.stderr
