"""What a workload leaves in a SQLite file and its WAL: marginal bytes by B-tree, pages per commit.

Measures nothing by itself; the benchmarks call it around their writes.
Imports the standard library only (no pwf), so a test can load it by path
and run it on a small database of its own.

* **Marginal bytes.** :func:`layout` checkpoints a file (``TRUNCATE``) and
  reads its size and, from SQLite's ``dbstat`` virtual table, the bytes of
  each B-tree (the sum of its pages' ``pgsize``: interior, leaf and overflow
  pages).  Two layouts taken after N and after 2N requests give, by
  :func:`marginal`, what one more request costs on disk, without the fixed
  overhead of a young file (the empty pages of every table and index).
  Each B-tree is the log's or a projection's by its table's name
  (:func:`kind`): ``events``, every name starting with ``event_`` or
  ``_pwf_`` and their indexes are the log; SQLite's own tables are
  ``sqlite``; every other table and index is a projection.  What the file
  grew by beyond its B-trees is ``free`` (pages on the free list).
* **WAL pages.** With WAL auto-checkpoints off the WAL only grows, one
  frame (a 24-byte header and a page) per page a commit writes, after a
  32-byte file header: :func:`wal_frames`.  :func:`commits` reads a WAL
  image frame by frame and returns the page numbers of each commit (a
  frame whose "database size" field is non-zero ends one), and
  :func:`page_owners` names the B-tree each page belongs to, so that
  :func:`touched` counts the B-trees a commit wrote: a commit writes at
  least one page of every B-tree it changes, which is the floor its WAL
  bytes cannot go below.
* **Parts of a request.** :func:`statement_part` sorts a recorded SQL
  statement into transaction control, a write of the log, a write of a
  projection, or a read, by the table it writes.
"""

from __future__ import annotations

import collections
import re
import sqlite3
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

__all__ = [
    "FRAME_HEADER",
    "KINDS",
    "Layout",
    "Marginal",
    "commits",
    "kind",
    "layout",
    "marginal",
    "page_owners",
    "statement_part",
    "touched",
    "wal_frames",
]

Kind = Literal["log", "projections", "sqlite"]
KINDS: Final[tuple[Kind, ...]] = ("log", "projections", "sqlite")
LOG_TABLE: Final = "events"
LOG_PREFIXES: Final = ("event_", "_pwf_")
WAL_HEADER: Final = 32
"""Bytes of a WAL file's header."""
FRAME_HEADER: Final = 24
"""Bytes of a WAL frame's header, before its page."""


def kind(table: str) -> Kind:
    """Whose a table (and every index on it) is: the log's, SQLite's own, or a projection's."""
    if table == LOG_TABLE or table.startswith(LOG_PREFIXES):
        return "log"
    if table.startswith("sqlite_"):
        return "sqlite"
    return "projections"


def _tables(connection: sqlite3.Connection) -> dict[str, str]:
    """Each B-tree's name (table or index) to its table's name."""
    rows = connection.execute(
        "SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')"
    )
    return {str(name): str(table) for name, table in rows}


@dataclass(frozen=True)
class Layout:
    """A checkpointed database file: its size and the bytes of each of its B-trees."""

    file_bytes: int
    page_size: int
    btrees: Mapping[str, int]
    """B-tree name to the bytes of its pages (``dbstat``'s ``pgsize`` summed)."""
    tables: Mapping[str, str]
    """B-tree name to its table's name (a table is its own)."""

    def by_kind(self) -> dict[str, int]:
        """Bytes of the log's, the projections' and SQLite's B-trees, and the rest (``free``)."""
        sums = dict.fromkeys((*KINDS, "free"), 0)
        for name, size in self.btrees.items():
            sums[kind(self.tables.get(name, name))] += size
        sums["free"] = self.file_bytes - sum(self.btrees.values())
        return sums


def layout(path: Path) -> Layout:
    """Checkpoint ``path`` into its main file (``TRUNCATE``) and measure it.

    Raises ``RuntimeError`` when a reader kept the checkpoint from finishing,
    as the file's size would then not hold every commit.
    """
    connection = sqlite3.connect(path)
    try:
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise RuntimeError(f"{path}: the checkpoint could not finish")
        page_size = int(connection.execute("PRAGMA page_size").fetchone()[0])
        rows = connection.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        btrees = {str(name): int(size) for name, size in rows}
        tables = _tables(connection)
    finally:
        connection.close()
    return Layout(path.stat().st_size, page_size, btrees, tables)


@dataclass(frozen=True)
class Marginal:
    """Bytes on disk one more request costs: the file's and each kind's growth per request."""

    requests: int
    file: float
    kinds: Mapping[str, float]
    """``log``, ``projections``, ``sqlite`` and ``free``: bytes per request."""


def marginal(first: Layout, second: Layout, requests: int) -> Marginal:
    """What ``requests`` more requests, made between ``first`` and ``second``, cost each."""
    if requests <= 0:
        raise ValueError("marginal bytes need at least one request between the layouts")
    before, after = first.by_kind(), second.by_kind()
    kinds = {name: (after[name] - before[name]) / requests for name in after}
    return Marginal(requests, (second.file_bytes - first.file_bytes) / requests, kinds)


def wal_frames(size: int, page_size: int) -> int:
    """Frames in a WAL file of ``size`` bytes: ``(size - 32) / (page_size + 24)``; 0 when empty."""
    if size == 0:
        return 0
    frames, rest = divmod(size - WAL_HEADER, page_size + FRAME_HEADER)
    if size < WAL_HEADER or rest:
        raise ValueError(f"{size} bytes is not a WAL of {page_size}-byte pages")
    return frames


def commits(wal: bytes, page_size: int, first_frame: int = 0) -> list[list[int]]:
    """The page numbers of each commit in a WAL image, from frame ``first_frame`` on.

    A frame whose header's second field (the database's size after the
    commit) is non-zero is a commit's last; frames after the last commit
    (an unfinished transaction) are left out.
    """
    step = page_size + FRAME_HEADER
    found: list[list[int]] = []
    pages: list[int] = []
    for frame in range(first_frame, wal_frames(len(wal), page_size)):
        offset = WAL_HEADER + frame * step
        page, size_after = struct.unpack_from(">II", wal, offset)
        pages.append(page)
        if size_after:
            found.append(pages)
            pages = []
    return found


def page_owners(connection: sqlite3.Connection) -> dict[int, str]:
    """Each page of the database (as ``connection`` sees it) to its B-tree's name."""
    rows = connection.execute("SELECT pageno, name FROM dbstat")
    return {int(page): str(name) for page, name in rows}


def touched(
    pages: Iterable[int], owners: Mapping[int, str], tables: Mapping[str, str]
) -> dict[str, set[str]]:
    """The B-trees the pages belong to, by kind; pages of no B-tree go under ``free``."""
    found: dict[str, set[str]] = collections.defaultdict(set)
    for page in pages:
        name = owners.get(page)
        if name is None:
            found["free"].add(str(page))
        else:
            found[kind(tables.get(name, name))].add(name)
    return dict(found)


_CONTROL: Final = re.compile(r"\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b", re.IGNORECASE)
_WRITE: Final = re.compile(
    r"\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)"
    r"\s+(?:\w+\.)?[\"`\[]?(\w+)",
    re.IGNORECASE,
)

Part = Literal["control", "log", "projections", "read"]


def statement_part(sql: str) -> Part:
    """Transaction control, a write of the log or of a projection (by its table), or a read."""
    if _CONTROL.match(sql):
        return "control"
    written = _WRITE.match(sql)
    if written is None:
        return "read"
    return "projections" if kind(written.group(1)) == "projections" else "log"
