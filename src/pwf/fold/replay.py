"""``pwf replay``: a prefix of the log into a new database; imports workfile, _sqlite, events.

:func:`replay` copies a prefix of whole batches of the log, verbatim, into a
new pwf database and folds it into every projection.  Its sibling
:mod:`pwf.fold.rebuild` folds the whole log beside the live database instead
and swaps the result in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pwf._sqlite import projection_tables
from pwf.errors import ChainError, InputError
from pwf.events import LogCompacted, open_body
from pwf.fold.workfile import CHUNK, Progress, ScratchFold, scratch_fold

if TYPE_CHECKING:
    import os
    import sqlite3

    from pwf.store import EventStore, Head

__all__ = ["ReplayReport", "replay"]


@dataclass(frozen=True)
class ReplayReport:
    """What :func:`replay` wrote: the head it reached and how much it was asked for."""

    out: Path
    head: Head
    events: int
    """How many events the file holds: from the log's origin (its opening, or a compaction) on."""
    tables: int
    requested: int | None
    """The seq asked for: ``--until``, or the last seq at or before ``--until-time``."""
    log_seq: int
    """The live log's head seq when the replay started."""


def replay(  # noqa: PLR0913 - each keyword is a replay option
    store: EventStore,
    out: str | os.PathLike[str],
    *,
    until_seq: int | None = None,
    until_time: int | None = None,
    progress: Progress | None = None,
    chunk: int = CHUNK,
) -> ReplayReport:
    """Copy whole batches of the log up to a point into a new pwf database and fold them.

    ``until_seq`` keeps the events with ``seq <= until_seq``; ``until_time``
    keeps those before the first event with ``at > until_time``.  Either is
    rounded down to the end of the last batch that fits whole; neither keeps
    everything.  The file is built beside ``out`` and renamed into place.
    The events are read from the store's projection file, which holds the
    log (a shared log's checked copy, ADR 0038).

    Raises:
        InputError: ``out`` exists, its directory does not, or both limits are given.
        ChainError: the log breaks its chain before the point reached.
    """
    target = Path(out).absolute()
    if until_seq is not None and until_time is not None:
        raise InputError("give --until or --until-time, not both")
    with scratch_fold(
        store.projections_file,
        _new_file(target),
        "tmp",
        copy_events=True,
        writable=False,
        progress=progress,
        chunk=chunk,
    ) as scratch:
        log_seq = scratch.live_head().seq
        cut = _cut(scratch.connection, log_seq, until_seq, until_time, scratch.chain.origin)
        requested, last = cut
        _whole(store, requested, log_seq)
        tables = _written(scratch, last, target)
    head = scratch.chain.head
    return ReplayReport(
        out=target,
        head=head,
        events=head.seq - scratch.chain.origin.seq,
        tables=tables,
        requested=requested,
        log_seq=log_seq,
    )


def _whole(store: EventStore, requested: int | None, log_seq: int) -> None:
    """Refuse a cut before the head that needs an event a later prune took (ADR 0103)."""
    if requested is not None and requested < log_seq:
        from pwf.store.pruned import whole_up_to  # noqa: PLC0415 - a cut short only

        whole_up_to(store, requested, "replay")


def _new_file(target: Path) -> Path:
    """``target``, when replay may write it: it does not exist, its directory does.

    Raises:
        InputError: it exists, or its directory does not.
    """
    if target.exists():
        raise InputError(f"{target} already exists; replay writes a new file")
    if not target.parent.is_dir():
        raise InputError(f"no such directory: {target.parent}")
    return target


def _written(scratch: ScratchFold, last: int, target: Path) -> int:
    """Fold the copied events up to ``last``, index, and move the file to ``target``; its tables.

    Raises:
        ChainError: the copied head is the live head's seq with another event.
        InputError: ``target`` appeared meanwhile.
    """
    connection = scratch.connection
    scratch.install()
    scratch.fold_split(last)
    live = scratch.live_head()
    if scratch.chain.head.seq == live.seq and scratch.chain.head != live:
        raise ChainError(live.seq, "the log's head does not match its last event")
    scratch.index()
    connection.execute("DETACH DATABASE live")
    tables = len(projection_tables(connection, "main"))
    connection.execute("PRAGMA main.journal_mode = WAL")
    connection.close()
    if target.exists():
        raise InputError(f"{target} already exists; replay writes a new file")
    scratch.path.replace(target)
    return tables


def _cut(
    connection: sqlite3.Connection,
    log_seq: int,
    until_seq: int | None,
    until_time: int | None,
    origin: Head,
) -> tuple[int | None, int]:
    """The seq asked for, and the last seq of the last whole batch at or before it.

    A compacted log opens with its ``log.compacted`` event, stamped when the
    prune ran and so later than the kept events after it: the time cut looks
    past it, and the opening is always kept.  A seq at or before the origin
    was compacted away and is refused, naming the backup that holds it.

    Raises:
        InputError: ``until_seq`` lies before the compacted log's opening.
    """
    requested = until_seq
    if origin.seq and requested is not None and requested <= origin.seq:
        row = connection.execute("SELECT body FROM live.events WHERE seq = ?", (origin.seq + 1,))
        opening = open_body(row.fetchone()[0]).event
        backup = opening.backup_path if isinstance(opening, LogCompacted) else "its backup"
        raise InputError(
            f"seq {requested} was compacted away by a prune (this log continues after seq"
            f" {origin.seq}); replay the backup {backup} instead"
        )
    if until_time is not None:
        row = connection.execute(
            "SELECT min(seq) FROM live.events WHERE at > ? AND seq > ?",
            (until_time, origin.seq + 1 if origin.seq else 0),
        )
        after = row.fetchone()[0]
        requested = log_seq if after is None else after - 1
    if requested is None or requested >= log_seq:
        return requested, log_seq
    if requested < 1:
        return requested, 0
    row = connection.execute(
        "SELECT min(seq) FROM live.events WHERE batch ="
        " (SELECT batch FROM live.events WHERE seq = ?)",
        (requested + 1,),
    )
    first = row.fetchone()[0]
    return requested, requested if first is None else min(requested, first - 1)
