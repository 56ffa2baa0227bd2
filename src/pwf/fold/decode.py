"""Typed events from a log's stored rows, one pass from bytes to the Entry of their tag.

Imports events, store (its seq check), errors and msgspec; it touches no file
or database itself.  :func:`entry_at` decodes each stored body straight into
the typed :class:`~pwf.events.Entry` of its tag (ADR 0013 D2, D7); the chain
it belongs to is :mod:`pwf.fold.chain`'s to check.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from pwf.errors import ChainError, InputError
from pwf.events import REGISTRY, Entry, Envelope, read_body
from pwf.store import check_position

__all__ = ["decoded", "entry_at"]


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


def entry_at(seq: int, stored_seq: int, body: bytes) -> Entry:
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
    return entry_at(seq, seq, body)


def _opened(seq: int, body: bytes) -> Entry:
    try:
        entry = read_body(body)
    except (msgspec.ValidationError, msgspec.DecodeError, InputError) as error:
        raise ChainError(seq, str(error)) from None
    if entry.seq != seq:
        raise ChainError(seq, f"the stored bytes say seq {entry.seq}")
    return entry
