"""``run_view_content``: large run values served to viewers by hash (DOMAIN §5.10).

A value whose serialised size exceeds :data:`VIEW_VALUE_LIMIT` is kept here
and replaced in views by an ``$artifact`` reference.  A JSON string is kept
as its raw UTF-8 text (``text/plain``), anything else as canonical JSON.
"""

from __future__ import annotations

import hashlib
from typing import Final

import msgspec

from pwf import canonical
from pwf.events import Entry, RunFinished, RunReserved
from pwf.projections._sql import Statement, dispatch, each, handlers, pruned

NAME: Final = "run_view_content"
VERSION: Final = 1
VIEW_VALUE_LIMIT: Final = 16_384

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS run_view_content (
  run_id TEXT NOT NULL,
  content_hash BLOB NOT NULL,
  media_type TEXT NOT NULL CHECK (media_type IN ('application/json', 'text/plain')),
  byte_length INTEGER NOT NULL CHECK (byte_length >= 0),
  content BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, content_hash, media_type),
  CHECK (byte_length = length(content))
) STRICT""",
)


def view_content(value: bytes) -> tuple[bytes, str] | None:
    """The bytes and media type a large view value is stored as, or None when it is small."""
    if value.startswith(b'"'):
        decoded = canonical.decode(value)
        assert isinstance(decoded, str)  # a canonical value that opens with a quote is a string
        text = canonical.utf8(decoded)
        return (text, "text/plain") if len(text) > VIEW_VALUE_LIMIT else None
    return (value, "application/json") if len(value) > VIEW_VALUE_LIMIT else None


_INSERT: Final = (
    "INSERT INTO run_view_content (run_id, content_hash, media_type, byte_length,"
    " content, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


def _store(run_id: str, value: msgspec.Raw | msgspec.UnsetType, at: int) -> list[Statement]:
    if not isinstance(value, msgspec.Raw):
        return []
    found = view_content(bytes(value))
    if found is None:
        return []
    content, media_type = found
    return [
        (
            _INSERT,
            (run_id, hashlib.sha256(content).digest(), media_type, len(content), content, at),
        )
    ]


def _reserved(event: RunReserved, at: int) -> list[Statement]:
    return _store(event.run_id, event.input, at)


def _finished(event: RunFinished, at: int) -> list[Statement]:
    return _store(event.run_id, event.final_output, at) + _store(event.run_id, event.error, at)


HANDLERS: Final = handlers(
    each(RunReserved, _reserved),
    each(RunFinished, _finished),
    pruned("DELETE FROM run_view_content WHERE run_id IN ({})"),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Keep large inputs, outputs and errors of runs."""
    return dispatch(HANDLERS, entry)
