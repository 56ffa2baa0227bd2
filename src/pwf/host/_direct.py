"""Direct mode's guard: refused while a live ``pwf serve`` holds the host claim (ADR 0010).

Imports errors only (plus sqlite3, for the one error it reads as "never
served"); reads the committed ``host_state`` row.  A claim is live while its
``host_id`` is set and ``expires_at > now``.  A database that never had a
server may have no ``host_state`` table.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

from pwf.errors import StoreError

if TYPE_CHECKING:
    from pwf.store import EventStore

__all__ = ["refuse_if_served"]

_LIVE: Final = "SELECT epoch FROM host_state WHERE host_id IS NOT NULL AND expires_at > ?"
_NEVER_SERVED: Final = "no such table: host_state"
"""SQLite's refusal of :data:`_LIVE` on a database without the table: no host ever claimed it."""


def refuse_if_served(store: EventStore, now: int) -> None:
    """Refuse direct mode at ``now`` while a live served host owns ``store``.

    One statement (ADR 0105): the claim's row is read directly, and a
    database without ``host_state`` answers with SQLite's "no such table",
    which is read as "never served", instead of a look-up in
    ``sqlite_master`` first.  ``pwf request`` checks before every line, so
    a second statement was a second read transaction per line.

    Raises:
        StoreError: a live host owns the database.
    """
    try:
        row = store.reader().one(_LIVE, (now,))
    except sqlite3.OperationalError as error:
        if str(error) != _NEVER_SERVED:
            raise
        return
    if row is not None:
        raise StoreError(
            f"a live pwf host (epoch {row['epoch']}) owns this database;"
            " send requests to it instead"
        )
