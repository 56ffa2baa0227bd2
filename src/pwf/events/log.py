"""Events about the log itself (DOMAIN §13.2, compaction, migration); imports the event base."""

from __future__ import annotations

from typing import Annotated

import msgspec

from pwf.events._base import Event, Hex256, OpaqueId, Positive, SafeInt


class LogCompacted(Event, frozen=True, kw_only=True):
    """The first event of a compacted log: what it replaced and where the full history is.

    Its ``seq`` is ``replaced_seq + 1``, its ``prevHash`` is ``replaced_hash``
    and its batch is ``replaced_batch + 1``, so the compacted log hangs off the
    head it replaced.  The events after it are the backup's events with the
    removed runs' events left out (pwf.events.compaction), re-sealed in order.
    """

    TAG = "log.compacted"

    replaced_seq: Positive
    replaced_hash: Hex256
    replaced_batch: Positive
    backup_path: Annotated[str, msgspec.Meta(min_length=2, max_length=4096)]
    backup_sha256: Hex256
    cutoff: SafeInt
    removed_run_ids: tuple[OpaqueId, ...]
    removed_events: SafeInt
    retained_events: SafeInt


class LogMigrated(Event, frozen=True, kw_only=True):
    """The first event a log writes in a new store format: the file it was, kept as its backup.

    Every event before it keeps its seq, bytes and hashes (ADR 0102): only
    how the log stores them changed.  ``backup_sha256`` is the SHA-256 of
    the file in the old format, kept at ``backup_path``, and
    ``backup_seq``/``backup_hash`` its head, so ``pwf log verify --backup``
    can prove that each of its events is the event at the same seq here.
    """

    TAG = "log.migrated"

    from_format: Annotated[str, msgspec.Meta(pattern=r"^pwf\.store\.v[0-9]+$")]
    to_format: Annotated[str, msgspec.Meta(pattern=r"^pwf\.store\.v[0-9]+$")]
    backup_path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    backup_sha256: Hex256
    backup_seq: SafeInt
    backup_hash: Hex256 | None


class LogPruned(Event, frozen=True, kw_only=True):
    """A prune that kept every seq: the removed runs' events keep their place, not their bytes.

    Each event of a removed run's tree (DOMAIN §13.2's selection; the
    command records and terminal clearings that name it stay) keeps its
    seq, batch, content hash and Merkle leaf; its bytes moved to the backup
    at ``backup_path``, whose SHA-256 and head (``backup_seq``,
    ``backup_hash``) are named here, so ``pwf log verify --backup`` can
    prove each removed body against the leaf kept (ADR 0103).  Folded, it
    unlinks what stays from the removed runs, as the original's prune does.
    """

    TAG = "log.pruned"

    cutoff: SafeInt
    removed_run_ids: tuple[OpaqueId, ...]
    removed_events: SafeInt
    backup_path: Annotated[str, msgspec.Meta(min_length=2, max_length=4096)]
    backup_sha256: Hex256
    backup_seq: SafeInt
    backup_hash: Hex256 | None
