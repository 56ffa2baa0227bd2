"""Events about the log itself (DOMAIN §13.2, pwf's compaction); imports the event base only."""

from __future__ import annotations

from typing import Annotated

import msgspec

from pwf.events._base import Event, Hex256, OpaqueId, SafeInt


class LogCompacted(Event, frozen=True, kw_only=True):
    """The first event of a compacted log: what it replaced and where the full history is.

    Its ``seq`` is ``replaced_seq + 1``, its ``prevHash`` is ``replaced_hash``
    and its batch is ``replaced_batch + 1``, so the compacted log hangs off the
    head it replaced.  The events after it are the backup's events with the
    removed runs' events left out (pwf.events.compaction), re-sealed in order.
    """

    TAG = "log.compacted"

    replaced_seq: Annotated[int, msgspec.Meta(ge=1, le=2**53 - 1)]
    replaced_hash: Hex256
    replaced_batch: Annotated[int, msgspec.Meta(ge=1, le=2**53 - 1)]
    backup_path: Annotated[str, msgspec.Meta(min_length=2, max_length=4096)]
    backup_sha256: Hex256
    cutoff: SafeInt
    removed_run_ids: tuple[OpaqueId, ...]
    removed_events: SafeInt
    retained_events: SafeInt
