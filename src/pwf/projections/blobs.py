"""``blobs``: JSON and text values kept by SHA-256 (DOMAIN §3.3).

Every event names its blob-valued fields (``JSON_BLOBS``, ``TEXT_BLOBS``);
their bytes are already canonical inside the event, so storing them needs no
encoder.  The first event that carries a value dates it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

import msgspec

from pwf.projections._sql import Sql

if TYPE_CHECKING:
    from pwf.events import Entry

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

_INSERT: Final = (
    "INSERT INTO blobs (blob_hash, media_type, byte_length, content, created_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (blob_hash) DO NOTHING"
)


def _row(content: bytes, media_type: str, at: int) -> Sql:
    return Sql(_INSERT, (hashlib.sha256(content).digest(), media_type, len(content), content, at))


def apply(entry: Entry) -> list[Sql]:
    """Store every blob-valued field of the event."""
    event = entry.event
    statements = []
    for name in event.JSON_BLOBS:
        value = getattr(event, name)
        if isinstance(value, msgspec.Raw):
            statements.append(_row(bytes(value), "application/json", entry.at))
    for name in event.TEXT_BLOBS:
        value = getattr(event, name)
        if isinstance(value, str):
            statements.append(_row(value.encode(), "text/plain", entry.at))
    return statements
