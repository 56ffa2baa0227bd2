"""What a prune has prepared so far, and the events it keeps; imports events only.

A prune prepares its new database outside the write lock (ADR 0047, 0103):
:class:`Segment` says how far into the backup that has got and what it
found; :class:`Kept` is one event the pruned log keeps, as the fold takes
it, and, for a log compacted before ADR 0103, as its proof reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pwf.events import Entry, Event

__all__ = ["Kept", "Segment"]


@dataclass(frozen=True)
class Kept:
    """An event the log keeps: its batch index, the original and the event the fold takes."""

    batch_index: int
    original: Entry
    event: Event


@dataclass(frozen=True)
class Segment:
    """A prune prepared in a scratch file, up to seq ``seq`` of its backup."""

    removed: frozenset[str]
    seq: int
    """The backup's events up to this seq are folded into the scratch file, their rows copied."""
    kept: int
    dropped: int
    """The events whose bytes go, so far."""
    batch_index: int
    """The last new batch index given, and the original batch it stood for (a compaction's)."""
    batch: int | None
