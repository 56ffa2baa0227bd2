"""The SQLite log's schema, its format marks and its errors; imports errors, private, store.schema.

:data:`SCHEMA` makes the log's tables (events, the head row, the format
row, checkpoints, the Merkle tree's nodes); :func:`translate_error` turns SQLite's errors into pwf's
tree with one clear line naming the file.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING, Final, Literal

from pwf.errors import NotPwfDatabaseError, PwfError, StoreBusyError, StoreError
from pwf.private import create_file, make_directories
from pwf.store.schema import EVENT_INDEXES, EVENTS_VIEW, FORMAT, FORMAT_V1, LOG_DDL

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "APPLICATION_ID",
    "FORMAT",
    "HEAD_UPSERT",
    "LOG_SCHEMA",
    "SCHEMA",
    "TREE_DDL",
    "Synchronous",
    "prepare_file",
    "translate_error",
    "wrong_format",
]

APPLICATION_ID: Final = 0x70776631
"""``PRAGMA application_id`` of every pwf database: the bytes ``pwf1`` (1886873137).

Tools that read the SQLite header (``file(1)``'s magic, ``sqlite3 .dbinfo``)
tell a pwf file by it; a file with another program's id is not a pwf
database, and one with 0 (made before pwf set it) still opens.
"""
Synchronous = Literal["FULL", "NORMAL", "EXTRA"]

TREE_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS {schema}._pwf_tree ("
    "pos INTEGER PRIMARY KEY, hash BLOB NOT NULL CHECK (length(hash) = 32)) STRICT"
)
"""The Merkle tree's perfect subtrees: position (:func:`pwf.merkle.node_position`), hash."""

LOG_SCHEMA: Final = (
    *(
        ddl.format(schema="{schema}", integer="INTEGER", blob="BLOB", strict=" STRICT")
        for ddl in LOG_DDL
    ),
    *EVENT_INDEXES,
    EVENTS_VIEW.replace("CREATE VIEW", "CREATE VIEW IF NOT EXISTS"),
)
"""The log's tables, indexes and view (ADR 0102); ``{schema}`` is empty or ``name.``."""

SCHEMA: Final = (
    *(statement.format(schema="") for statement in LOG_SCHEMA),
    """CREATE TABLE IF NOT EXISTS _pwf_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT""",
    """CREATE TABLE IF NOT EXISTS _pwf_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL,
  content_hash TEXT,
  batch INTEGER NOT NULL
) STRICT""",
    """CREATE TABLE IF NOT EXISTS _pwf_checkpoint (
  projection TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
) STRICT""",
    TREE_DDL.format(schema="main"),
)

HEAD_UPSERT: Final = (
    "INSERT INTO _pwf_head (id, seq, content_hash, batch) VALUES (1, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET seq = excluded.seq,"
    " content_hash = excluded.content_hash, batch = excluded.batch"
)
"""Move the head row to ``(seq, content_hash, batch)``."""


def wrong_format(path: str | os.PathLike[str], found: object) -> NotPwfDatabaseError:
    """The error for a file whose format row is not :data:`FORMAT` (ADR 0079).

    A format pwf does not know but that is pwf's (``pwf.store.v3`` from a
    newer pwf) is named, with the format this pwf reads; anything else is
    not a pwf database.
    """
    if found == FORMAT_V1:
        return NotPwfDatabaseError(
            f"{path}: a pwf database in format {FORMAT_V1}; this pwf writes {FORMAT}:"
            f" run `pwf log migrate --db {path}` to upgrade it (the old file is kept as its backup)"
        )
    if isinstance(found, str) and found.startswith("pwf.store.") and found != FORMAT:
        return NotPwfDatabaseError(
            f"{path}: a pwf database in format {found}, which this pwf does not read"
            f" (it reads {FORMAT}); open it with the pwf that wrote it or a newer one"
        )
    return NotPwfDatabaseError(f"{path}: not a pwf database (expected format {FORMAT})")


_BUSY: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_DISK: Final = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR})
_DAMAGED: Final = frozenset({sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT})


def translate_error(error: sqlite3.Error, path: Path) -> PwfError:
    """Turn a sqlite3 error into pwf's tree at the edge, by SQLite's result code.

    The primary code (the low byte of ``sqlite_errorcode``) decides, never
    the message's words; the message is kept in the line.  An error raised
    by the sqlite3 module itself (no code) is a plain :class:`StoreError`.
    """
    text = str(error)
    code = getattr(error, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary in _BUSY:
        return StoreBusyError(f"{path}: the database is locked by another writer ({text})")
    if primary == sqlite3.SQLITE_READONLY:
        return StoreError(f"{path}: the database is read-only ({text})")
    if primary in _DISK:
        return StoreError(f"{path}: the disk failed or is full ({text})")
    if primary in _DAMAGED:
        return NotPwfDatabaseError(f"{path}: not a pwf database or damaged ({text})")
    if primary == sqlite3.SQLITE_CANTOPEN:
        return StoreError(f"{path}: cannot open the database ({text})")
    return StoreError(f"{path}: {text}")


def prepare_file(path: Path) -> None:
    """Create the database's directories (0700) and an empty file (0600) if missing."""
    make_directories(path.parent)
    try:
        descriptor = create_file(path)
    except FileExistsError:
        return
    os.close(descriptor)
