"""What a prune has prepared so far, and the events a compaction kept; imports events only.

A prune prepares its new database outside the write lock (ADR 0047, 0103):
:class:`Segment` says how far into the backup that has got and what it
found; :class:`Kept` is one event a log compacted before ADR 0103 kept, as
its proof reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pwf.events import Entry, Event

__all__ = ["Kept", "Segment"]


@dataclass(frozen=True)
class Kept:
    """An event a compacted log keeps: its batch index, the original and the event kept of it."""

    batch_index: int
    original: Entry
    event: Event


@dataclass(frozen=True)
class Segment:
    """A prune prepared in a scratch file, up to seq ``seq`` of its backup."""

    removed: frozenset[str]
    seq: int
    """The backup's events up to this seq are folded into the scratch file, their rows copied."""
    dropped: int
    """The events whose bytes go, so far."""
