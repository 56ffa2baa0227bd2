"""Live projections against the log: the chain, then a rebuild compared table by table.

Imports fold.workfile, _sqlite, store and errors.  :func:`check` is ``pwf verify``: it
verifies the chain, folds the log into a scratch file and compares the live
checkpoints and projection tables with it in SQLite, reporting the first
differing table with a few of its rows paired by primary key (ADR 0013 D4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pwf._sqlite import (
    Value,
    changed_cells,
    execute,
    projection_tables,
    quote,
    shown,
    transaction,
)
from pwf.errors import ChainError
from pwf.fold.workfile import CHUNK, Progress, scratch_fold
from pwf.store import VerifyReport

if TYPE_CHECKING:
    import sqlite3

    from pwf.store import EventStore

__all__ = ["Check", "RowDifference", "TableDifference", "Value", "check", "verify_failure"]


@dataclass(frozen=True)
class RowDifference:
    """One row that differs: its primary key, and how."""

    key: dict[str, Value]
    kind: Literal["changed", "onlyInLive", "onlyInRebuild"]
    columns: dict[str, tuple[Value, Value]]
    """For a changed row: each differing column with its live and rebuilt values."""


@dataclass(frozen=True)
class TableDifference:
    """The first projection table whose live rows are not what the log folds to."""

    table: str
    reason: str
    rows: tuple[RowDifference, ...] = ()


@dataclass(frozen=True)
class Check:
    """What :func:`check` found: the chain's report, then the first differing table."""

    chain: VerifyReport
    tables: int = 0
    difference: TableDifference | None = None

    @property
    def ok(self) -> bool:
        """True when the chain holds and every projection equals its rebuild."""
        return self.chain.ok and self.difference is None


def check(
    store: EventStore, *, progress: Progress | None = None, rows: int = 5, chunk: int = CHUNK
) -> Check:
    """Verify the chain, then compare the live checkpoints and projections with a rebuild.

    The rebuild goes to a scratch file beside the database (or, when that
    directory is read-only, in the temporary directory) and is deleted after.
    Its tail and the comparison share one read snapshot of the live database,
    so appends made meanwhile are folded before comparing.  At most ``rows``
    differing rows of the first differing table are reported.
    """
    report = store.verify()
    if not report.ok:
        return Check(chain=report)
    try:
        with scratch_fold(
            store.projections_file,
            store.projections_file.path,
            "verify",
            copy_events=False,
            writable=False,
            progress=progress,
            chunk=chunk,
            anywhere=True,
            verified=report.head.seq,
        ) as scratch:
            scratch.install()
            scratch.fold_split(report.head.seq)
            scratch.index()
            with transaction(scratch.connection):
                head = scratch.live_head()
                scratch.fold_until(head.seq)
                tables = projection_tables(scratch.connection, "main")
                difference = _compare(scratch.connection, rows)
    except ChainError as error:
        events = max(error.seq - 1 - (report.head.seq - report.events), 0)
        bad = VerifyReport(
            events=events, head=report.head, first_bad_seq=error.seq, reason=error.reason
        )
        return Check(chain=bad)
    chain = VerifyReport(events=head.seq - scratch.chain.origin.seq, head=head)
    return Check(chain=chain, tables=len(tables), difference=difference)


def _compare(connection: sqlite3.Connection, limit: int) -> TableDifference | None:
    """The first table where ``live`` and ``main`` differ: the checkpoints, then by name."""
    difference = _compare_table(connection, "_pwf_checkpoint", limit)
    if difference is not None:
        return difference
    live, rebuilt = projection_tables(connection, "live"), projection_tables(connection, "main")
    for table in sorted(set(live) | set(rebuilt)):
        if table not in rebuilt:
            return TableDifference(table, "the log does not produce this table")
        if table not in live:
            return TableDifference(table, "the live database lacks this table")
        difference = _compare_table(connection, table, limit)
        if difference is not None:
            return difference
    return None


def _compare_table(
    connection: sqlite3.Connection, table: str, limit: int
) -> TableDifference | None:
    quoted = quote(table)
    live = connection.execute(f"PRAGMA live.table_info({quoted})").fetchall()
    rebuilt = connection.execute(f"PRAGMA main.table_info({quoted})").fetchall()
    names = [row[1] for row in rebuilt]
    if [row[1] for row in live] != names:
        return TableDifference(table, "its columns differ from the rebuilt table's")
    keys = [row[1] for row in sorted(rebuilt, key=lambda row: row[5]) if row[5]] or names
    columns = ", ".join(quote(name) for name in names)
    found: dict[tuple[object, ...], RowDifference] = {}
    for side, other in (("live", "main"), ("main", "live")):
        extra = connection.execute(
            f"SELECT {columns} FROM {side}.{quoted} EXCEPT SELECT {columns} FROM {other}.{quoted}"  # noqa: S608 - names from sqlite_master
            " LIMIT ?",
            (limit,),
        )
        for row in extra.fetchall():
            values = dict(zip(names, row, strict=True))
            key = tuple(values[name] for name in keys)
            if key not in found and len(found) < limit:
                found[key] = _row_difference(connection, table, names, keys, values, side=side)
    if found:
        return TableDifference(table, "rows differ from the log's rebuild", tuple(found.values()))
    counts = [
        connection.execute(f"SELECT count(*) FROM {schema}.{quoted}").fetchone()[0]  # noqa: S608 - names from sqlite_master
        for schema in ("live", "main")
    ]
    if counts[0] != counts[1]:
        return TableDifference(table, f"it holds {counts[0]} rows, the rebuild {counts[1]}")
    return None


def _row_difference(  # noqa: PLR0913 - one row's whole context
    connection: sqlite3.Connection,
    table: str,
    names: list[str],
    keys: list[str],
    values: dict[str, object],
    *,
    side: str,
) -> RowDifference:
    """Pair a row found on one side with the other side's row of the same key."""
    other = "main" if side == "live" else "live"
    where = " AND ".join(f"{quote(name)} IS ?" for name in keys)
    match = execute(  # a key with a lone surrogate is looked up exactly (ADR 0071)
        connection,
        f"SELECT {', '.join(quote(name) for name in names)} FROM {other}.{quote(table)}"  # noqa: S608 - names from sqlite_master
        f" WHERE {where}",
        tuple(values[name] for name in keys),
    ).fetchone()
    key = {name: shown(values[name]) for name in keys}
    if match is None:
        return RowDifference(key, "onlyInLive" if side == "live" else "onlyInRebuild", {})
    found = tuple(values[name] for name in names)
    live, rebuilt = (found, match) if side == "live" else (match, found)
    changed = changed_cells(names, live, rebuilt, storage_class=True)
    return RowDifference(key, "changed", {name: (a, b) for name, a, b in changed})


def verify_failure(store: EventStore) -> str | None:
    """``state.verify``'s verifier: why the chain or projections fail, or None when both hold."""
    found = check(store, rows=1)
    if not found.chain.ok:
        return (
            f"Pi Workflows event chain is broken at seq {found.chain.first_bad_seq}:"
            f" {found.chain.reason}"
        )
    if found.difference is not None:
        return (
            f"Pi Workflows projection {found.difference.table} differs from the log:"
            f" {found.difference.reason}"
        )
    return None
