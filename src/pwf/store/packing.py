"""An event's stored bytes kept with each fact once, and the same bytes made again (ADR 0102).

Imports nothing of pwf.  The log's format ``pwf.store.v2`` keeps an event's
canonical bytes (what ``pwf log export`` writes, what its content hash and
Merkle leaf cover) in three parts: the members its batch shares (actor,
``at``, ``batch``, cause: the *head*, kept once per batch), its ``data``
member verbatim, and what the row itself holds or its neighbour does (the
content hash as 32 bytes, ``eventId``, ``prevHash``, ``seq``, ``type``).
:func:`split` takes bytes apart only when :func:`join` gives them back
exactly; any other bytes are kept whole, so the format loses nothing.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["HASH_MEMBER", "Parts", "head_of", "join", "split", "tail"]

HASH_MEMBER: Final = b'"contentHash":"'
"""Where an event's own members start: every member before it is its batch's."""
_DATA: Final = b'","data":'
_SCHEMA_MEMBER: Final = b',"schema":"pwf.event.v1","seq":'


class Parts(NamedTuple):
    """An event's bytes without what the log holds elsewhere."""

    head: bytes
    """The members before ``contentHash``, with the ``{``: its batch's, or its own."""
    data: bytes
    """The ``data`` member's canonical bytes."""


def tail(seq: int, prev_hash: str | None, tag: str | bytes) -> bytes:
    """The members after ``data``, as an event at ``seq`` after ``prev_hash`` writes them.

    ``tag`` is the event's type, or the bytes a stored row holds of it.
    """
    prev = b"null" if prev_hash is None else b'"' + prev_hash.encode() + b'"'
    number = str(seq).encode()
    return b"".join(
        (
            b',"eventId":"evt-',
            number,
            b'","prevHash":',
            prev,
            _SCHEMA_MEMBER,
            number,
            b',"type":"',
            tag if isinstance(tag, bytes) else tag.encode(),
            b'"}',
        )
    )


def head_of(body: bytes) -> bytes | None:
    """The members of ``body`` before ``contentHash``; None when it has none."""
    at = body.find(HASH_MEMBER)
    return None if at < 0 else body[:at]


def join(head: bytes, content_hash: str, data: bytes, after: bytes) -> bytes:
    """The bytes of an event from its parts and :func:`tail`'s ``after``."""
    return b"".join((head, HASH_MEMBER, content_hash.encode(), _DATA, data, after))


def split(  # noqa: PLR0911 - each part checked where it stands
    body: bytes, *, seq: int, tag: str, content_hash: str, prev_hash: str | None
) -> Parts | None:
    """``body`` in parts, or None when :func:`join` would not give it back.

    Where the row finds ``prevHash`` (the row before's hash or its own
    ``link``) is the writer's business: the parts do not hold it.
    """
    if content_hash.lower() != content_hash or not tag.isascii():
        return None
    head = head_of(body)
    if head is None:
        return None
    start = len(head) + len(HASH_MEMBER)
    if body[start : start + 64] != content_hash.encode():
        return None
    start += 64
    if body[start : start + len(_DATA)] != _DATA:
        return None
    start += len(_DATA)
    after = tail(seq, prev_hash, tag)
    if not body.endswith(after) or len(body) - len(after) < start:
        return None
    data = body[start : len(body) - len(after)]
    if join(head, content_hash, data, after) != body:
        return None
    return Parts(head=head, data=data)
