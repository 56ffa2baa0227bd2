"""``pwf witness keygen|cosign``: a witness that cosigns only consistent checkpoints (ADR 0083).

Imports merkle, errors and the CLI's note forms and audit file reader.  A
witness keeps, per log origin, the last checkpoint it cosigned, in a
directory of its own (0700, one 0600 file per origin, named by the
SHA-256 of the origin).  It cosigns a new checkpoint (C2SP
tlog-cosignature v1) only when the log's signature verifies and, after the
first, a consistency proof from the size it holds to the new size verifies
against both roots; otherwise it refuses and names the two roots.  The
first checkpoint of an origin is taken on trust, as a witness's first
sight of a log is.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import click

from pwf import merkle
from pwf.cli import _notes
from pwf.cli._options import file_option
from pwf.cli._times import wall_ms
from pwf.cli.audit import read_json, write_key
from pwf.errors import InputError
from pwf.private import create_file, make_directories

__all__ = ["witness"]


@click.group()
def witness() -> None:
    """Cosign a log's checkpoints only when each is consistent with the last one."""


@witness.command()
@click.argument("name")
@file_option("--out", "out", "The key file (0600).", required=True)
def keygen(name: str, out: str) -> None:
    """Write a new Ed25519 cosigning key named NAME to --out (0600, never over a file).

    The last line printed is its verifier key (signature type 0x04, C2SP
    tlog-cosignature), which auditors give `pwf log verify --witness`.
    """
    write_key(_notes.new_key(name, _notes.COSIGNER), Path(out))


def _read(path: str, what: str) -> str:
    try:
        data = Path(path).read_bytes() if path != "-" else sys.stdin.buffer.read()
        return data.decode()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {what} {path}: {error}") from None


def _state(directory: Path, origin: str) -> Path:
    return directory / f"{hashlib.sha256(origin.encode()).hexdigest()}.checkpoint"


def _consistent(old: _notes.Checkpoint, new: _notes.Checkpoint, proof: str | None) -> None:
    """Refuse, naming both roots, unless ``new`` is proven to extend ``old``."""
    named = f"{old.size} with root {old.root.hex()} and {new.size} with root {new.root.hex()}"
    if new.size < old.size:
        raise InputError(f"refused: the log went back from size {named}")
    if new.size == old.size:
        if new.root != old.root:
            raise InputError(f"refused: two trees of one size: {named}")
        return
    if proof is None:
        raise InputError(
            f"refused: no consistency proof from size {old.size} (give --proof, made by"
            f" `pwf log prove --consistency {old.size} --size {new.size} --json`)"
        )
    data = read_json(proof)
    path = data.get("path")
    if (
        data.get("oldSize") != old.size
        or data.get("newSize") != new.size
        or data.get("oldRoot") != old.root.hex()
        or data.get("newRoot") != new.root.hex()
        or not isinstance(path, list)
        or not all(isinstance(item, str) and len(item) == 64 for item in path)
    ):
        raise InputError(f"refused: the proof is not between sizes {named}")
    try:
        hashes = [bytes.fromhex(str(item)) for item in path]
    except ValueError:
        raise InputError(f"refused: the proof is not between sizes {named}") from None
    if not merkle.verify_consistency(old.size, new.size, old.root, new.root, hashes):
        raise InputError(f"refused: the proof does not verify between sizes {named}")


@witness.command()
@click.argument("checkpoint", type=click.Path(dir_okay=False, allow_dash=True))
@file_option("--key", "key_file", "The witness's key.", required=True)
@click.option("--log-vkey", "log_vkey", required=True, help="The log's verifier key.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    required=True,
    help="Where the witness keeps the last checkpoint of each log.",
)
@file_option(
    "--proof", "proof", "A consistency proof from the size last cosigned to this checkpoint's."
)
def cosign(
    checkpoint: str, key_file: str, log_vkey: str, directory: str, proof: str | None
) -> None:
    """Cosign CHECKPOINT (a signed note) if it is consistent with the last one of its log.

    Prints the checkpoint with the witness's cosignature line added and
    keeps it as the log's last.  Refuses (exit 1, naming both roots) a
    checkpoint that is smaller, of another root at the same size, or not
    proven by --proof to extend the last one.
    """
    key = _notes.parse_private_key(_read(key_file, "the key file"), (_notes.COSIGNER,))
    verifier = _notes.parse_verifier(log_vkey, (_notes.LOG_KEY,))
    note = _read(checkpoint, "the checkpoint")
    new = _notes.parse_checkpoint(_notes.verify_note(note, verifier))
    where = Path(directory)
    make_directories(where)
    state = _state(where, new.origin)
    if state.exists():
        text, _ = _notes.split_note(_read(str(state), "the witness's last checkpoint"))
        old = _notes.parse_checkpoint(text)
        try:
            _consistent(old, new, proof)
        except InputError as error:
            click.echo(f"bad: {error}", err=True)
            sys.exit(1)
    cosigned = _notes.add_cosignature(note, key, wall_ms() // 1000)
    scratch = state.with_suffix(".new")
    scratch.unlink(missing_ok=True)
    descriptor = create_file(scratch)
    with open(descriptor, "w", encoding="utf-8") as handle:  # noqa: PTH123 - a descriptor
        handle.write(cosigned)
        handle.flush()
        os.fsync(handle.fileno())
    scratch.replace(state)
    click.echo(cosigned, nl=False)
