"""``blobs``: JSON and text values kept by SHA-256 (DOMAIN §3.3).

Every event names its blob-valued fields (``JSON_BLOBS``, ``TEXT_BLOBS``);
their bytes are already canonical inside the event, so storing them needs no
encoder.  The first event that carries a value dates it.  One hash has one
media type: text whose UTF-8 equals a stored JSON value's bytes (or the other
way round) is a conflict that refuses the whole batch.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

import msgspec

from pwf.canonical import utf8
from pwf.events import EVENT_TYPES, Entry
from pwf.projections._sql import Statement, dispatch, handlers

if TYPE_CHECKING:
    from pwf.projections._sql import Handler

NAME: Final = "blobs"
VERSION: Final = 1

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS blobs (
  blob_hash BLOB PRIMARY KEY CHECK (length(blob_hash) = 32),
  media_type TEXT NOT NULL CHECK (media_type IN ('application/json', 'text/plain')),
  byte_length INTEGER NOT NULL CHECK (byte_length >= 0),
  content BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  CHECK (byte_length = length(content))
) STRICT""",
)

BLOB_CONFLICT: Final = "Content-addressed blob conflict"
"""The original's error when a hash is already stored with another media type (DOMAIN §3.3)."""

CONFLICT_SIGNATURE: Final = "NOT NULL constraint failed: blobs.media_type"
"""How SQLite reports the conflict the upsert below provokes."""

UPSERT: Final = (
    "INSERT INTO blobs (blob_hash, media_type, byte_length, content, created_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (blob_hash) DO UPDATE SET media_type = NULL"
    " WHERE blobs.media_type <> excluded.media_type"
)
"""Storing a stored hash again is a no-op; with another media type it breaks NOT NULL.

The update runs only on a media-type conflict, so the usual path writes
nothing more than ``DO NOTHING`` would; its failure aborts the statement and
the batch is refused with :data:`BLOB_CONFLICT`.  NOT NULL holds in bulk
folds too, which ignore CHECK constraints until the end.  Its parameters
start with the hash and the media type: once it succeeded, running it again
with both in the same transaction changes nothing, which the live read
model relies on to skip the repeats (:class:`pwf.readmodel.ReadModel`).
"""


def _handler(json_names: tuple[str, ...], text_names: tuple[str, ...]) -> Handler:
    """Store the named JSON fields, then the named text fields, of an event of one class."""

    def store(entry: Entry) -> list[Statement]:
        event, at = entry.event, entry.at
        statements: list[Statement] = []
        for name in json_names:
            value = getattr(event, name)
            if isinstance(value, msgspec.Raw):
                content = bytes(value)
                digest = hashlib.sha256(content).digest()
                statements.append((UPSERT, (digest, "application/json", len(content), content, at)))
        for name in text_names:
            value = getattr(event, name)
            if isinstance(value, str):
                content = utf8(value)
                digest = hashlib.sha256(content).digest()
                statements.append((UPSERT, (digest, "text/plain", len(content), content, at)))
        return statements

    return store


HANDLERS: Final = handlers(
    *(
        (cls, _handler(tuple(cls.JSON_BLOBS), tuple(cls.TEXT_BLOBS)))
        for cls in EVENT_TYPES
        if cls.JSON_BLOBS or cls.TEXT_BLOBS
    )
)
"""Every event class with blob-valued fields, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Store every blob-valued field of the event."""
    return dispatch(HANDLERS, entry)
