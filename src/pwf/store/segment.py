"""The kept events of a compaction, ready to be sealed where the live head will be.

Imports events and errors.  A prune prepares its compacted segment outside
the write lock (ADR 0047), but where the segment goes is only known under
it: its opening hangs off the live head, so every kept event's seq, batch,
``eventId``, ``prevHash`` and content hash depend on a head that writers
move until the lock is taken.  Everything else about a kept event is fixed
by the backup: a :class:`Template` holds those bytes, and
:meth:`Template.sealed` writes the whole event for a given place in a
fraction of what :func:`pwf.events.seal` costs, as it encodes nothing.

The templates wait in :data:`KEPT_TABLE` of a scratch file of their own,
attached as :data:`KEPT_SCHEMA` beside the compacted image (ADR 0051), one
row per kept event in log order, with the new batch index of each.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pwf.errors import StoreError
from pwf.events import MAX_EVENT_BYTES, SCHEMA
from pwf.store.schema import INDEXED_COLUMNS_DDL

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from pwf.events import Entry, Event

__all__ = [
    "KEPT_DDL",
    "KEPT_SCHEMA",
    "KEPT_TABLE",
    "TEMPLATE_COLUMNS",
    "Kept",
    "Segment",
    "Template",
    "sealed_rows",
]

KEPT_SCHEMA: Final = "kept"
"""The name the templates' own scratch file is attached under, beside the image (ADR 0051)."""
KEPT_TABLE: Final = "_pwf_kept"
KEPT_DDL: Final = f"""CREATE TABLE {KEPT_SCHEMA}.{KEPT_TABLE} (
  n INTEGER PRIMARY KEY,
  batch_index INTEGER NOT NULL,
  opening BLOB NOT NULL,
  cause BLOB NOT NULL,
  data BLOB NOT NULL,
  closing BLOB NOT NULL,
{INDEXED_COLUMNS_DDL.format(integer="INTEGER")}
)"""
"""One kept event of the backup, in log order: its template and its place-free columns."""
TEMPLATE_COLUMNS: Final = (
    "opening, cause, data, closing, type, at, run_id, session_id, request_id, client_id,"
    " idempotency_key"
)

_BATCH: Final = b',"batch":'
_HASH: Final = b',"contentHash":"'
_EVENT_ID: Final = b',"eventId":"evt-'
_TYPE: Final = b',"type":"'
_PLACED: Final = b'%s%d","prevHash":%s,"schema":"' + SCHEMA.encode() + b'","seq":%d%s'


class Template(NamedTuple):
    """A kept event's canonical bytes without what its place in the log decides.

    Canonical JSON writes the envelope's members in sorted order (``actor``,
    ``at``, ``batch``, ``cause``, ``contentHash``, ``data``, ``eventId``,
    ``prevHash``, ``schema``, ``seq``, ``type``), so the members a place
    decides sit at fixed points between the others: ``opening`` ends with
    ``"batch":``, ``cause`` runs from the batch number to ``contentHash``
    (empty without a cause), ``data`` from ``,"data":`` to ``eventId``, and
    ``closing`` is ``,"type":"…"}``.
    """

    opening: bytes
    cause: bytes
    data: bytes
    closing: bytes

    @classmethod
    def of(cls, body: bytes, entry: Entry) -> Template:
        """Split a sealed event's bytes; checked by sealing it again where it stands.

        Raises:
            StoreError: the bytes do not split into an envelope around the event.
        """
        try:
            batch = body.index(_BATCH) + len(_BATCH)
            cause = body.index(b",", batch)
            content = body.index(_HASH, cause)
            data = content + len(_HASH) + 65
            piece = cls(
                body[:batch],
                body[cause:content],
                body[data : body.rindex(_EVENT_ID)],
                body[body.rindex(_TYPE) :],
            )
        except ValueError:
            piece = None
        prev = None if entry.prev_hash is None else entry.prev_hash.encode()
        if piece is None or piece.sealed(seq=entry.seq, batch=entry.batch, prev_hash=prev) != (
            body,
            entry.content_hash,
        ):
            raise StoreError(f"seq {entry.seq}: its bytes do not split into an envelope template")
        return piece

    def sealed(self, *, seq: int, batch: int, prev_hash: bytes | None) -> tuple[bytes, str]:
        """The event's bytes and content hash at ``seq`` in ``batch`` after ``prev_hash``.

        Raises:
            StoreError: the bytes exceed the size of an event.
        """
        prev = b"null" if prev_hash is None else b'"' + prev_hash + b'"'
        rest = _PLACED % (_EVENT_ID, seq, prev, seq, self.closing)
        number = b"%d" % batch
        digest = hashlib.sha256(self.opening)
        for part in (number, self.cause, self.data, rest):
            digest.update(part)
        content_hash = digest.hexdigest()
        body = b"".join(
            (self.opening, number, self.cause, _HASH, content_hash.encode(), b'"', self.data, rest)
        )
        if len(body) > MAX_EVENT_BYTES:
            raise StoreError(f"seq {seq}: the kept event of {len(body)} bytes exceeds the limit")
        return body, content_hash


@dataclass(frozen=True)
class Kept:
    """An event the compacted log keeps: its new batch index, the original and the event kept."""

    batch_index: int
    original: Entry
    event: Event


@dataclass(frozen=True)
class Segment:
    """A compaction prepared in a scratch file, up to seq ``seq`` of its backup."""

    removed: frozenset[str]
    seq: int
    """The backup's events up to this seq wait in the scratch file, folded and as templates."""
    kept: int
    dropped: int
    batch_index: int
    """The last new batch index given, and the original batch it stood for."""
    batch: int | None


_PREV_PLACED: Final = b'%s%d","prevHash":"%s","schema":"' + SCHEMA.encode() + b'","seq":%d%s'


def sealed_rows(
    found: Iterable[Sequence[Any]], *, seq: int, first_batch: int, prev_hash: bytes
) -> Iterator[tuple[object, ...]]:
    """Seal a run of templates after ``seq`` and ``prev_hash``: the events table's rows.

    ``found`` gives ``(batch_index, opening, cause, data, closing, *place-free
    columns)`` per kept event in log order (:data:`KEPT_TABLE`'s columns from
    ``batch_index``); each row is ``(seq, batch, *place-free columns,
    content_hash, prev_hash, body)``, the bytes :meth:`Template.sealed` gives
    event by event.  This is the one loop a prune runs under the write lock
    for every kept event (ADR 0051), so it does no more than hash and splice.

    Raises:
        StoreError: a sealed event exceeds the size of an event.
    """
    sha256, placed, event_id, marker, join = (
        hashlib.sha256,
        _PREV_PLACED,
        _EVENT_ID,
        _HASH,
        b"".join,
    )
    prev = prev_hash
    for batch_index, opening, cause, data, closing, *place_free in found:
        seq += 1
        batch = first_batch + batch_index
        number = b"%d" % batch
        rest = placed % (event_id, seq, prev, seq, closing)
        content = sha256(join((opening, number, cause, data, rest))).hexdigest().encode()
        body = join((opening, number, cause, marker, content, b'"', data, rest))
        if len(body) > MAX_EVENT_BYTES:
            raise StoreError(f"seq {seq}: the kept event of {len(body)} bytes exceeds the limit")
        yield (seq, batch, *place_free, content.decode(), prev.decode(), body)
        prev = content
