"""``pwf log prove|receipt|keygen|checkpoint`` and ``pwf proof verify``: audits of the tree.

Imports canonical, merkle, the store's tree and the CLI's note forms (ADR
0083).  Proofs are RFC 9162 paths over the log's Merkle tree, read in one
snapshot of the file (a log made before the tree gets it first, in one write
transaction).  A proof or receipt file is canonical JSON, so that any
changed byte changes a value or its form, and ``pwf proof verify`` checks
it with no database.
"""

from __future__ import annotations

import json
import secrets
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import click

from pwf import canonical, merkle
from pwf.cli import _notes
from pwf.cli._options import db_option, echo_json, file_option, json_option, open_store
from pwf.cli._output import with_options
from pwf.errors import InputError
from pwf.private import create_file
from pwf.store.tree import current, proofs, read_origin, set_origin

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from pwf.store.sqlite import SqliteStore
    from pwf.store.tree import Proofs

__all__ = [
    "Trust",
    "check_checkpoint",
    "checkpoint_command",
    "default_origin",
    "keygen",
    "proof",
    "prove",
    "read_json",
    "receipt",
    "sqlite_file",
    "trust",
    "trust_options",
    "verify_file",
    "write_key",
]

F = Any

_INCLUSION: Final = frozenset({"seq", "index", "treeSize", "leafHash", "rootHash", "path"})
_SIGNED_INCLUSION: Final = _INCLUSION | {"checkpoint", "event"}
_CONSISTENCY: Final = frozenset({"oldSize", "newSize", "oldRoot", "newRoot", "path"})
_SIGNED_CONSISTENCY: Final = _CONSISTENCY | {"checkpoint"}
_RECEIPT: Final = frozenset({"requestId", "checkpoint", "events"})
_RECEIPT_EVENT: Final = frozenset({"seq", "index", "event", "path"})


def default_origin() -> str:
    """An origin for a log that was given none: ``pwf/`` and a random id, kept once set."""
    return f"pwf/{secrets.token_hex(16)}"


@contextmanager
def audited(db: str | None) -> Iterator[tuple[SqliteStore, Proofs, str]]:
    """The file, its proofs at the head and its origin, in one read snapshot.

    A log whose file lacks the tree or the origin gets them first, in one
    write transaction (the upgrade of ADR 0083).
    """
    with open_store(db) as store:
        file = sqlite_file(store.projections_file)
        store.catch_up()
        if read_origin(file.connection) is None or not current(file.connection, file.head()):
            with file.file_transaction() as tx:
                _ = tx.tree
                set_origin(tx.connection, _derived_origin(file))
        with file.snapshot():
            origin = read_origin(file.connection)
            assert origin is not None
            yield file, proofs(file.connection, file.head()), origin


def sqlite_file(file: object) -> SqliteStore:
    """The SQLite file that holds the tree (the log's, or the local copy of a shared log)."""
    from pwf.store.opening import sqlite_file as of  # noqa: PLC0415 - the type check only

    return of(file)


def _derived_origin(file: SqliteStore) -> str:
    """The origin an older log gets: from its first event's hash, so copies of it agree."""
    found = file.connection.execute("SELECT content_hash FROM events ORDER BY seq LIMIT 1")
    row = found.fetchone()
    return default_origin() if row is None else f"pwf/{str(row[0])[:32]}"


def _key(path: str, kinds: tuple[int, ...]) -> _notes.PrivateKey:
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the key file {path}: {error}") from None
    return _notes.parse_private_key(text, kinds)


def _signed(key: _notes.PrivateKey, origin: str, size: int, root: bytes) -> str:
    return _notes.sign_note(_notes.checkpoint_text(_notes.Checkpoint(origin, size, root)), key)


_signing_key = file_option("--key", "key_file", "The log's signing key.", required=True)
_tree_size = click.option(
    "--size", type=click.IntRange(min=0), default=None, help="Tree size (default: the head's)."
)


@click.command()
@db_option
@click.argument("seq", type=int, required=False)
@_tree_size
@click.option(
    "--consistency",
    "old",
    type=click.IntRange(min=1),
    default=None,
    help="Prove the tree of OLD leaves is a prefix of the tree of --size leaves instead.",
)
@file_option(
    "--key",
    "key_file",
    "Add a checkpoint of the proof's tree signed with this key (and the event's bytes).",
)
@json_option
def prove(  # noqa: PLR0913 - one option each
    *,
    db: str | None,
    seq: int | None,
    size: int | None,
    old: int | None,
    key_file: str | None,
    as_json: bool,
) -> None:
    """Print an RFC 9162 inclusion proof of the event at SEQ, or a consistency proof.

    The proof is against the tree of --size leaves (default: the head's);
    leaf i is the i-th stored event.  --consistency OLD proves instead that
    the tree of OLD leaves is a prefix of it.  With --key the proof carries a
    checkpoint of its tree signed with that key, which `pwf proof verify`
    checks offline with the verifier key.
    """
    if (seq is None) == (old is None):
        raise InputError("give either SEQ or --consistency OLD")
    key = None if key_file is None else _key(key_file, (_notes.LOG_KEY,))
    with audited(db) as (file, tree, origin):
        wanted = tree.size if size is None else size
        if old is not None:
            data = _consistency_proof(tree, old, wanted)
        else:
            assert seq is not None
            data = _inclusion_proof(tree, seq, wanted)
            if key is not None:
                data["event"] = _notes.b64(_bytes_at(file, seq))
        if key is not None:
            data["checkpoint"] = _signed(key, origin, wanted, tree.root(wanted))
    if as_json:
        echo_json(data)
        return
    for name in sorted(data):
        value = data[name]
        shown = " ".join(str(item) for item in value) if isinstance(value, list) else value
        click.echo(f"{name}: {shown}")


def _consistency_proof(tree: Proofs, old: int, new: int) -> dict[str, object]:
    """The proof that the tree of ``old`` leaves is a prefix of the tree of ``new``."""
    path = tree.consistency(old, new)  # first: it names a size the tree lacks
    return {
        "newRoot": tree.root(new).hex(),
        "newSize": new,
        "oldRoot": tree.root(old).hex(),
        "oldSize": old,
        "path": [item.hex() for item in path],
    }


def _inclusion_proof(tree: Proofs, seq: int, size: int) -> dict[str, object]:
    """The proof that the event at ``seq`` is a leaf of the tree of ``size`` leaves."""
    index = tree.leaf_index(seq)
    return {
        "index": index,
        "leafHash": tree.leaf(index).hex(),
        "path": [item.hex() for item in tree.inclusion(index, size)],
        "rootHash": tree.root(size).hex(),
        "seq": seq,
        "treeSize": size,
    }


@click.command()
@db_option
@click.argument("request_id")
@_signing_key
@json_option
def receipt(db: str | None, request_id: str, key_file: str, as_json: bool) -> None:
    """Print the receipt of a request: its batch's events, their inclusion paths and a checkpoint.

    One canonical JSON object: each event of the batch that recorded
    REQUEST_ID (seq, leaf index, stored bytes in base64, inclusion path)
    and the checkpoint at the head, signed with --key, that they verify
    against.  `pwf proof verify FILE --vkey KEY` checks it offline.
    """
    del as_json  # the receipt is JSON whatever is asked
    key = _key(key_file, (_notes.LOG_KEY,))
    with audited(db) as (file, tree, origin):
        found = file.connection.execute(
            # the unary + keeps the planner on the request's index (ADR 0102)
            "SELECT batch FROM events WHERE request_id = ? AND +type = 'command.recorded'",
            (request_id,),
        ).fetchone()
        if found is None:
            raise InputError(f"no recorded request {request_id!r} in this log")
        rows = file.connection.execute(
            "SELECT seq, body FROM events WHERE batch = ? ORDER BY seq", (found[0],)
        ).fetchall()
        events = []
        for seq, body in rows:
            if body is None:
                _bytes_at(file, seq)  # pruned: names the backup that holds it
            index = tree.leaf_index(seq)
            events.append(
                {
                    "event": _notes.b64(bytes(body)),
                    "index": index,
                    "path": [item.hex() for item in tree.inclusion(index)],
                    "seq": seq,
                }
            )
        note = _signed(key, origin, tree.size, tree.root())
    echo_json({"checkpoint": note, "events": events, "requestId": request_id})


@click.command()
@click.argument("name")
@file_option("--out", "out", "The key file to write (0600).", required=True)
def keygen(name: str, out: str) -> None:
    """Write a new Ed25519 signing key named NAME to --out (0600, never over a file).

    The last line printed is its verifier key, NAME+HASH+KEY (C2SP
    signed-note), which auditors use to check checkpoints and receipts.
    """
    write_key(_notes.new_key(name, _notes.LOG_KEY), Path(out))


def write_key(key: _notes.PrivateKey, out: Path) -> None:
    """Write ``key`` to the new file ``out`` (0600); print its verifier key last.

    Raises:
        InputError: ``out`` exists.
    """
    try:
        descriptor = create_file(out)
    except FileExistsError:
        raise InputError(f"{out} exists; a key file is never overwritten") from None
    with open(descriptor, "w", encoding="ascii") as handle:  # noqa: PTH123 - a descriptor
        handle.write(f"{key}\n")
    click.echo(f"wrote the private key to {out} (keep it secret)")
    click.echo(str(key.verifier))


@click.command(name="checkpoint")
@db_option
@_signing_key
@_tree_size
def checkpoint_command(db: str | None, key_file: str, size: int | None) -> None:
    """Print a signed checkpoint of the log (C2SP tlog-checkpoint in a signed note).

    Its lines: the log's origin, the tree size, the root hash in base64, a
    blank line, and the signature line of --key.
    """
    key = _key(key_file, (_notes.LOG_KEY,))
    with audited(db) as (_file, tree, origin):
        wanted = tree.size if size is None else size
        note = _signed(key, origin, wanted, tree.root(wanted))
    click.echo(note, nl=False)


# ------------------------------------------------------------------ offline checks


def read_json(path: str) -> dict[str, object]:
    """A canonical JSON object from ``path``: any other form is refused.

    Raises:
        InputError: the file is unreadable, not JSON, or not canonical.
    """
    try:
        data = Path(path).read_bytes() if path != "-" else sys.stdin.buffer.read()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error}") from None
    text = data.removesuffix(b"\n")
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise InputError(f"{path} is not JSON") from None
    if not isinstance(value, dict) or canonical.encode(value) != text:
        raise InputError(f"{path} is not a canonical JSON object as pwf writes them")
    return value


def _hash(value: object, what: str) -> bytes:
    if not isinstance(value, str) or len(value) != 2 * merkle.HASH_SIZE or value != value.lower():
        raise InputError(f"{what} is not a lowercase hex SHA-256")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise InputError(f"{what} is not a lowercase hex SHA-256") from None


def _count(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputError(f"{what} is not a count")
    return value


def _path(value: object) -> list[bytes]:
    if not isinstance(value, list):
        raise InputError("path is not a list of hashes")
    return [_hash(item, "a path hash") for item in value]


def _members(data: dict[str, object], wanted: frozenset[str], what: str) -> None:
    if set(data) != wanted:
        raise InputError(f"the {what} has members {sorted(data)}, not {sorted(wanted)}")


def check_checkpoint(
    note: str,
    vkey: str,
    witnesses: tuple[str, ...],
    quorum: int | None,
    tree: Proofs,
) -> str:
    """Check a signed checkpoint against this log: signature, cosignatures, root; what held.

    Raises:
        InputError: the signature or the quorum fails, or the log's tree of
            that size has another root (or is smaller).
    """
    trusted = trust(vkey, witnesses, quorum)
    point = _checked_checkpoint(note, trusted)
    if point.size > tree.size:
        raise InputError(
            f"the checkpoint's tree of {point.size} is larger than the log's {tree.size}"
        )
    root = tree.root(point.size)
    if root != point.root:
        raise InputError(
            f"the checkpoint's root {point.root.hex()} at size {point.size}"
            f" is not the log's {root.hex()}"
        )
    return (
        f"checkpoint of {point.origin} at size {point.size} holds,"
        f" {trusted.quorum} cosignatures wanted"
    )


class Trust(NamedTuple):
    """Whose signatures a checkpoint needs: the log's, and ``quorum`` of the witnesses'."""

    log: _notes.Verifier
    witnesses: list[_notes.Verifier]
    quorum: int


def trust(vkey: str, witnesses: Sequence[str], quorum: int | None) -> Trust:
    """The verifier keys of ``--vkey`` and ``--witness``; ``--quorum`` defaults to every witness.

    Raises:
        InputError: a key is not a verifier key of its kind.
    """
    log = _notes.parse_verifier(vkey, (_notes.LOG_KEY,))
    cosigners = [_notes.parse_verifier(item, (_notes.COSIGNER,)) for item in witnesses]
    return Trust(log, cosigners, len(cosigners) if quorum is None else quorum)


def _checked_checkpoint(note: object, trusted: Trust) -> _notes.Checkpoint:
    if not isinstance(note, str):
        raise InputError("checkpoint is not a signed note")
    text = _notes.verify_note(note, trusted.log)
    cosigned = _notes.cosignatures(note, trusted.witnesses)
    if len(cosigned) < trusted.quorum:
        raise InputError(
            f"the checkpoint has {len(cosigned)} valid witness cosignatures,"
            f" {trusted.quorum} wanted"
        )
    return _notes.parse_checkpoint(text)


def _bytes_at(file: SqliteStore, seq: int) -> bytes:
    """The stored bytes of the event at ``seq``.

    Raises:
        InputError: a prune took them (ADR 0103): the line names the backup, where the
            event's leaf and path are the same.
    """
    from pwf.store.pruned import gone  # noqa: PLC0415 - a pruned log's only

    found = next(file.read(seq, seq), None)
    if found is not None:
        return found.body
    where = gone(file, seq) or f"no event at seq {seq} in this log"
    raise InputError(f"{where}; prove it there, or leave out --key for its leaf and path alone")


def _event(value: object, seq: object) -> bytes:
    if not isinstance(value, str):
        raise InputError("event is not base64")
    body = _notes.from_b64(value, "event")
    try:
        stored = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise InputError("event is not a stored event's JSON") from None
    if not isinstance(stored, dict) or stored.get("seq") != seq:
        raise InputError(f"event is not the event at seq {seq}")
    return body


def verify_file(
    path: str, vkey: _notes.Verifier, witnesses: list[_notes.Verifier], quorum: int
) -> str:
    """Check a proof or receipt file offline; what it proved, in one line.

    Raises:
        InputError: any part of it does not verify (the first fault found).
    """
    data = read_json(path)
    checker = _receipt if "events" in data else _consistency if "oldSize" in data else _inclusion
    return checker(data, Trust(vkey, witnesses, quorum))


def _receipt(data: dict[str, object], trusted: Trust) -> str:
    _members(data, _RECEIPT, "receipt")
    point = _checked_checkpoint(data["checkpoint"], trusted)
    events = data["events"]
    request = data["requestId"]
    if not isinstance(events, list) or not events or not isinstance(request, str):
        raise InputError("the receipt holds no events")
    for item in events:
        if not isinstance(item, dict):
            raise InputError("a receipt event is not an object")
        _members(item, _RECEIPT_EVENT, "receipt event")
        seq = _count(item["seq"], "seq")
        body = _event(item["event"], seq)
        cause = json.loads(body).get("cause")
        if not isinstance(cause, dict) or cause.get("requestId") != request:
            raise InputError(f"the event at seq {seq} was not caused by request {request}")
        index = _count(item["index"], "index")
        leaf = merkle.leaf_hash(body)
        if not merkle.verify_inclusion(leaf, index, point.size, _path(item["path"]), point.root):
            raise InputError(f"the event at seq {seq} is not leaf {index} of the checkpoint's tree")
    return (
        f"ok: {len(events)} events of request {request} are in {point.origin} at size {point.size}"
    )


def _consistency(data: dict[str, object], trusted: Trust) -> str:
    _members(data, _SIGNED_CONSISTENCY, "consistency proof")
    point = _checked_checkpoint(data["checkpoint"], trusted)
    old, new = _count(data["oldSize"], "oldSize"), _count(data["newSize"], "newSize")
    old_root, new_root = _hash(data["oldRoot"], "oldRoot"), _hash(data["newRoot"], "newRoot")
    if (point.size, point.root) != (new, new_root):
        raise InputError("the checkpoint is not of the proof's new tree")
    if not merkle.verify_consistency(old, new, old_root, new_root, _path(data["path"])):
        raise InputError(f"the tree of {old} leaves is not proven a prefix of the tree of {new}")
    return f"ok: {point.origin} at size {old} is a prefix of its tree at size {new}"


def _inclusion(data: dict[str, object], trusted: Trust) -> str:
    _members(data, _SIGNED_INCLUSION, "inclusion proof")
    point = _checked_checkpoint(data["checkpoint"], trusted)
    seq = _count(data["seq"], "seq")
    index, size = _count(data["index"], "index"), _count(data["treeSize"], "treeSize")
    leaf, root = _hash(data["leafHash"], "leafHash"), _hash(data["rootHash"], "rootHash")
    if (point.size, point.root) != (size, root):
        raise InputError("the checkpoint is not of the proof's tree")
    if merkle.leaf_hash(_event(data["event"], seq)) != leaf:
        raise InputError("the event's bytes do not hash to leafHash")
    if not merkle.verify_inclusion(leaf, index, size, _path(data["path"]), root):
        raise InputError(f"the event at seq {seq} is not proven leaf {index} of the tree of {size}")
    return f"ok: the event at seq {seq} is leaf {index} of {point.origin} at size {size}"


@click.group()
def proof() -> None:
    """Check proofs and receipts offline, with no database."""


def trust_options(*, vkey_help: str, quorum_help: str, required: bool) -> Callable[[F], F]:
    """``--vkey``, ``--witness`` and ``--quorum``: whose signatures a checkpoint needs."""
    options = (
        click.option("--vkey", "vkey", required=required, help=vkey_help),
        click.option(
            "--witness", "witnesses", multiple=True, help="A witness's verifier key (repeat)."
        ),
        click.option("--quorum", type=click.IntRange(min=0), default=None, help=quorum_help),
    )
    return lambda command: with_options(command, options)


@proof.command(name="verify")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@trust_options(
    vkey_help="The log's verifier key, NAME+HASH+KEY.",
    quorum_help="Cosignatures needed (default: every --witness).",
    required=True,
)
def verify_command(file: str, vkey: str, witnesses: tuple[str, ...], quorum: int | None) -> None:
    """Check a proof or receipt FILE against the log's verifier key; exit 1 if any part fails.

    FILE is what `pwf log prove --key` or `pwf log receipt` printed: its
    checkpoint's signature, every inclusion or consistency path and every
    event's bytes are checked; so are witness cosignatures with --witness.
    """
    trusted = trust(vkey, witnesses, quorum)
    try:
        click.echo(verify_file(file, *trusted))
    except InputError as error:
        click.echo(f"bad: {error}", err=True)
        sys.exit(1)
