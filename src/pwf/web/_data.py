"""What each page shows, read from one view: the explain reports, projection rows and events.

The overview is ``pwf status``'s (:func:`pwf.status.overview`), the
diagnosis and timelines are :func:`pwf.explain.explain_interaction` and
:func:`pwf.explain.explain_run`; this module only gathers them with the rows
around them (blobs, lineage, workers, events) for the templates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pwf.events import CommandRecorded, DeadlineShifted, RunPaused, RunResumed, open_body
from pwf.explain import explain_interaction, explain_run
from pwf.status import overview

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pwf.commands import Row
    from pwf.store import EventStore
    from pwf.web._source import View

__all__ = [
    "PAGE",
    "EventRow",
    "interaction_page",
    "log_page",
    "overview_page",
    "run_page",
    "runs_page",
]

PAGE: Final = 50
"""Rows on one page of the runs list and of the log."""
RUN_STATUSES: Final = (
    "queued",
    "running",
    "waiting",
    "completed",
    "failed",
    "timed_out",
    "cancelled",
)


def _rows(store: EventStore, sql: str, *params: object) -> list[Row]:
    return store.reader().all(sql, params)


def _one(store: EventStore, sql: str, *params: object) -> Row | None:
    return store.reader().one(sql, params)


def _blob(store: EventStore, digest: bytes | None) -> str | None:
    """A stored value as text (JSON or plain), or None when there is none."""
    if digest is None:
        return None
    row = _one(store, "SELECT content FROM blobs WHERE blob_hash = ?", digest)
    if row is None:
        return f"(blob {digest.hex()} is not stored)"
    return bytes(row["content"]).decode("utf-8", "backslashreplace")


# --------------------------------------------------------------------------- overview


_TOTALS: Final = (
    "SELECT count(*) AS runs, (SELECT count(*) FROM interactive_requests) AS requests,"
    " (SELECT coalesce(max(seq), 0) FROM events) - (SELECT coalesce(min(seq) - 1, 0) FROM events)"
    " AS events FROM runs"
)
"""The overview's totals.  A log's seqs follow without a gap (its chain, ``pwf log verify``),
so its first and last seq count its events: two lookups, where a count walked every event."""


def overview_page(view: View, now: int | None) -> dict[str, Any]:
    """``pwf status``: counts, the open runs and interactions with their diagnosis, since when.

    "Now" is ``now`` when the page's ``?now=`` gives it; else, live, the wall
    clock, as ``pwf status`` takes it; as of an earlier seq, that seq's time,
    as ``pwf explain --at`` takes it (ADR 0079).
    """
    store = view.store
    clock = "given"
    if now is None and view.at is None:
        now, clock = time.time_ns() // 1_000_000, "wall"
    elif now is None:
        row = _one(store, "SELECT at FROM events WHERE seq = ?", view.seq)
        now, clock = (0 if row is None else int(row["at"])), "seq"
    found = overview(store, now)
    totals = _one(store, _TOTALS)
    return {
        "overview": found,
        "waiting": [*found.interactions, *found.runs],
        "totals": totals,
        "now": found.now,
        "clock": clock,
    }


# --------------------------------------------------------------------------- runs


def runs_page(view: View, status: str | None, session: str | None, page: int) -> dict[str, Any]:
    """One page of runs, newest first, filtered by status and origin session."""
    where, params = [], []
    if status:
        where.append("r.status = ?")
        params.append(status)
    if session:
        where.append("r.origin_session_id = ?")
        params.append(session)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    store = view.store
    total_row = _one(store, f"SELECT count(*) AS n FROM runs r{clause}", *params)  # noqa: S608 - fixed fragments
    total = 0 if total_row is None else int(total_row["n"])
    rows = _rows(
        store,
        "SELECT r.run_id, r.status, r.paused, r.workflow_name, r.origin_session_id,"  # noqa: S608 - fixed fragments
        " r.created_at, r.updated_at, r.finished_at, r.lineage_kind, q.status AS queue_status"
        f" FROM runs r LEFT JOIN run_queue q ON q.run_id = r.run_id{clause}"
        " ORDER BY r.created_at DESC, r.run_id DESC LIMIT ? OFFSET ?",
        *params,
        PAGE,
        (page - 1) * PAGE,
    )
    pages = max(1, -(-total // PAGE))
    return {
        "runs": rows,
        "total": total,
        "page": page,
        "pages": pages,
        "status": status or "",
        "session": session or "",
        "statuses": RUN_STATUSES,
    }


# --------------------------------------------------------------------------- one run


def run_page(view: View, run_id: str) -> dict[str, Any]:
    """``pwf explain run`` with the run's values, lineage and workers.

    Raises:
        InputError: the run is not in the log (up to the view's seq).
    """
    store = view.store
    explanation = explain_run(store, run_id)
    run = _one(store, "SELECT * FROM runs WHERE run_id = ?", run_id)
    assert run is not None
    lineage = {
        "parent": run["parent_run_id"],
        "root": run["root_run_id"],
        "kind": run["lineage_kind"],
        "restartNumber": run["restart_number"],
        "children": _rows(
            store,
            "SELECT run_id, lineage_kind, status FROM runs WHERE parent_run_id = ?"
            " ORDER BY created_at, run_id",
            run_id,
        ),
    }
    workers = _rows(
        store,
        "SELECT worker_epoch, generation, status, started_at, ready_at, finished_at, exit_code"
        " FROM run_workers WHERE run_id = ? ORDER BY generation",
        run_id,
    )
    values = {
        "input": _blob(store, run["input_hash"]),
        "final output": _blob(store, run["final_output_hash"]),
        "error": _blob(store, run["error_hash"]),
    }
    return {
        "explanation": explanation,
        "run": run,
        "lineage": lineage,
        "workers": workers,
        "values": {name: text for name, text in values.items() if text is not None},
    }


# --------------------------------------------------------------------------- one interaction


@dataclass(frozen=True)
class Shift:
    """One ``attempt.deadline_shifted`` where the log holds it: its seq, its time and the event.

    The event says by how much, from where to where, and why.
    """

    seq: int
    at: int
    event: DeadlineShifted


@dataclass(frozen=True)
class Pause:
    """One pause of the interaction's run: from ``run.paused`` to ``run.resumed`` (or open)."""

    start: int
    end: int | None


def interaction_page(view: View, request_id: str) -> dict[str, Any]:
    """``pwf explain interaction`` with its prompt, deadline shifts and pauses.

    Raises:
        InputError: the interaction is not in the log (up to the view's seq).
    """
    store = view.store
    explanation = explain_interaction(store, request_id)
    request = _one(store, "SELECT * FROM interactive_requests WHERE request_id = ?", request_id)
    assert request is not None
    attempt = _one(store, "SELECT * FROM node_attempts WHERE attempt_id = ?", request["attempt_id"])
    shifts, pauses = _deadline_history(store, request["run_id"], request["attempt_id"])
    payloads = {
        row["submission_id"]: _blob(store, row["payload_hash"])
        for row in _rows(
            store,
            "SELECT submission_id, payload_hash FROM interactive_submissions WHERE request_id = ?",
            request_id,
        )
    }
    return {
        "explanation": explanation,
        "request": request,
        "attempt": attempt,
        "contract": _blob(store, request["contract_hash"]),
        "shifts": shifts,
        "pauses": pauses,
        "payloads": payloads,
        "budget": _budget(attempt, shifts),
    }


def _budget(attempt: Row | None, shifts: list[Shift]) -> dict[str, int] | None:
    """Why the deadline is where it is: first start + active-time budget + idle credited."""
    if attempt is None or attempt["deadline_at"] is None or attempt["started_at"] is None:
        return None
    idle = sum(shift.event.idle_ms for shift in shifts)
    first_start = int(attempt["started_at"]) - idle
    first_deadline = int(attempt["deadline_at"]) - idle
    return {
        "firstStart": first_start,
        "budget": first_deadline - first_start,
        "idle": idle,
        "shifts": len(shifts),
        "deadline": int(attempt["deadline_at"]),
    }


def _deadline_history(
    store: EventStore, run_id: str, attempt_id: str
) -> tuple[list[Shift], list[Pause]]:
    shifts: list[Shift] = []
    pauses: list[Pause] = []
    for stored in store.find(run_id=run_id):
        entry = open_body(stored.body)
        event = entry.event
        if isinstance(event, DeadlineShifted) and event.attempt_id == attempt_id:
            shifts.append(Shift(entry.seq, entry.at, event))
        elif isinstance(event, RunPaused):
            pauses.append(Pause(start=entry.at, end=None))
        elif isinstance(event, RunResumed) and pauses and pauses[-1].end is None:
            pauses[-1] = Pause(start=pauses[-1].start, end=entry.at)
    return shifts, pauses


# --------------------------------------------------------------------------- log


@dataclass(frozen=True)
class EventRow:
    """One stored event: its columns, its canonical bytes, and what it links to."""

    seq: int
    batch: int
    type: str
    at: int
    run_id: str | None
    session_id: str | None
    request_id: str | None
    body: str
    run_link: str | None
    interaction_link: str | None


_FILTERS: Final = {
    "type": "type",
    "run": "run_id",
    "session": "session_id",
    "request": "request_id",
}


def log_page(
    view: View, filters: dict[str, str], start: int | None, end: int | None
) -> dict[str, Any]:
    """A page of events, newest first, filtered on the indexed columns.

    ``start`` (``?from=``): the page of the oldest events at or after it;
    ``end`` (``?to=``): the page of the newest at or before it; neither: the
    newest page.  ``newer`` and ``older`` are the pages either side, or None.
    """
    store = view.store
    where: list[str] = []
    params: list[object] = []
    for name, column in _FILTERS.items():
        if filters.get(name):
            where.append(f"{column} = ?")
            params.append(filters[name])
    if start is not None:
        bound, order = "seq >= ?", "ORDER BY seq LIMIT ?"
        limit: tuple[object, ...] = (start, PAGE)
    else:
        bound, order = "seq <= ?", "ORDER BY seq DESC LIMIT ?"
        limit = (view.seq if end is None else end, PAGE)
    clause = " AND ".join([*where, bound])
    _, rows = store.reader().table(
        f"{_LOG_SELECT} WHERE {clause} {order}",
        (*params, *limit),
    )
    rows = sorted(rows, key=lambda row: -row[0])
    newer, older = _neighbours(store, where, params, rows)
    return {
        "events": _event_rows(store, rows),
        "filters": {name: filters.get(name, "") for name in _FILTERS},
        "start": start or "",
        "newer": newer,
        "older": older,
    }


_LOG_SELECT: Final = "SELECT seq, batch, type, at, run_id, session_id, request_id, body FROM events"


def _neighbours(
    store: EventStore, where: list[str], params: list[object], rows: Sequence[Any]
) -> tuple[int | None, int | None]:
    """Where the newer and the older page start, when either has an event."""
    if not rows:
        return None, None
    past = " AND ".join([*where, "seq > ?"])
    newer = rows[0][0] + 1 if _any(store, past, (*params, rows[0][0])) else None
    before = " AND ".join([*where, "seq < ?"])
    older = rows[-1][0] - 1 if _any(store, before, (*params, rows[-1][0])) else None
    return newer, older


def _event_rows(store: EventStore, rows: Sequence[Any]) -> list[EventRow]:
    """The page's rows, linked to the runs and interactions the read model knows."""
    runs = _known(store, "runs", "run_id", {row[4] for row in rows if row[4]})
    entries = [(row, open_body(row[7])) for row in rows]
    requests = {
        target for _, entry in entries if (target := _interaction_of(entry.event)) is not None
    }
    interactions = _known(store, "interactive_requests", "request_id", requests)
    return [
        EventRow(
            seq=row[0],
            batch=row[1],
            type=row[2],
            at=row[3],
            run_id=row[4],
            session_id=row[5],
            request_id=row[6],
            body=bytes(row[7]).decode("utf-8", "backslashreplace"),
            run_link=row[4] if row[4] in runs else None,
            interaction_link=target
            if (target := _interaction_of(entry.event)) in interactions
            else None,
        )
        for row, entry in entries
    ]


def _any(store: EventStore, where: str, params: tuple[object, ...]) -> bool:
    """Whether an event matches ``where`` (on indexed columns and seq)."""
    found = _one(store, f"SELECT 1 AS found FROM events WHERE {where} LIMIT 1", *params)  # noqa: S608 - fixed fragments
    return found is not None


def _interaction_of(event: object) -> str | None:
    """The interactive request an event is about (a command's request id is the client's)."""
    if isinstance(event, CommandRecorded):
        return None
    found = getattr(event, "request_id", None)
    return found if isinstance(found, str) else None


def _known(store: EventStore, table: str, column: str, ids: set[str]) -> set[str]:
    if not ids:
        return set()
    marks = ", ".join("?" * len(ids))
    _, rows = store.reader().table(
        f"SELECT {column} FROM {table} WHERE {column} IN ({marks})",  # noqa: S608 - names are constants
        tuple(ids),
    )
    return {row[0] for row in rows}
