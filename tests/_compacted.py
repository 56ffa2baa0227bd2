"""A log compacted as pwf compacted before ADR 0103, made by hand for the tests that read one.

Before ADR 0103 a prune replaced the log by a ``log.compacted`` event that
continues the old head, followed by the backup's kept events re-sealed in
order (ADR 0018).  pwf no longer writes such a log, but it still reads,
verifies and proves one: :func:`compact_by_hand` turns a test's log into
the compaction the old rule gives, its backup beside it.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from pwf.events import Actor, LogCompacted, seal
from pwf.events.compaction import compacted
from pwf.host._backup import backup_database
from pwf.store import Head
from pwf.store.compaction import file_sha256
from pwf.store.log_writes import write
from pwf.store.rows import columns
from pwf.store.sqlite import SqliteStore
from pwf.store.sqlite_schema import HEAD_UPSERT
from pwf.store.tree import build

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet
    from pathlib import Path

__all__ = ["compact_by_hand"]

ACTOR = Actor(type="host", id="pwf-direct")


def compact_by_hand(
    path: Path, backup: Path, *, removed: AbstractSet[str] = frozenset(), at: int = 1
) -> Head:
    """Back the log at ``path`` up to ``backup``, then compact it by ADR 0018's rule; its head.

    The projections are left as they are: they are what a fold of the
    kept events gives when ``removed`` is empty (a test that removes runs
    rebuilds them after).
    """
    with SqliteStore(path) as store:
        backup_database(store, backup)
    with SqliteStore(backup, read_only=True) as copy:
        head = copy.head()
        entries = list(copy.entries())
    rows = []
    opening = seal(
        LogCompacted(
            replaced_seq=head.seq,
            replaced_hash=head.content_hash or "",
            replaced_batch=head.batch,
            backup_path=str(backup.absolute()),
            backup_sha256=file_sha256(backup),
            cutoff=0,
            removed_run_ids=tuple(sorted(removed)),
            removed_events=sum(compacted(e.event, removed) is None for e in entries),
            retained_events=sum(compacted(e.event, removed) is not None for e in entries),
        ),
        seq=head.seq + 1,
        batch=head.batch + 1,
        at=at,
        actor=ACTOR,
        cause=None,
        event_id=f"evt-{head.seq + 1}",
        prev_hash=head.content_hash,
    )
    rows.append((columns(opening.entry), opening.body))
    last = Head(opening.entry.seq, opening.entry.content_hash, opening.entry.batch)
    index, batch = 0, None
    for entry in entries:
        event = compacted(entry.event, removed)
        if event is None:
            continue
        if entry.batch != batch:
            index, batch = index + 1, entry.batch
        again = seal(
            event,
            seq=last.seq + 1,
            batch=head.batch + 1 + index,
            at=entry.at,
            actor=entry.actor,
            cause=entry.cause,
            event_id=f"evt-{last.seq + 1}",
            prev_hash=last.content_hash,
        )
        rows.append((columns(again.entry), again.body))
        last = Head(again.entry.seq, again.entry.content_hash, again.entry.batch)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        for table in ("_pwf_events", "_pwf_batches", "_pwf_whole", "_pwf_pruned", "_pwf_tree"):
            connection.execute(f"DELETE FROM {table}")  # noqa: S608 - the log's own tables
        write(connection, rows, previous=None, new_batch=True)
        connection.execute(HEAD_UPSERT, (last.seq, last.content_hash, last.batch))
        connection.execute("UPDATE _pwf_checkpoint SET last_seq = ?", (last.seq,))
        build(connection, last)
        connection.execute("COMMIT")
    finally:
        connection.close()
    return last
