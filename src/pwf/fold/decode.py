"""Typed events from a log's stored rows, one pass from bytes to the Entry of their tag.

Imports events, store (its seq check), errors and msgspec; it touches no file
or database itself.  :func:`entry_at` decodes each stored body straight into
the typed :class:`~pwf.events.Entry` of its tag
(:func:`pwf.events.stored.stored_decoder`, ADR 0013 D2, D7); the chain it
belongs to, which also proves the hashes' patterns, is
:mod:`pwf.fold.chain`'s to check.
"""

from __future__ import annotations

import msgspec

from pwf.errors import ChainError, InputError
from pwf.events import Entry, read_body
from pwf.events.stored import stored_decoder
from pwf.store import check_position

__all__ = ["decoded", "entry_at"]


def entry_at(seq: int, stored_seq: int, body: bytes) -> Entry:
    """The typed event stored at ``seq``; its content hash is the caller's to check."""
    check_position(seq, stored_seq)
    decoder = stored_decoder(body)
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
