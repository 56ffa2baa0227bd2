"""Reading the projections and rows: live or folded to a seq, read-only contexts, row values."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from pwf._sqlite import exact_text
from pwf.commands import Context
from pwf.errors import InputError
from pwf.explain._report import Cause
from pwf.fold.bulk import rebuild_into
from pwf.readmodel import RowReader

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from pwf.commands import Reader, Row
    from pwf.events import Entry
    from pwf.store import EventStore

Progress: TypeAlias = "Callable[[int, int], None]"
"""Told ``(seq folded so far, seq to fold to)``."""

__all__ = ["cause_of", "clock", "context", "missing", "state_at", "values"]


def _read_only(_events: object) -> object:
    raise InputError("explaining never writes")


@contextmanager
def state_at(
    store: EventStore, at_seq: int | None, progress: Progress | None = None
) -> Iterator[tuple[Reader, int]]:
    """The projections to read (live, or folded up to ``at_seq``) and the last seq they hold.

    ``progress(done, total)`` is told every 1 000 events folded.
    """
    with store.snapshot() as live:
        head = store.head().seq
        if at_seq is None:
            yield live, head
            return
        if at_seq > head:
            raise InputError(f"the log ends at seq {head}; there is no seq {at_seq}")
        last = _whole_batches(live, at_seq)
        from pwf.store.pruned import whole_up_to  # noqa: PLC0415 - a past state only

        whole_up_to(store, last, f"explain the state at seq {at_seq} in")
        folded = exact_text(sqlite3.connect(""))  # a private file SQLite deletes on close
        try:
            rebuild_into(folded, _counted(store.entries(1, last), last, progress))
            yield RowReader(folded), last
        finally:
            folded.close()


def _counted(entries: Iterable[Entry], last: int, progress: Progress | None) -> Iterator[Entry]:
    """The entries, telling ``progress`` how many have gone by."""
    for number, entry in enumerate(entries, start=1):
        if progress is not None and number % 1000 == 0:
            progress(entry.seq, last)
        yield entry


def _whole_batches(reader: Reader, at_seq: int) -> int:
    """The last seq of the last batch that ends at or before ``at_seq``.

    A batch is one command's decision; the state in the middle of one never
    existed, so a seq inside a batch explains the state before that batch.
    """
    row = reader.one(
        "SELECT e.batch AS batch, (SELECT batch FROM events WHERE seq = e.seq + 1) AS following"
        " FROM events e WHERE e.seq = ?",
        (at_seq,),
    )
    if row is None or row["batch"] != row["following"]:
        return at_seq
    before = reader.one("SELECT max(seq) AS seq FROM events WHERE batch < ?", (row["batch"],))
    return int((before["seq"] if before is not None else None) or 0)


def clock(store: EventStore, last: int, now: int | None) -> int:
    """The explanation's time: ``now`` if given, else the time of the last seq."""
    if now is not None:
        return now
    row = store.reader().one("SELECT at FROM events WHERE seq = ?", (last,))
    return 0 if row is None else int(row["at"])


def cause_of(entry: Entry) -> Cause | None:
    """The report's form of an entry's cause, if it has one: the members it shows, by name."""
    cause = entry.cause
    return None if cause is None else msgspec.convert(cause, Cause, from_attributes=True)


def values(
    row: Row | None, columns: str, shown_as: Mapping[str, str] | None = None
) -> dict[str, object] | None:
    """Chosen columns of a row as a JSON object; BLOBs as hex.

    ``columns`` names them space-separated, in the object's order; each is
    shown under its camelCase name unless ``shown_as`` gives another.
    """
    if row is None:
        return None
    names = {} if shown_as is None else shown_as
    shown = {names.get(column, _camel(column)): row[column] for column in columns.split()}
    return {
        name: value.hex() if isinstance(value, bytes) else value for name, value in shown.items()
    }


def _camel(column: str) -> str:
    """``status_detail`` -> ``statusDetail``."""
    head, *rest = column.split("_")
    return head + "".join(word.capitalize() for word in rest)


def context(reader: Reader, now: int) -> Context:
    """A read-only command context over ``reader`` at ``now``."""
    return Context(reader, _read_only, now)


def missing(
    store: EventStore, subject: str, subject_id: str, at_seq: int | None, last: int
) -> InputError:
    """The error for a subject that is not in the log up to ``last``, the seq reached.

    When ``at_seq`` fell inside a batch, ``last`` is the end of the batch
    before it, and the message names both.  When a prune removed it, the
    message says which, and where the removed events' bytes are.
    """
    where = "in the log"
    if at_seq is not None:
        where = f"in the log at seq {last}"
        if last != at_seq:
            where += (
                f" (seq {at_seq} is inside a batch, so the log is read up to the batch before it)"
            )
    return InputError(f"no {subject} {subject_id} {where}{_removed(store, subject, subject_id)}")


def _removed(store: EventStore, subject: str, subject_id: str) -> str:
    """What the log's prunes say of a subject not found: a clause of the error, or nothing.

    A ``log.pruned`` names the runs it removed; an interaction went with its
    run, which the log no longer ties it to, so any prune is named then.
    """
    from pwf.store.pruned import prunes  # noqa: PLC0415 - only when a subject is not found

    found = prunes(store)
    if subject == "run":
        for seq, event in found:
            if subject_id in event.removed_run_ids:
                return (
                    f": the log.pruned at seq {seq} removed it; its events' bytes are in the"
                    f" backup {event.backup_path}"
                )
        return ""
    if not found:
        return ""
    seqs = ", ".join(str(seq) for seq, _event in found)
    return f" (the log was pruned at seq {seqs}: a removed run's {subject}s went with it)"
