"""What a prune must leave, computed the way the original prunes (DOMAIN §13.2).

Shared by the prune tests and the state machine: the old projections
with the removed runs' rows deleted and their links in recorded commands
and terminal views set null.  Blobs are the log's content, so they are
checked apart: no kept row points at a missing blob, and none is new but
the prune's own record.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

from pwf._sqlite import dump, projection_tables
from pwf.events import LogPruned, open_body
from pwf.store.opening import sqlite_file
from pwf.store.pruned import prove_pruned

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.store import EventStore

if TYPE_CHECKING:
    from tests._dbfile import opened, projections
else:
    from _dbfile import opened, projections

__all__ = ["assert_pruned", "expected_after_prune", "prune_failure"]

RUN_TABLES: Final = (
    "runs",
    "run_queue",
    "run_bindings",
    "run_checkpoints",
    "run_updates",
    "run_sources",
    "node_attempts",
    "interactive_requests",
    "workflow_messages",
    "workflow_turns",
    "workflow_follow_ups",
    "run_workers",
    "worker_messages",
    "run_view_content",
)


def expected_after_prune(db: Path, removed: tuple[str, ...]) -> sqlite3.Connection:
    """The projections of ``db`` with the trees of ``removed`` deleted, in memory."""
    connection = sqlite3.connect(":memory:")
    source = sqlite3.connect(db)
    try:
        source.backup(connection)
    finally:
        source.close()
    marks = ", ".join("?" * len(removed))
    connection.execute(
        f"DELETE FROM interactive_submissions WHERE request_id IN"  # noqa: S608 - placeholders only
        f" (SELECT request_id FROM interactive_requests WHERE run_id IN ({marks}))",
        removed,
    )
    for table in RUN_TABLES:
        connection.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", removed)  # noqa: S608
    connection.execute(
        f"UPDATE host_commands SET run_id = NULL WHERE run_id IN ({marks})",  # noqa: S608
        removed,
    )
    connection.execute(
        f"UPDATE session_terminal_views SET cleared_run_id = NULL"  # noqa: S608 - placeholders only
        f" WHERE cleared_run_id IN ({marks})",
        removed,
    )
    return connection


def _hash_columns(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    return [
        (table, column[1])
        for table in projection_tables(connection)
        if table != "blobs"
        for column in connection.execute(f"PRAGMA table_info({table})")
        if column[1].endswith("_hash")
    ]


def assert_pruned(store: EventStore, old: Path, backup: Path, prune_request: str) -> LogPruned:
    """``store`` was pruned from the database ``old`` into ``backup``: check all of it.

    Returns the prune's ``log.pruned`` event (ADR 0103).
    """
    found = list(store.find(type=LogPruned.TAG))
    assert found, "the log holds no log.pruned"
    opening = open_body(found[-1].body).event
    assert isinstance(opening, LogPruned)
    removed = opening.removed_run_ids
    expected = dump(expected_after_prune(old, removed))
    live = projections(store.projections_file.path)
    live["host_commands"] = [row for row in live["host_commands"] if row[0] != prune_request]
    for table in expected:
        if table != "blobs":
            assert live[table] == expected[table], table
    with opened(store.projections_file.path) as connection:
        [receipt] = connection.execute(
            "SELECT receipt_hash FROM host_commands WHERE request_id = ?", (prune_request,)
        ).fetchone()
        old_blobs = {row[0] for row in expected["blobs"]}
        new_blobs = {row[0] for row in live["blobs"]}
        assert new_blobs - old_blobs <= {receipt}
        for table, column in _hash_columns(connection):
            dangling = connection.execute(
                f"SELECT count(*) FROM {table} WHERE {column} IS NOT NULL"  # noqa: S608 - test names
                f" AND {column} NOT IN (SELECT blob_hash FROM blobs)"
            ).fetchone()[0]
            assert dangling == 0, (table, column)
    assert store.verify().ok
    assert store.verify(deep=False).ok
    assert prune_failure(store, backup) is None
    return opening


def prune_failure(store: EventStore, backup: Path) -> str | None:
    """Why ``backup`` does not prove what a ``log.pruned`` took (ADR 0103); None when it does."""
    proof = prove_pruned(store, sqlite_file(store).connection, backup)
    return "the log holds no log.pruned" if proof is None else proof.failure
