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

__all__ = ["ALLOWED_LIFECYCLE", "TOTALS_DDL", "allowed_pair"]

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
_KEYED: Final = ("run_id", "status")
"""The columns of both tables a row's share depends on, but for the revision."""

_TABLE: Final = """CREATE TABLE IF NOT EXISTS runs_totals (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  queue_rows INTEGER NOT NULL CHECK (queue_rows >= 0),
  listed INTEGER NOT NULL CHECK (listed >= 0),
  revisions INTEGER NOT NULL CHECK (revisions >= 0),
  contradictions INTEGER NOT NULL CHECK (contradictions >= 0)
) STRICT"""


def _run_share(row: str) -> tuple[str, str, str, str]:
    """What a ``runs`` row adds: listed if it has a queue entry, its revision, its pair."""
    return (
        "0",
        f"(SELECT count(*) FROM run_queue WHERE run_id = {row}.run_id)",  # noqa: S608 - constants
        f"{row}.revision",
        (
            f"(SELECT count(*) FROM run_queue q WHERE q.run_id = {row}.run_id"  # noqa: S608 - constants
            f" AND NOT ({allowed_pair(f'{row}.status', 'q.status')}))"
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
            f" AND NOT ({allowed_pair('r.status', f'{row}.status')}))"
        ),
    )


def _fold(name: str, when: str, shares: tuple[str, ...], *, gone: bool = False) -> str:
    """A trigger adding ``shares`` to the row, made first if there is none.

    With ``gone`` (a deleted row) the row goes when no queue entry and no run
    is left (every run has a revision of at least 1): a read model without
    runs has no row, as a fold of a log without runs leaves none.
    """
    added = ", ".join(f"{c} = {c} + {share}" for c, share in zip(_COLUMNS, shares, strict=True))
    emptied = "  DELETE FROM runs_totals WHERE queue_rows = 0 AND revisions = 0;\n" if gone else ""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} {when} BEGIN\n"  # noqa: S608 - constants
        "  INSERT OR IGNORE INTO runs_totals VALUES (1, 0, 0, 0, 0);\n"
        f"  UPDATE runs_totals SET {added} WHERE id = 1;\n{emptied}"
        "END"
    )


def _triggers(table: str, share: Callable[[str], tuple[str, ...]]) -> tuple[str, ...]:
    """Insert adds NEW's share, delete takes OLD's, a change of its key or status does both."""
    new, old = share("NEW"), share("OLD")
    columns = ", ".join(_KEYED)
    differs = " OR ".join(f"NEW.{column} IS NOT OLD.{column}" for column in _KEYED)
    return (
        _fold(f"{table}_totals_insert", f"AFTER INSERT ON {table}", new),
        _fold(
            f"{table}_totals_delete",
            f"AFTER DELETE ON {table}",
            tuple(f"-{share}" for share in old),
            gone=True,
        ),
        _fold(
            f"{table}_totals_update",
            f"AFTER UPDATE OF {columns} ON {table} WHEN {differs}",
            tuple(f"{n} - {o}" for n, o in zip(new, old, strict=True)),
        ),
    )


TOTALS_DDL: Final = (
    _TABLE,
    *_triggers("runs", _run_share),
    # A revision alone is the change of nearly every run event: one addition, no lookups.
    """CREATE TRIGGER IF NOT EXISTS runs_totals_revision AFTER UPDATE OF revision ON runs
  WHEN NEW.run_id IS OLD.run_id AND NEW.status IS OLD.status BEGIN
  UPDATE runs_totals SET revisions = revisions + NEW.revision - OLD.revision WHERE id = 1;
END""",
    *_triggers("run_queue", _queue_share),
)
"""The table and its triggers, after ``runs`` and ``run_queue`` in the ``runs`` DDL."""
