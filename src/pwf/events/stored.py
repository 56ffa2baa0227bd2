"""Stored bytes to their typed event in one decode, judged as :func:`pwf.events.open_body` judges.

Imports pwf.events, canonical and msgspec.
:func:`stored_decoder` picks, by the tag a canonical body ends with, a
decoder straight from the bytes to the :class:`~pwf.events.Entry` of that
tag (ADR 0013 D2, D7); :func:`open_stored` is ``open_body`` through it: the
same checks, the same verdict and the same errors, in one pass where the
bytes allow (ADR 0063).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, get_args

import msgspec

from pwf import canonical
from pwf.events import (
    MAX_EVENT_BYTES,
    REGISTRY,
    Entry,
    Envelope,
    Hex256,
    content_hash_of,
    open_canonical,
)

__all__ = ["decode_stored", "open_stored", "stored_decoder"]

_CHAINED: Final[dict[str, object]] = {"content_hash": str, "prev_hash": str | None}
"""Envelope members whose pattern is proven otherwise: a content hash equal to
the recomputed SHA-256 is lower-case hex, and a prev hash is matched below
(:func:`open_stored`) or, in a fold, by the chain check against the hash
before it.  Matching their regular expressions in the decoder would cost a
tenth of the decode."""
_HEX256: Final = re.compile(get_args(Hex256)[1].pattern)
"""The pattern an envelope's hashes must match, as msgspec matches it (``re.search``)."""


def _stored(tag: str, cls: type) -> msgspec.json.Decoder[Any]:
    """One pass from stored bytes to an :class:`Entry` of tag ``tag``.

    The struct is an ``Entry`` whose members are the envelope's, with its
    constraints and wire names, ``data`` typed as ``cls`` and ``type`` fixed
    to ``tag``: the same checks as :class:`Envelope` and then the data's
    decoder, without a second parse or a copy into a new ``Entry``.  Only
    the hashes' patterns are left out (:data:`_CHAINED`).
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


_KNOWN: Final = {tag.encode(): (tag, cls) for tag, cls in REGISTRY.items()}
"""Known tag (as bytes) -> the tag and its data's type."""
_STORED: Final[dict[bytes, msgspec.json.Decoder[Any]]] = {}
"""Known tag (as bytes) -> its one-pass decoder, made the first time a body of the tag is
opened: making all of them costs a command 12 to 18 ms of CPU at import, though most
commands open a few tags or none (ADR 0068)."""
_TYPE_MEMBER: Final = b',"type":"'
"""Canonical bytes end with this member, as ``type`` sorts last."""


def stored_decoder(body: bytes) -> msgspec.json.Decoder[Any] | None:
    """The one-pass decoder of the tag ``body`` ends with; None for another ending or an old tag.

    Its entry's hashes are not matched against their pattern (:data:`_CHAINED`).
    """
    member = body.rfind(_TYPE_MEMBER)
    if member <= 0:
        return None
    tag = body[member + len(_TYPE_MEMBER) : -2]
    decoder = _STORED.get(tag)
    if decoder is None:
        known = _KNOWN.get(tag)
        if known is None:
            return None
        decoder = _STORED[tag] = _stored(*known)  # two threads may both make it: either is right
    return decoder


def open_stored(body: bytes) -> Entry:
    """:func:`pwf.events.open_body`'s checks, verdict and errors, in one typed decode when it can.

    The decode succeeds only where the envelope's and the data's decoders
    would, but for the hashes' patterns: the content hash is then compared
    with the recomputed one, which is lower-case hex, and the prev hash is
    matched here.  Anything else takes ``open_body``'s own steps, which
    name the fault.

    Raises:
        LineError: not canonical JSON, or the content hash does not match.
        EventDataError: the envelope or its data does not fit its type.
    """
    canonical.parse_line(body, limit=MAX_EVENT_BYTES)
    entry = decode_stored(body)
    if entry is not None:
        prev = entry.prev_hash
        if (prev is None or _HEX256.search(prev)) and content_hash_of(body) == entry.content_hash:
            return entry
    return open_canonical(body)


def decode_stored(body: bytes) -> Entry | None:
    """The entry in one typed decode, or None where the long way must name the fault.

    None for bytes of an unknown type or an old tag, and for bytes the typed
    decoders refuse; nothing here checks the hashes.
    """
    decoder = stored_decoder(body)
    if decoder is None:
        return None
    try:
        entry: Entry = decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return entry
