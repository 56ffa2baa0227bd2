"""``host_state``: the singleton host claim row (DOMAIN §5.1).

Either all seven claim columns are set or none; a missing row is epoch 0.
The table is made by the first host event, not at install: a database that
was never served has no ``host_state`` table, so its projections, digests
and rebuilds stay exactly those of a pwf without a served host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.events import HostClaimed, HostReleased, HostRenewed
from pwf.projections._sql import each, handlers

if TYPE_CHECKING:
    from pwf.projections._sql import Statement

TABLE: Final = (
    """CREATE TABLE IF NOT EXISTS host_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  epoch INTEGER NOT NULL CHECK (epoch >= 0),
  host_id TEXT,
  token_hash BLOB,
  pid INTEGER,
  process_start_identity TEXT,
  started_at INTEGER,
  heartbeat_at INTEGER,
  expires_at INTEGER,
  CHECK (
    (host_id IS NULL AND token_hash IS NULL AND pid IS NULL AND process_start_identity IS NULL
      AND started_at IS NULL AND heartbeat_at IS NULL AND expires_at IS NULL)
    OR
    (host_id IS NOT NULL AND token_hash IS NOT NULL AND pid IS NOT NULL
      AND process_start_identity IS NOT NULL AND started_at IS NOT NULL
      AND heartbeat_at IS NOT NULL AND expires_at IS NOT NULL)
  )
) STRICT""",
)
_CREATE: Final = (TABLE[0], ())

_CLAIMED: Final = (
    "INSERT INTO host_state (id, epoch, host_id, token_hash, pid, process_start_identity,"
    " started_at, heartbeat_at, expires_at) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch, host_id = excluded.host_id,"
    " token_hash = excluded.token_hash, pid = excluded.pid,"
    " process_start_identity = excluded.process_start_identity,"
    " started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,"
    " expires_at = excluded.expires_at"
)
_RENEWED: Final = "UPDATE host_state SET heartbeat_at = ?, expires_at = ? WHERE epoch = ?"
_RELEASED: Final = (
    "UPDATE host_state SET host_id = NULL, token_hash = NULL, pid = NULL,"
    " process_start_identity = NULL, started_at = NULL, heartbeat_at = NULL,"
    " expires_at = NULL WHERE epoch = ?"
)


def _claimed(event: HostClaimed, at: int) -> list[Statement]:
    return [
        _CREATE,
        (
            _CLAIMED,
            (
                event.epoch,
                event.host_id,
                bytes.fromhex(event.token_hash),
                event.pid,
                event.process_start_identity,
                at,
                at,
                event.expires_at,
            ),
        ),
    ]


def _renewed(event: HostRenewed, at: int) -> list[Statement]:
    return [_CREATE, (_RENEWED, (at, event.expires_at, event.epoch))]


def _released(event: HostReleased, _at: int) -> list[Statement]:
    return [_CREATE, (_RELEASED, (event.epoch,))]


HANDLERS: Final = handlers(
    each(HostClaimed, _claimed),
    each(HostRenewed, _renewed),
    each(HostReleased, _released),
)
"""The host events and their handlers; :mod:`pwf.projections.workers` folds them."""
