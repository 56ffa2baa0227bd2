"""The chain a fold reads, checked link by link as its rows are decoded; imports decode and store.

:class:`Chain` turns the stored rows replay, rebuild and verify read into
typed entries (:func:`pwf.fold.decode.entry_at`) and checks on the way what
the chain walk checks (ADR 0013 D5, ADR 0024): each content hash against the
event's bytes, and each link by the one rule, :func:`pwf.store.check_link`.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from pwf.errors import ChainError
from pwf.events import LogCompacted
from pwf.fold import decode
from pwf.store import Head, check_link
from pwf.store.rows import pruned_at

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from pwf.events import Entry

__all__ = ["Chain"]

_PRUNED_AT: Final = (0, 2, 3, 4)
"""Where a row of ``CHAIN_COLUMNS`` holds what :func:`pwf.store.rows.pruned_at` reads."""
_HASH_MEMBER: Final = b'"contentHash":"'
_HASH_SKIP: Final = len(_HASH_MEMBER) + 64 + 2
"""The member's key, its 64 hex digits, the closing quote and the comma."""


class Chain:
    """Typed events from stored rows, checking every link of the chain on the way.

    Each event's content hash is recomputed from its bytes, its seq must
    follow, and its link to the event before obeys the one rule of
    :func:`pwf.store.check_link` (a ``log.compacted`` may only open the log).
    The canonical form of the bytes is left to the log's deep ``verify``: it
    costs more than the whole fold.  Hashes up to
    ``verified`` are not recomputed: the caller has just checked them.
    """

    __slots__ = ("head", "origin", "verified")

    def __init__(self, head: Head, verified: int = 0) -> None:
        """Start after ``head``: zeros, or the head a compaction replaced."""
        self.head = self.origin = head
        self.verified = verified

    def entries(self, rows: Iterable[tuple[object, ...]]) -> Iterator[Entry]:
        """Yield each row's typed event; raise ChainError at the first broken link.

        Rows are :data:`pwf.store.sqlite_rows.CHAIN_COLUMNS`; a pruned event
        (ADR 0103) is linked by its stored hash, batch and prev hash and yields
        nothing.
        """
        before = self.head
        seq, verified, first = before.seq, self.verified, self.origin.seq + 1
        entry_at = decode.entry_at
        try:
            for row in rows:
                stored_seq, body = row[0], row[1]
                seq += 1
                if body is None:
                    before = pruned_at(seq, row, before, opens=seq == first, at=_PRUNED_AT)
                    continue
                assert isinstance(stored_seq, int)
                assert isinstance(body, bytes)
                entry = entry_at(seq, stored_seq, body)
                if seq > verified and _content_hash(body) != entry.content_hash:
                    raise ChainError(seq, "content hash does not match the event's bytes")
                check_link(
                    seq,
                    entry.prev_hash,
                    entry.batch,
                    before,
                    opens=seq == first,
                    compacted=type(entry.event) is LogCompacted,
                )
                before = Head(seq, entry.content_hash, entry.batch)  # positional: hot loop
                yield entry
        finally:
            self.head = Head(seq=seq, content_hash=before.content_hash, batch=before.batch)


def _content_hash(body: bytes) -> str:
    """What :func:`pwf.events.content_hash_of` says, without joining the two halves first.

    The body was just decoded into an envelope, so it holds a ``contentHash`` member.
    """
    start = body.find(_HASH_MEMBER)
    digest = hashlib.sha256(body[:start])
    digest.update(body[start + _HASH_SKIP :])
    return digest.hexdigest()
