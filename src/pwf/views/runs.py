"""The run view and the run list page (HOST §2.8, §2.14).

Read through a command :class:`~pwf.commands.Context` (its reader and
``now``); nothing here writes.  Whether a run has a live worker is a fact of
the process that supervises workers, so it comes in as ``live``: the served
host passes its active set, direct mode a worker row that is starting or
running under an unexpired lease.  Members that describe what pwf does not
hold (workflow graphs, traces, settings scopes, the Pi session capture) are
present with their empty values (docs/served-views.md).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final, NamedTuple

from pwf import canonical
from pwf.commands.runs import TERMINAL, source_of
from pwf.commands.views import stored_json, view_text, view_value
from pwf.views._paging import PAGE_ITEMS, Window, centred_page, forward_page, page_start

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context, Row

__all__ = [
    "LIST_SCHEMA",
    "RUN_VIEW_SCHEMA",
    "direct_live",
    "display",
    "list_page",
    "list_revision",
    "list_total",
    "page_size",
    "reason_texts",
    "run_view",
]

RUN_VIEW_SCHEMA: Final = "pi-workflows.run-view.v1"
LIST_SCHEMA: Final = "pi-workflows.run-list-page.v1"
MANIFEST_SCHEMA: Final = "pi-workflows.run-manifest.v1"
TRACE_SCHEMA: Final = "pi-workflows.trace-event.v1"
INLINE_REASON_BYTES: Final = 16 * 1024


def _exists(ctx: Context, sql: str, *params: object) -> bool:
    return ctx.one(sql, *params) is not None


def direct_live(ctx: Context, run_id: str) -> bool:
    """Direct mode's liveness: a worker row starting or running under an unexpired lease."""
    return _exists(
        ctx,
        "SELECT 1 FROM run_workers w JOIN run_queue q ON q.run_id = w.run_id"
        " WHERE w.run_id = ? AND w.status IN ('starting', 'running')"
        " AND q.owner_worker_epoch = w.worker_epoch AND q.lease_expires_at > ?",
        run_id,
        ctx.now,
    )


# ------------------------------------------------------------------ display


def _origin_turn(ctx: Context, run_id: str) -> bool:
    # The run's own turns lead (workflow_turns_run_idx); ``+m.kind`` keeps SQLite from
    # driving the join from every step message by kind instead (ADR 0077).
    return _exists(
        ctx,
        "SELECT 1 FROM workflow_turns t JOIN workflow_messages m"
        " ON m.workflow_message_id = t.workflow_message_id"
        " WHERE t.run_id = ? AND t.state = 'started' AND +m.kind IN ('step', 'terminal')",
        run_id,
    )


def _pending(ctx: Context, run_id: str) -> bool:
    return _exists(
        ctx, "SELECT 1 FROM interactive_requests WHERE run_id = ? AND status = 'pending'", run_id
    )


def _error_text(ctx: Context, run: Row, queue: Row) -> str | None:
    error = stored_json(ctx, run["error_hash"])
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    message = queue["error_message"]
    return None if message is None else str(message)


def _run_and_queue(ctx: Context, run_id: str) -> tuple[Row, Row] | None:
    """The run's row and its queue entry's, or None when pwf lacks either."""
    run = ctx.one("SELECT * FROM runs WHERE run_id = ?", run_id)
    queue = ctx.one("SELECT * FROM run_queue WHERE run_id = ?", run_id)
    return None if run is None or queue is None else (run, queue)


def reason_texts(ctx: Context, run_id: str) -> list[str]:
    """The failure reasons a run view may show whole as ``reasonContent`` (over 16 KiB)."""
    found_rows = _run_and_queue(ctx, run_id)
    if found_rows is None:
        return []
    run, queue = found_rows
    found = [_error_text(ctx, run, queue), queue["error_message"]]
    return [
        str(text)
        for text in found
        if isinstance(text, str) and len(text.encode()) > INLINE_REASON_BYTES
    ]


def _status(  # noqa: PLR0911 - one return per rule of §2.14, in order
    ctx: Context, run: Row, queue: Row, *, live: bool
) -> tuple[str, str | None, str | None]:
    """(status, activity, reason) by the first rule of §2.14 that holds.

    pwf records no external effects, so the ``ambiguous`` rule never holds.
    """
    durable, queued = run["status"], queue["status"]
    if live or _origin_turn(ctx, run["run_id"]):
        return "running", "supervised_worker" if live else "origin_turn", None
    if durable in TERMINAL:
        return durable, None, _error_text(ctx, run, queue)
    if run["paused"]:
        return "paused", None, "The workflow is durably paused."
    if durable == "waiting" or _pending(ctx, run["run_id"]):
        return "waiting", None, "The workflow is waiting for origin-session input."
    if queued in ("parked", "queued"):
        return "queued", None, "The workflow is ready to resume." if queued == "parked" else None
    if queued == "done":
        return "completed", None, None
    if queued in ("failed", "cancelled"):
        return queued, None, queue["error_message"]
    return "running", None, None


def _controls(status: str, queued: str) -> list[str]:
    controls: list[str] = []
    if status in ("running", "waiting"):
        controls += ["pause", "cancel"]
    elif status == "paused":
        controls += ["resume", "cancel"]
    elif status == "queued":
        controls += ["resume", "cancel"] if queued == "parked" else ["cancel"]
    if status == "waiting":
        controls.append("answer")
    return controls


def display(ctx: Context, run: Row, queue: Row, *, live: bool) -> dict[str, object]:
    """``{status, activity, controls, reason}``; a reason over 16 KiB becomes content."""
    status, activity, reason = _status(ctx, run, queue, live=live)
    shown: dict[str, object] = {
        "activity": activity,
        "controls": _controls(status, queue["status"]),
        "reason": reason,
        "status": status,
    }
    if reason is not None and len(reason.encode()) > INLINE_REASON_BYTES:
        shown["reason"] = "Complete workflow failure details are available."
        shown["reasonContent"] = _reason_reference(reason)
    return shown


def _reason_reference(reason: str) -> dict[str, object]:
    data = reason.encode()
    digest = hashlib.sha256(data).hexdigest()
    return {
        "$artifact": {
            "bytes": len(data),
            "mediaType": "text/plain",
            "opaque": True,
            "path": f"artifacts/sha256/{digest}.txt",
            "sha256": digest,
        }
    }


# ------------------------------------------------------------------ manifest and queue


def _source_root(ctx: Context, run: Row) -> object:
    """The root source identity of the run's ``{root, mounted}`` (text for older runs)."""
    source = source_of(ctx, run)
    return source["root"] if isinstance(source, dict) and "root" in source else source


def _started_at(ctx: Context, run: Row) -> int:
    first = ctx.value("SELECT min(started_at) FROM run_workers WHERE run_id = ?", run["run_id"])
    return int(first) if first is not None else int(run["created_at"])


def manifest(ctx: Context, run: Row, status: str) -> dict[str, object]:
    """``pi-workflows.run-manifest.v1``; ``finishedAt`` only once the run finished."""
    shown: dict[str, object] = {
        "paths": {"state": "host", "trace": "host", "workflow": "host"},
        "runId": run["run_id"],
        "schema": MANIFEST_SCHEMA,
        "startedAt": _started_at(ctx, run),
        "status": status,
        "traceSchema": TRACE_SCHEMA,
        "workflowName": run["workflow_name"],
        "workflowSource": _source_root(ctx, run),
    }
    if run["finished_at"] is not None:
        shown["finishedAt"] = run["finished_at"]
    return shown


def _queue_view(ctx: Context, run: Row, queue: Row) -> dict[str, object]:
    fingerprint = run["parent_terminal_fingerprint"]
    return {
        "createdAt": queue["created_at"],
        "definitionDigest": run["definition_digest"],
        "errorCode": queue["error_code"],
        "executionMode": run["execution_mode"],
        "finishedAt": run["finished_at"],
        "initialized": queue["generation"] > 0,
        "lineageKind": run["lineage_kind"],
        "originSessionId": run["origin_session_id"],
        "parentRunId": run["parent_run_id"],
        "parentTerminalFingerprint": None if fingerprint is None else bytes(fingerprint).hex(),
        "restartNumber": run["restart_number"],
        "rootRunId": run["root_run_id"],
        "runId": run["run_id"],
        "startedAt": _started_at(ctx, run) if queue["generation"] > 0 else None,
        "status": queue["status"],
        "updatedAt": queue["updated_at"],
        "workflowName": run["workflow_name"],
        "workflowSourceRef": run["workflow_ref"],
    }


# ------------------------------------------------------------------ the run list


_TOTALS: Final = "SELECT {} FROM runs_totals WHERE id = 1"
"""A column of the ``runs`` read model's kept totals (ADR 0094); no row while there is no run."""

_REVISION: Final = (
    "SELECT coalesce((" + _TOTALS.format("queue_rows") + "), 0) AS count,"  # noqa: S608 - constants
    " coalesce((" + _TOTALS.format("revisions") + "), 0) AS revisions,"
    " (SELECT coalesce(max(updated_at), 0) FROM run_queue) AS queued,"
    " (SELECT coalesce(max(updated_at), 0) FROM workflow_messages) AS messages,"
    " (SELECT coalesce(max(coalesce(ended_at, started_at)), 0) FROM workflow_turns) AS turns"
)
"""Each part one lookup: the kept totals by key, each latest time by its index (ADR 0094)."""


def list_revision(ctx: Context) -> str:
    """``count:revisions:queue updated:message updated:turn time``, as §2.8 spells it.

    The count of queue entries and the sum of the runs' revisions are the
    kept totals of the ``runs`` read model, so the revision costs the same
    whatever the number of runs (ADR 0094).
    """
    row = ctx.one(_REVISION)
    assert row is not None
    return f"{row['count']}:{row['revisions']}:{row['queued']}:{row['messages']}:{row['turns']}"


def list_total(ctx: Context) -> int:
    """How many queue entries have a run: the run list page's ``total`` (kept, ADR 0094)."""
    return int(ctx.value(_TOTALS.format("listed")) or 0)


def page_size(limit: int | None) -> int:
    """How many items a run list page asked with ``limit`` may hold (§2.8: at most 256)."""
    return min(limit or PAGE_ITEMS, PAGE_ITEMS)


def list_page(
    ctx: Context,
    cursor: int = 0,
    limit: int | None = None,
    live: Callable[[Context, str], bool] = direct_live,
) -> dict[str, object]:
    """``pi-workflows.run-list-page.v1`` at ``cursor``: newest queue entries first, byte-cut."""
    size = page_size(limit)
    rows = ctx.all(
        "SELECT q.run_id FROM run_queue q JOIN runs r ON r.run_id = q.run_id"
        " ORDER BY q.created_at DESC, q.run_id DESC LIMIT ? OFFSET ?",
        size,
        cursor,
    )
    return {
        "items": forward_page([row["run_id"] for row in rows], lambda i: _summary(ctx, i, live)),
        "revision": list_revision(ctx),
        "schema": LIST_SCHEMA,
        "start": cursor,
        "total": list_total(ctx),
    }


def _shown(
    ctx: Context, run: Row, queue: Row, live: Callable[[Context, str], bool]
) -> dict[str, object]:
    """The members a run list item and a run view share: display, liveness, manifest."""
    shown = display(ctx, run, queue, live=live(ctx, run["run_id"]))
    status = str(shown["status"])
    return {
        "display": shown,
        "live": status in ("running", "waiting"),
        "manifest": manifest(ctx, run, status),
        "possiblyInterrupted": queue["status"] == "parked" and status != "paused",
        "runId": run["run_id"],
    }


def _summary(ctx: Context, run_id: str, live: Callable[[Context, str], bool]) -> dict[str, object]:
    found = _run_and_queue(ctx, run_id)
    assert found is not None
    run, queue = found
    return {
        **_shown(ctx, run, queue, live),
        "createdAt": queue["created_at"],
        "originSessionId": run["origin_session_id"],
        "updatedAt": queue["updated_at"],
        "workflowName": run["workflow_name"],
    }


# ------------------------------------------------------------------ the run view


def _steps(ctx: Context, run_id: str) -> list[Row]:
    return ctx.all(
        "SELECT * FROM node_attempts WHERE run_id = ? ORDER BY created_at, attempt_id", run_id
    )


_STEP: Final = {
    "attemptId": "attempt_id",
    "attemptNumber": "attempt_number",
    "deadlineAt": "deadline_at",
    "nodeId": "node_id",
    "outcome": "status",
    "startedAt": "started_at",
    "updatedAt": "updated_at",
}
_UPDATE: Final = {
    "attemptId": "attempt_id",
    "createdAt": "created_at",
    "requestId": "request_id",
    "sequence": "sequence",
}
_FOLLOW_UP: Final = {
    "createdAt": "created_at",
    "followUpId": "follow_up_id",
    "orderNumber": "order_number",
    "requestId": "request_id",
    "sourceType": "source_type",
    "status": "status",
}
"""Each history item's members and the columns of its row they show."""


def _members(row: Row, columns: dict[str, str]) -> dict[str, object]:
    return {member: row[column] for member, column in columns.items()}


def _step(ctx: Context, row: Row) -> dict[str, object]:
    return {**_members(row, _STEP), "output": view_value(ctx, row["output_hash"])}


def _update(ctx: Context, row: Row) -> dict[str, object]:
    return {**_members(row, _UPDATE), "data": view_value(ctx, row["update_hash"])}


def _follow_up(ctx: Context, row: Row) -> dict[str, object]:
    return {**_members(row, _FOLLOW_UP), "prompt": view_text(ctx, row["prompt_hash"])}


EMPTY_WINDOW: Final = {"items": [], "start": 0, "total": 0}


def _absent() -> dict[str, object]:
    """Members describing what pwf does not hold, with their empty values (docs/served-views.md)."""
    return {
        "graphHistory": {"steps": [], "transitions": []},
        "graphStepStart": 0,
        "graphStepTotal": 0,
        "graphSteps": [],
        "session": {
            "binding": None,
            "capture": None,
            "entryPage": dict(EMPTY_WINDOW),
            "eventPage": dict(EMPTY_WINDOW),
            "integrity": None,
            "replayCheckpoint": None,
        },
        "settingsScopes": [],
        "settingsStart": 0,
        "settingsTotal": 0,
        "takenTransitionStart": 0,
        "takenTransitionTotal": 0,
        "takenTransitions": [],
        "tracePage": dict(EMPTY_WINDOW),
    }


class _Windows(NamedTuple):
    """A run view's windows of its steps, updates and follow-ups, and its graph cursor."""

    steps: Window
    updates: Window
    follow_ups: Window
    graph_cursor: int


def _windows(ctx: Context, run_id: str, kind: str | None, cursor: int | None) -> _Windows:
    """The window of ``kind`` around ``cursor``; the others their last windows."""

    def window(name: str, rows: list[Row], project: Callable[[Context, Row], object]) -> Window:
        at = cursor if kind == name else None
        return centred_page(rows, len(rows), at, lambda row: project(ctx, row))

    steps = _steps(ctx, run_id)
    last = max(0, len(steps) - 1)
    return _Windows(
        window("steps", steps, _step),
        window(
            "updates",
            ctx.all("SELECT * FROM run_updates WHERE run_id = ? ORDER BY sequence", run_id),
            _update,
        ),
        window(
            "follow_ups",
            ctx.all(
                "SELECT * FROM workflow_follow_ups WHERE run_id = ? ORDER BY order_number", run_id
            ),
            _follow_up,
        ),
        min(cursor, last) if kind == "steps" and cursor is not None else last,
    )


def run_view(
    ctx: Context,
    run_id: str,
    page: tuple[str, int] | None = None,
    live: Callable[[Context, str], bool] = direct_live,
) -> dict[str, object] | None:
    """``pi-workflows.run-view.v1`` of one run, or None when pwf holds no such run.

    ``page`` is a ``view.page`` request ``(kind, cursor)``: the window of
    that kind is the one around the cursor, the others their last windows.
    """
    found = _run_and_queue(ctx, run_id)
    if found is None:
        return None
    run, queue = found
    windows = _windows(ctx, run_id, *(page if page is not None else (None, None)))
    follow = windows.follow_ups
    return {
        **_absent(),
        **_shown(ctx, run, queue, live),
        "followUpQueue": None
        if not follow["total"]
        else {
            "items": follow["items"],
            "runId": run_id,
            "targetSessionId": run["origin_session_id"],
        },
        "followUpStart": follow["start"],
        "followUpTotal": follow["total"],
        "graphCursor": windows.graph_cursor,
        "queue": _queue_view(ctx, run, queue),
        "revision": run["revision"],
        "schema": RUN_VIEW_SCHEMA,
        "state": _state(ctx, run, windows.steps["items"], windows.updates["items"]),
        "stepStart": windows.steps["start"],
        "stepTotal": windows.steps["total"],
        "updateStart": windows.updates["start"],
        "updateTotal": windows.updates["total"],
        "updates": windows.updates["items"],
        "workflow": view_value(ctx, run["definition_snapshot_hash"]),
    }


def _state(ctx: Context, run: Row, steps: object, updates: object) -> dict[str, object]:
    return {
        "createdAt": run["created_at"],
        "error": view_value(ctx, run["error_hash"]),
        "errorCode": run["error_code"],
        "finalOutput": view_value(ctx, run["final_output_hash"]),
        "finishedAt": run["finished_at"],
        "input": view_value(ctx, run["input_hash"]),
        "paused": bool(run["paused"]),
        "runId": run["run_id"],
        "status": run["status"],
        "statusDetail": run["status_detail"],
        "steps": steps,
        "updatedAt": run["updated_at"],
        "updates": updates,
        "workflowName": run["workflow_name"],
    }


def payload_digest(payload: object) -> bytes:
    """SHA-256 of a payload's canonical JSON: a subscription sends only when it changes."""
    return hashlib.sha256(canonical.encode(payload)).digest()


__all__ += ["page_start", "payload_digest"]
