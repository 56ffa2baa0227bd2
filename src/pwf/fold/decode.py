"""Typed events from a log's stored rows, checking every chain link on the way.

Imports events, store (its heads), errors and msgspec; it touches no file or
database itself.  :class:`Chain` decodes each stored body straight into the
typed :class:`~pwf.events.Entry` of its tag in one pass and checks its content
hash, seq, prev hash and batch step (ADR 0013 D2, D5, D7); replay, rebuild
and check feed it the rows they read.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from pwf.errors import ChainError, InputError
from pwf.events import REGISTRY, Entry, Envelope, LogCompacted, read_body
from pwf.store import COMPACTED_INSIDE, Head, check_position, link_fault

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["Chain", "decoded"]


_CHAINED: Final[dict[str, object]] = {"content_hash": str, "prev_hash": str | None}
"""Envelope members whose pattern the chain check proves: a content hash equal
to the recomputed SHA-256 is lower-case hex, and a prev hash equal to it (or
to the origin's) is too.  Matching their regular expressions again would
cost a tenth of the decode."""


def _stored(tag: str, cls: type) -> msgspec.json.Decoder[Any]:
    """One pass from stored bytes to an :class:`Entry` of tag ``tag``.

    The struct is an ``Entry`` whose members are the envelope's, with its
    constraints and wire names, ``data`` typed as ``cls`` and ``type`` fixed
    to ``tag``: the same checks as :class:`Envelope` and then the data's
    decoder, without a second parse or a copy into a new ``Entry``.  Only
    the hashes' patterns are left to the chain check (:data:`_CHAINED`).
    """
    fields: list[tuple[str, object] | tuple[str, object, object]] = []
    rename = {}
    for field in msgspec.structs.fields(Envelope):
        name = "event" if field.name == "data" else field.name
        kind = cls if name == "event" else Literal[tag] if name == "type" else field.type
        if name in _CHAINED:
            kind = _CHAINED[name]
        if field.default is msgspec.NODEFAULT:
            fields.append((name, kind))
        else:
            fields.append((name, kind, field.default))
        rename[name] = field.encode_name
    struct = msgspec.defstruct(
        f"Stored{cls.__name__}",
        fields,
        bases=(Entry,),
        module=__name__,
        frozen=True,
        forbid_unknown_fields=True,
        kw_only=True,
        rename=rename,
    )
    return msgspec.json.Decoder(struct)


_STORED: Final = {tag.encode(): _stored(tag, cls) for tag, cls in REGISTRY.items()}
"""Known tag (as bytes) -> its one-pass decoder."""
_TYPE_MEMBER: Final = b',"type":"'
"""Canonical bytes end with this member, as ``type`` sorts last."""
_HASH_MEMBER: Final = b'"contentHash":"'
_HASH_SKIP: Final = len(_HASH_MEMBER) + 64 + 2
"""The member's key, its 64 hex digits, the closing quote and the comma."""


class Chain:
    """Typed events from stored rows, checking every link of the chain on the way.

    Each event's content hash is recomputed from its bytes, its seq must
    follow, and its link to the event before obeys the one rule of
    :func:`pwf.store.link_fault`; a ``log.compacted`` may only open the log.
    The canonical form of the bytes is left to ``SqliteStore.verify``: it
    costs more than the whole fold.  Hashes up to
    ``verified`` are not recomputed: the caller has just checked them.
    """

    __slots__ = ("head", "origin", "verified")

    def __init__(self, head: Head, verified: int = 0) -> None:
        """Start after ``head``: zeros, or the head a compaction replaced."""
        self.head = self.origin = head
        self.verified = verified

    def entries(self, rows: Iterable[tuple[int, bytes]]) -> Iterator[Entry]:
        """Yield each row's typed event; raise ChainError at the first broken link."""
        seq, prev_hash, batch = self.head.seq, self.head.content_hash, self.head.batch
        verified, first = self.verified, self.origin.seq + 1
        try:
            for stored_seq, body in rows:
                seq += 1
                entry = _entry(seq, stored_seq, body)
                if seq > verified and _content_hash(body) != entry.content_hash:
                    raise ChainError(seq, "content hash does not match the event's bytes")
                reason = link_fault(
                    entry.prev_hash, entry.batch, prev_hash, batch, opens=seq == first
                )
                if reason is not None:
                    raise ChainError(seq, reason)
                if type(entry.event) is LogCompacted and seq != first:
                    raise ChainError(seq, COMPACTED_INSIDE)
                prev_hash, batch = entry.content_hash, entry.batch
                yield entry
        finally:
            self.head = Head(seq=seq, content_hash=prev_hash, batch=batch)


def _content_hash(body: bytes) -> str:
    """What :func:`pwf.events.content_hash_of` says, without joining the two halves first.

    The body was just decoded into an envelope, so it holds a ``contentHash`` member.
    """
    start = body.find(_HASH_MEMBER)
    digest = hashlib.sha256(body[:start])
    digest.update(body[start + _HASH_SKIP :])
    return digest.hexdigest()


def _entry(seq: int, stored_seq: int, body: bytes) -> Entry:
    """The typed event stored at ``seq``; its content hash is the caller's to check."""
    check_position(seq, stored_seq)
    member = body.rfind(_TYPE_MEMBER)
    decoder = _STORED.get(body[member + len(_TYPE_MEMBER) : -2]) if member > 0 else None
    if decoder is not None:
        try:
            entry: Entry = decoder.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass  # the long way names the fault
        else:
            if entry.seq != seq:
                raise ChainError(seq, f"the stored bytes say seq {entry.seq}")
            return entry
    return _opened(seq, body)  # other bytes, an old tag or an error: the long way


def decoded(seq: int, body: bytes) -> Entry:
    """The typed event stored at ``seq``, for a second process that leaves the chain to us."""
    return _entry(seq, seq, body)


def _opened(seq: int, body: bytes) -> Entry:
    try:
        entry = read_body(body)
    except (msgspec.ValidationError, msgspec.DecodeError, InputError) as error:
        raise ChainError(seq, str(error)) from None
    if entry.seq != seq:
        raise ChainError(seq, f"the stored bytes say seq {entry.seq}")
    return entry
