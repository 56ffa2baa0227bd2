"""``runs_totals``: the run list's aggregates kept as one row of the ``runs`` read model (ADR 0094).

Pure constants: imports nothing of pwf.  HOST §2.8's run list revision sums
every run's revision and its ``total`` counts every queue entry with a run;
HOST §3.1's ``lifecycleContradictions`` counts the run/queue pairs outside
:data:`ALLOWED_LIFECYCLE`.  Asked of the tables, each is a walk of every run;
here SQLite triggers on ``runs`` and ``run_queue`` fold each row's share into
one row as the row is inserted, changed or deleted, so a read is one lookup.
The row is there while either table holds a row (a read of none reads 0).
The triggers are part of the ``runs`` read model's DDL: whatever writes those
tables (the live fold, a rebuild, a replay, a compaction's image) keeps the
row, and ``rebuild(log) == live`` holds for it as for every other row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ALLOWED_LIFECYCLE", "TOTALS_DDL", "TOTALS_FILL", "allowed_pair"]

ALLOWED_LIFECYCLE: Final = {
    "queued": ("queued",),
    "running": ("starting", "running", "parked"),
    "waiting": ("parked",),
    "completed": ("done",),
    "failed": ("failed",),
    "timed_out": ("failed",),
    "cancelled": ("cancelled",),
}
"""Run status -> the queue statuses allowed with it (HOST §3.1 ``lifecycleContradictions``)."""


def allowed_pair(run: str, queue: str) -> str:
    """SQL true when ``run``'s status and ``queue``'s are a pair of :data:`ALLOWED_LIFECYCLE`."""
    cases = " ".join(
        f"WHEN '{status}' THEN {queue} IN ({', '.join(repr(q) for q in allowed)})"
        for status, allowed in ALLOWED_LIFECYCLE.items()
    )
    return f"CASE {run} {cases} ELSE 0 END"


_COLUMNS: Final = ("queue_rows", "listed", "revisions", "contradictions")

_TABLE: Final = """CREATE TABLE IF NOT EXISTS runs_totals (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  queue_rows INTEGER NOT NULL CHECK (queue_rows >= 0),
  listed INTEGER NOT NULL CHECK (listed >= 0),
  revisions INTEGER NOT NULL CHECK (revisions >= 0),
  contradictions INTEGER NOT NULL CHECK (contradictions >= 0)
) STRICT"""


def _outside(run: str, queue: str) -> str:
    """SQL 1 when the pair is outside :data:`ALLOWED_LIFECYCLE`, else 0."""
    return f"(NOT ({allowed_pair(run, queue)}))"


def _run_share(row: str) -> tuple[str, str, str, str]:
    """What a ``runs`` row adds: listed if it has a queue entry, its revision, its pair."""
    return (
        "0",
        f"(SELECT count(*) FROM run_queue WHERE run_id = {row}.run_id)",  # noqa: S608 - constants
        f"{row}.revision",
        (
            f"(SELECT count(*) FROM run_queue q WHERE q.run_id = {row}.run_id"  # noqa: S608 - constants
            f" AND {_outside(f'{row}.status', 'q.status')})"
        ),
    )


def _queue_share(row: str) -> tuple[str, str, str, str]:
    """What a ``run_queue`` row adds: one entry, listed if it has a run, its pair."""
    return (
        "1",
        f"(SELECT count(*) FROM runs WHERE run_id = {row}.run_id)",  # noqa: S608 - constants
        "0",
        (
            f"(SELECT count(*) FROM runs r WHERE r.run_id = {row}.run_id"  # noqa: S608 - constants
            f" AND {_outside('r.status', f'{row}.status')})"
        ),
    )


def _trigger(name: str, when: str, *statements: str) -> str:
    body = "".join(f"  {statement};\n" for statement in statements)
    return f"CREATE TRIGGER IF NOT EXISTS {name} {when} BEGIN\n{body}END"


def _added(shares: tuple[str, ...]) -> str:
    """The update adding ``shares`` to the row's columns, in order."""
    added = ", ".join(f"{c} = {c} + {share}" for c, share in zip(_COLUMNS, shares, strict=True))
    return f"UPDATE runs_totals SET {added} WHERE id = 1"  # noqa: S608 - constants


_FIRST: Final = "INSERT OR IGNORE INTO runs_totals VALUES (1, 0, 0, 0, 0)"
"""The row, made by the first insert: a change or delete of a row comes after its insert."""
_EMPTIED: Final = "DELETE FROM runs_totals WHERE queue_rows = 0 AND revisions = 0"
"""No queue entry and no run left (every run has a revision of at least 1): no row, as a fold
of a log without runs leaves none."""


def _triggers(table: str, share: Callable[[str], tuple[str, ...]]) -> tuple[str, ...]:
    """Insert adds NEW's share, delete takes OLD's, a new ``run_id`` does both."""
    new, old = share("NEW"), share("OLD")
    return (
        _trigger(f"{table}_totals_insert", f"AFTER INSERT ON {table}", _FIRST, _added(new)),
        _trigger(
            f"{table}_totals_delete",
            f"AFTER DELETE ON {table}",
            _added(tuple(f"-{share}" for share in old)),
            _EMPTIED,
        ),
        _trigger(
            f"{table}_totals_rekey",
            f"AFTER UPDATE OF run_id ON {table} WHEN NEW.run_id IS NOT OLD.run_id",
            _added(tuple(f"{n} - {o}" for n, o in zip(new, old, strict=True))),
        ),
    )


def _moved(run_new: str, run_old: str, queue_new: str, queue_old: str) -> str:
    """How a pair's count of contradictions moves when one side's status changes."""
    return f"{_outside(run_new, queue_new)} - {_outside(run_old, queue_old)}"


_SAME_KEY: Final = "NEW.run_id IS OLD.run_id"

TOTALS_DDL: Final = (
    _TABLE,
    *_triggers("runs", _run_share),
    # The changes of every run event, each one update: its status (with its revision) moves
    # its pair's contradiction, its revision alone the sum.
    _trigger(
        "runs_totals_status",
        f"AFTER UPDATE OF status ON runs WHEN {_SAME_KEY} AND NEW.status IS NOT OLD.status",
        "UPDATE runs_totals SET revisions = revisions + NEW.revision - OLD.revision,"  # noqa: S608 - constants
        " contradictions = contradictions + coalesce((SELECT"
        f" {_moved('NEW.status', 'OLD.status', 'q.status', 'q.status')}"
        " FROM run_queue q WHERE q.run_id = NEW.run_id), 0) WHERE id = 1",
    ),
    _trigger(
        "runs_totals_revision",
        f"AFTER UPDATE OF revision ON runs WHEN {_SAME_KEY} AND NEW.status IS OLD.status",
        "UPDATE runs_totals SET revisions = revisions + NEW.revision - OLD.revision WHERE id = 1",
    ),
    *_triggers("run_queue", _queue_share),
    _trigger(
        "run_queue_totals_status",
        f"AFTER UPDATE OF status ON run_queue WHEN {_SAME_KEY} AND NEW.status IS NOT OLD.status",
        "UPDATE runs_totals SET contradictions = contradictions + coalesce((SELECT"  # noqa: S608 - constants
        f" {_moved('r.status', 'r.status', 'NEW.status', 'OLD.status')}"
        " FROM runs r WHERE r.run_id = NEW.run_id), 0) WHERE id = 1",
    ),
)
"""The table and its triggers, after ``runs`` and ``run_queue`` in the ``runs`` DDL."""

TOTALS_FILL: Final = (
    "DELETE FROM runs_totals",
    (
        "INSERT INTO runs_totals (id, queue_rows, listed, revisions, contradictions) SELECT 1,"  # noqa: S608 - constants
        " (SELECT count(*) FROM run_queue),"
        " (SELECT count(*) FROM runs r JOIN run_queue q ON q.run_id = r.run_id),"
        " (SELECT coalesce(sum(revision), 0) FROM runs),"
        " (SELECT count(*) FROM runs r JOIN run_queue q ON q.run_id = r.run_id"
        f" WHERE {_outside('r.status', 'q.status')})"
        " WHERE EXISTS (SELECT 1 FROM runs) OR EXISTS (SELECT 1 FROM run_queue)"
    ),
)
"""The row the triggers keep, made again from the tables at once: what a fold that creates the
triggers after the rows (a bulk fold, ADR 0013) runs first.  Every run and queue entry's share
summed, as the triggers sum them one by one; no row when both tables are empty."""
