"""Direct mode's guard: refused while a live ``pwf serve`` holds the host claim (ADR 0010).

Imports errors only; reads the committed ``host_state`` row.  A claim is
live while its ``host_id`` is set and ``expires_at > now``.  A database that
never had a server may have no ``host_state`` table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf.errors import StoreError

if TYPE_CHECKING:
    from pwf.store import EventStore

__all__ = ["refuse_if_served"]


def refuse_if_served(store: EventStore, now: int) -> None:
    """Refuse direct mode at ``now`` while a live served host owns ``store``.

    Raises:
        StoreError: a live host owns the database.
    """
    reader = store.reader()
    table = reader.one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'host_state'")
    if table is None:
        return
    row = reader.one(
        "SELECT epoch FROM host_state WHERE host_id IS NOT NULL AND expires_at > ?", (now,)
    )
    if row is not None:
        raise StoreError(
            f"a live pwf host (epoch {row['epoch']}) owns this database;"
            " send requests to it instead"
        )
