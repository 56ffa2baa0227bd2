"""Which events a compacted log keeps, and how (DOMAIN §13.2); pure, imports events only.

A prune removes whole run trees.  The compacted log is the old log with
every event *about* a removed run left out, so folding it gives the old
projections with those trees deleted:

* an event whose run (``run_id``) was removed is dropped;
* ``command.recorded`` stays, since it is the request's idempotency record,
  with its run link set to null, as the original's ``ON DELETE SET NULL``;
* ``session.terminal_cleared`` stays with its run link set to null, for the same reason;
* the ``log.compacted`` that opened the old log is dropped: the new one
  replaces it, and the backup keeps it;
* every other event (no run, or a run that stays) is kept unchanged.

The same function decides when the log is compacted and when an auditor
proves a compacted log against its backup, so the two cannot disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from pwf.events.commands import CommandRecorded
from pwf.events.log import LogCompacted
from pwf.events.sessions import TerminalCleared

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from pwf.events._base import Event

__all__ = ["compacted", "dropped"]

_UNLINKED: Final = (CommandRecorded, TerminalCleared)
_UNLINKED_TAGS: Final = frozenset(cls.TAG for cls in _UNLINKED)


def compacted(event: Event, removed: AbstractSet[str]) -> Event | None:
    """The event as the compacted log keeps it, or None when it leaves with its run."""
    if isinstance(event, LogCompacted):
        return None
    run_id = event.index_run_id()
    if run_id is None or run_id not in removed:
        return event
    if isinstance(event, _UNLINKED):
        return msgspec.structs.replace(event, run_id=None)
    return None


def dropped(tag: str, run_id: str | None, removed: AbstractSet[str]) -> bool:
    """Whether :func:`compacted` drops an event, from its type and indexed run alone."""
    if tag == LogCompacted.TAG:
        return True
    return run_id is not None and run_id in removed and tag not in _UNLINKED_TAGS
