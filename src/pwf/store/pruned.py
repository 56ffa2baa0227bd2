"""A pruned log's proof against its backup: each removed body against the leaf kept (ADR 0103).

Imports merkle, events, errors and the store's types (plus sqlite3: an edge
room).  A prune that keeps every seq takes the bytes of the removed runs'
events out of the log and keeps their content hash and Merkle leaf;
``log.pruned`` names the backup that holds them (its SHA-256 and head).
:func:`prove_pruned` checks that backup as ``pwf log verify --backup``
does: its bytes are the ones named, its own chain holds up to the head
named, and every event the prune took is there with the content hash and
the leaf hash the log kept.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pwf import merkle
from pwf.errors import InputError, PwfError
from pwf.events import LogPruned, content_hash_of, open_body
from pwf.store.compaction import file_sha256

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.store import EventLog

__all__ = [
    "PruneProof",
    "backup_of",
    "gone",
    "prove_pruned",
    "pruned_events",
    "prunes",
    "whole_up_to",
]

_TAKEN: Final = (
    "SELECT p.seq, e.content_hash, p.leaf FROM _pwf_pruned p JOIN events e ON e.seq = p.seq"
    " WHERE p.taken = ? ORDER BY p.seq"
)
"""The events one prune took (by the seq of its ``log.pruned``), with their kept hashes."""
_BODIES: Final = "SELECT seq, body FROM events WHERE seq IN (SELECT value FROM json_each(?))"
_CHUNK: Final = 5_000
"""Bodies read from the backup in one query (:data:`_BODIES`)."""


@dataclass(frozen=True)
class PruneProof:
    """What :func:`prove_pruned` found: the bodies proven, or the first thing that failed."""

    pruned: LogPruned
    proven: int = 0
    failure: str | None = None
    named: bool = True
    """False when no ``log.pruned`` names the file (it may be another proof's backup)."""


def pruned_events(log: EventLog) -> list[LogPruned]:
    """The log's ``log.pruned`` events, oldest first."""
    return [event for _seq, event in prunes(log)]


def prunes(log: EventLog) -> list[tuple[int, LogPruned]]:
    """The log's ``log.pruned`` events with their seqs, oldest first."""
    found = []
    for stored in log.find(type=LogPruned.TAG):
        event = open_body(stored.body).event
        if isinstance(event, LogPruned):
            found.append((stored.seq, event))
    return found


def prove_pruned(log: EventLog, live: sqlite3.Connection, backup: Path) -> PruneProof | None:
    """Prove ``backup`` holds the bodies the ``log.pruned`` naming it took; None: never pruned.

    ``live`` reads the pruned log's tables.  A backup no ``log.pruned``
    names is a failure, as is one that does not prove.

    Raises:
        InputError: the log was pruned and ``backup`` is not a file.
    """
    events = prunes(log)
    if not events:
        return None
    if not backup.is_file():
        raise InputError(f"no backup at {backup}")
    digest = file_sha256(backup)
    named = [(seq, event) for seq, event in events if event.backup_sha256 == digest]
    if not named:
        failure = "its SHA-256 is not the one any log.pruned records"
        return PruneProof(events[-1][1], failure=failure, named=False)
    return _proven(*named[-1], live, backup)


def _proven(seq: int, event: LogPruned, live: sqlite3.Connection, backup: Path) -> PruneProof:
    """The backup ``event`` names, proven: its head, its chain, and each body it holds.

    The bodies are read :data:`_CHUNK` at a time, so a prune that took
    millions of events is proven in the memory of one chunk.
    """
    from pwf.store.opening import open_file  # noqa: PLC0415 - a backup is a file

    proven = 0
    try:
        with open_file(backup, read_only=True) as copy:
            head = copy.head()
            if (head.seq, head.content_hash) != (event.backup_seq, event.backup_hash):
                return PruneProof(event, failure="its head is not the one log.pruned names")
            report = copy.verify(deep=False)
            if not report.ok:
                failure = f"its own log: seq {report.first_bad_seq}: {report.reason}"
                return PruneProof(event, failure=failure)
            taken = live.execute(_TAKEN, (seq,))
            while chunk := taken.fetchmany(_CHUNK):
                bodies = dict(
                    copy.connection.execute(
                        _BODIES, ("[" + ",".join(str(row[0]) for row in chunk) + "]",)
                    ).fetchall()
                )
                wrong = _bodies(chunk, bodies)
                if wrong is not None:
                    return PruneProof(event, proven + wrong[0], wrong[1])
                proven += len(chunk)
    except (PwfError, sqlite3.Error) as error:
        return PruneProof(event, proven, str(error))
    if proven != event.removed_events:
        return PruneProof(
            event, proven, f"it holds {proven} of the {event.removed_events} bodies log.pruned took"
        )
    return PruneProof(event, proven)


def _bodies(
    taken: list[tuple[int, str, bytes]], bodies: dict[int, bytes]
) -> tuple[int, str] | None:
    """Each body the prune took, against the content hash and leaf the log kept.

    Returns None when all of ``taken`` hold, else how many did before the
    first that does not, and why.
    """
    for proven, (seq, content_hash, leaf) in enumerate(taken):
        body = bodies.get(seq)
        if body is None:
            return proven, f"it holds no bytes of the event at seq {seq}"
        if content_hash_of(bytes(body)) != content_hash:
            return proven, f"its event at seq {seq} is not the one pruned"
        if merkle.leaf_hash(bytes(body)) != bytes(leaf):
            return proven, f"its event at seq {seq} is not the leaf kept"
    return None


def gone(log: EventLog, seq: int) -> str | None:
    """Where the bytes of the event at ``seq`` went, when a prune took them: one line, else None."""
    taken = next((taken for _seq, taken in log.pruned(seq, seq)), None)
    if taken is None:
        return None
    return f"seq {seq} was pruned: its bytes are in the backup {backup_of(log, taken)}"


def whole_up_to(log: EventLog, seq: int, doing: str) -> None:
    """Refuse a fold of the log up to ``seq`` that needs an event a later prune took (ADR 0103).

    A fold up to ``seq`` needs every event up to it; one past a
    ``log.pruned`` folds that prune too, which unlinks what stays from the
    runs it removed.  ``doing`` says what to do with the backup instead
    (``replay``: "replay the backup PATH instead").

    Raises:
        InputError: an event at or before ``seq`` was pruned by a prune after it.
    """
    for pruned_seq, taken in log.pruned(1, seq):
        if taken > seq:
            raise InputError(
                f"seq {pruned_seq}, before seq {seq}, was pruned (its bytes moved to the"
                f" backup): {doing} the backup {backup_of(log, taken)} instead"
            )


def backup_of(log: EventLog, taken: int) -> str:
    """The backup the ``log.pruned`` at seq ``taken`` names, or "its backup" when none is read."""
    return next((event.backup_path for at, event in prunes(log) if at == taken), "its backup")
