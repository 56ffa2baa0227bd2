"""``pwf log verify --expect-head SEQ:HASH``: does the log still extend a head written down?"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import click

from pwf._sqlite import exact_text
from pwf.sqlreader import RowReader

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.commands import Reader
    from pwf.store import EventStore
    from pwf.store.compaction import Proof

__all__ = ["Anchor", "Held", "anchored", "parse_anchor"]

_ANCHOR: Final = re.compile(r"([1-9][0-9]{0,15}):([0-9a-f]{64})")


@dataclass(frozen=True)
class Anchor:
    """A head written down out of band: a seq and its event's content hash."""

    seq: int
    content_hash: str


@dataclass(frozen=True)
class Held:
    """Whether the anchor holds, and why not."""

    seq: int
    content_hash: str
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """True when the event at the anchor's seq still has its hash."""
        return self.failure is None


def parse_anchor(text: str) -> Anchor:
    """``SEQ:HASH`` as `pwf log head` prints it.

    Raises:
        click.BadParameter: it is not a positive seq, a colon and 64 lower-case hex digits.
    """
    found = _ANCHOR.fullmatch(text)
    if found is None:
        raise click.BadParameter(
            "takes SEQ:HASH, a positive seq and a 64-digit lower-case hex contentHash",
            param_hint="--expect-head",
        )
    return Anchor(seq=int(found[1]), content_hash=found[2])


def _stored_hash(reader: Reader, seq: int) -> str | None:
    row = reader.one("SELECT content_hash FROM events WHERE seq = ?", (seq,))
    return None if row is None else str(row["content_hash"])


def anchored(store: EventStore, anchor: Anchor, proof: Proof | None, backup: Path | None) -> Held:
    """Check the anchor against a log whose chain was just verified.

    The chain proves every stored event's hash from its bytes, so the event
    at the anchor's seq has the anchored hash exactly when its column does.
    A compacted log no longer holds the events before its ``log.compacted``:
    the anchor then holds when it is the head the compaction replaced, or,
    with a proven ``--backup``, when the backup's event at that seq has it.
    """
    head, origin = store.head(), store.origin()
    wanted = anchor.content_hash
    held = Held(anchor.seq, wanted)
    if anchor.seq > head.seq:
        return Held(anchor.seq, wanted, f"the log's head is seq {head.seq}")
    if anchor.seq > origin.seq:
        found = _stored_hash(store.reader(), anchor.seq)
        return held if found == wanted else Held(anchor.seq, wanted, f"it has {found}")
    if anchor.seq == origin.seq:
        found = origin.content_hash
        return held if found == wanted else Held(anchor.seq, wanted, f"it had {found}")
    if backup is None or proof is None or not proof.ok:
        return Held(
            anchor.seq,
            wanted,
            f"it was compacted away (the log starts after seq {origin.seq});"
            " prove it with --backup",
        )
    connection = exact_text(
        sqlite3.connect(f"{backup.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    )
    try:
        found = _stored_hash(RowReader(connection), anchor.seq)
    finally:
        connection.close()
    return held if found == wanted else Held(anchor.seq, wanted, f"the backup's has {found}")
