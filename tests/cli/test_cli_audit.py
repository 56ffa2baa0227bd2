"""`pwf log keygen|checkpoint|prove|receipt` and `pwf proof verify` (ADR 0083)."""

from __future__ import annotations

import base64
import hashlib
import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pwf.cli import _notes
from pwf.cli.audit import verify_file
from pwf.errors import InputError

PWF: Final = str(Path(sys.executable).with_name("pwf"))


def _pwf(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([PWF, *args], input=stdin, capture_output=True, check=False)


def _request(n: int, operation: str = "host.status") -> bytes:
    return json.dumps(
        {
            "clientId": "cli-A",
            "idempotencyKey": f"k-{n}",
            "operation": operation,
            "payload": {},
            "requestId": f"r-{n}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


@pytest.fixture
def audited(tmp_path: Path) -> tuple[Path, Path, str]:
    """A database of five answered requests, a log key for it and its verifier key."""
    db = tmp_path / "state.db"
    assert 0 == _pwf("init", "--db", str(db), "--origin", "example.com/pwf-test").returncode
    lines = b"".join(_request(n) + b"\n" for n in range(5))
    assert 0 == _pwf("request", "--db", str(db), stdin=lines).returncode
    key = tmp_path / "log.key"
    made = _pwf("log", "keygen", "example.com/log", "--out", str(key))
    assert 0 == made.returncode, made.stderr
    return db, key, made.stdout.decode().splitlines()[-1]


def test_keygen_writes_a_private_key_0600_and_prints_the_c2sp_verifier_key(
    audited: tuple[Path, Path, str],
) -> None:
    """The vkey's hash is SHA-256(name, newline, 0x01, key)[:4]; the file is never overwritten."""
    _, key, vkey = audited
    assert 0o600 == stat.S_IMODE(key.stat().st_mode)
    name, keyid, encoded = vkey.split("+", 2)
    raw = base64.b64decode(encoded)
    assert ("example.com/log", 33, 0x01) == (name, len(raw), raw[0])
    expected = hashlib.sha256(b"example.com/log\n\x01" + raw[1:]).digest()[:4]
    assert expected.hex() == keyid
    before = key.read_bytes()
    again = _pwf("log", "keygen", "other", "--out", str(key))
    assert 0 != again.returncode
    assert b"never overwritten" in again.stderr
    assert before == key.read_bytes()


def test_checkpoint_is_origin_size_root_and_a_signature_line(
    audited: tuple[Path, Path, str],
) -> None:
    """The note's text is the origin, the size and the base64 root; its signature verifies."""
    db, key, vkey = audited
    note = _pwf("log", "checkpoint", "--db", str(db), "--key", str(key)).stdout.decode()
    text, _, signature_line = note.partition("\n\n")
    origin, size, root = text.split("\n")
    proof = json.loads(_pwf("log", "prove", "5", "--db", str(db), "--json").stdout)
    assert ("example.com/pwf-test", "5") == (origin, size)
    assert proof["rootHash"] == base64.b64decode(root).hex()
    dash, name, blob = signature_line.removesuffix("\n").split(" ")
    signature = base64.b64decode(blob)
    public = base64.b64decode(vkey.split("+", 2)[2])[1:]
    assert ("\u2014", "example.com/log") == (dash, name)
    Ed25519PublicKey.from_public_bytes(public).verify(signature[4:], (text + "\n").encode())
    older = _pwf("log", "checkpoint", "--db", str(db), "--key", str(key), "--size", "3")
    assert older.stdout.decode().split("\n")[1] == "3"


def test_init_keeps_the_first_origin_and_refuses_another(audited: tuple[Path, Path, str]) -> None:
    """`pwf init --origin` again with another name changes nothing and says why."""
    db, _, _ = audited
    refused = _pwf("init", "--db", str(db), "--origin", "example.com/other")
    assert 0 != refused.returncode
    assert b"already 'example.com/pwf-test'" in refused.stderr
    assert 0 == _pwf("init", "--db", str(db)).returncode


def test_prove_refuses_bad_input_in_one_line(audited: tuple[Path, Path, str]) -> None:
    """An unknown seq, a size past the head, no seq at all: one line, exit non-zero."""
    db, _, _ = audited
    for args, said in (
        (("99",), b"no event at seq 99"),
        (("2", "--size", "9"), b"has 5 leaves, not 9"),
        ((), b"give either SEQ or --consistency OLD"),
        (("--consistency", "6"), b"no consistency proof from size 6 to size 5"),
    ):
        result = _pwf("log", "prove", *args, "--db", str(db), "--json")
        assert 0 != result.returncode
        assert said in result.stderr
        assert 1 == len(result.stderr.splitlines()), result.stderr


def test_proof_verify_needs_the_logs_key_and_checkpoint_needs_vkey(tmp_path: Path) -> None:
    """``--vkey`` is required by `pwf proof verify` and paired with --checkpoint in `log verify`."""
    proof = tmp_path / "proof.json"
    proof.write_text("{}", encoding="utf-8")
    result = _pwf("proof", "verify", str(proof))
    assert 2 == result.returncode
    assert b"Missing option '--vkey'" in result.stderr
    result = _pwf("log", "verify", "--db", str(tmp_path / "none.db"), "--vkey", "k")
    assert 0 != result.returncode
    assert b"--checkpoint and --vkey go together" in result.stderr


def _flipped(data: bytes, at: int, bit: int) -> bytes:
    return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]


def _every_flip_refused(path: Path, vkey: str) -> int:
    """Two bits of every byte changed in turn (each bit in eight bytes of a run): all refused.

    Every bit of every byte would take eight times as long; the bits of the
    hashes and signatures themselves are each flipped in tests/unit/test_merkle_outside.py.
    """
    verifier = _notes.parse_verifier(vkey)
    data = path.read_bytes()
    verify_file(str(path), verifier, [], 0)
    checked = 0
    for at in range(len(data)):
        for bit in (at % 8, (at + 4) % 8):
            path.write_bytes(_flipped(data, at, bit))
            with pytest.raises(InputError):
                verify_file(str(path), verifier, [], 0)
            checked += 1
    path.write_bytes(data)
    return checked


def test_every_changed_bit_of_an_inclusion_proof_file_is_refused(
    audited: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """`pwf proof verify` accepts the file as printed and refuses it with any one bit changed."""
    db, key, vkey = audited
    proof = tmp_path / "proof.json"
    made = _pwf("log", "prove", "3", "--db", str(db), "--key", str(key), "--json")
    proof.write_bytes(made.stdout)
    assert 0 == _pwf("proof", "verify", str(proof), "--vkey", vkey).returncode
    assert _every_flip_refused(proof, vkey) == 2 * len(made.stdout)
    proof.write_bytes(made.stdout.replace(b'"seq":3', b'"seq":4'))
    refused = _pwf("proof", "verify", str(proof), "--vkey", vkey)
    assert 1 == refused.returncode
    assert b"bad: event is not the event at seq 4" in refused.stderr


def test_every_changed_bit_of_a_consistency_proof_file_is_refused(
    audited: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """The same for a consistency proof with its signed checkpoint."""
    db, key, vkey = audited
    proof = tmp_path / "consistency.json"
    made = _pwf("log", "prove", "--consistency", "2", "--db", str(db), "--key", str(key), "--json")
    proof.write_bytes(made.stdout)
    assert 0 == _pwf("proof", "verify", str(proof), "--vkey", vkey).returncode
    _every_flip_refused(proof, vkey)


def test_a_receipt_holds_the_requests_batch_and_refuses_any_changed_bit(
    audited: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """The receipt's events are the request's batch; each is proven under the signed checkpoint."""
    db, key, vkey = audited
    receipt = tmp_path / "receipt.json"
    made = _pwf("log", "receipt", "r-2", "--db", str(db), "--key", str(key), "--json")
    assert 0 == made.returncode, made.stderr
    receipt.write_bytes(made.stdout)
    data = json.loads(made.stdout)
    assert [3] == [event["seq"] for event in data["events"]]
    verified = _pwf("proof", "verify", str(receipt), "--vkey", vkey)
    assert 0 == verified.returncode, verified.stderr
    assert b"ok: 1 events of request r-2" in verified.stdout
    _every_flip_refused(receipt, vkey)
    other = _pwf("log", "keygen", "example.com/log", "--out", str(tmp_path / "other.key"))
    stranger = other.stdout.decode().splitlines()[-1]
    refused = _pwf("proof", "verify", str(receipt), "--vkey", stranger)
    assert 1 == refused.returncode
    assert b"the note has no signature of example.com/log" in refused.stderr
    missing = _pwf("log", "receipt", "r-99", "--db", str(db), "--key", str(key))
    assert b"no recorded request 'r-99'" in missing.stderr
