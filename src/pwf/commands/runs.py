"""Runs: reading them, reserving them, and start, status, list and host status (§5.2, §8).

Imports commands, events, protocol and errors.  Pause, resume, cancel and
the end of a run are in :mod:`pwf.commands.runcontrol`.  Returned refusals
are recorded with the command; raised ones (``refuse``) are not (§7.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypedDict

import msgspec

from pwf import canonical
from pwf.commands import Context, Result, refuse
from pwf.commands.payload import (
    absolute_path,
    members,
    members_or_none,
    optional_text,
    positive_int,
    text,
)
from pwf.commands.rows import QUEUE, RUN, Query, QueueRow, RunListRow, RunRow
from pwf.commands.sources import normalised_source, stored_source
from pwf.commands.views import host_counts, json_bytes, run_view
from pwf.events import (
    RunQueueDoneForContinuation,
    RunReserved,
)
from pwf.projections.runs import RESERVED_GENERATION, RESERVED_REVISION
from pwf.protocol.client import payload_member
from pwf.protocol.schemas import RunStarted, Stopping, receipt

if TYPE_CHECKING:
    from pwf.commands import Row
    from pwf.events.runs import ExecutionMode, LineageKind, TerminalStatus
    from pwf.protocol.client import ClientRequest

__all__ = [
    "LIVE_QUEUE",
    "host_status",
    "host_stop",
    "live_owner",
    "require_run_id",
    "reserve",
    "run_list",
    "run_start",
    "run_status",
    "template_of",
]

TERMINAL: Final[tuple[TerminalStatus, ...]] = ("completed", "failed", "timed_out", "cancelled")
LIVE_QUEUE: Final = ("queued", "starting", "running", "parked")
"""The queue statuses of a run still under way: all but ``done``, ``failed``, ``cancelled``."""


class RunTemplate(TypedDict):
    """The fields of ``run.reserved`` that say what a run runs, before its lineage is known."""

    project_path: str
    workflow_name: str
    workflow_ref: str
    workflow_source: msgspec.Raw
    definition_digest: str
    definition_snapshot: msgspec.Raw
    input: msgspec.Raw
    launch_options: msgspec.Raw
    origin_session_id: str | None
    execution_mode: ExecutionMode


def require_run_id(request: ClientRequest) -> str:
    """The request-level runId, else "{operation} requires runId"."""
    if request.run_id is None:
        raise refuse(f"{request.operation} requires runId")
    return request.run_id


def get_run(ctx: Context, run_id: str) -> RunRow | None:
    """The run row, or None."""
    return ctx.fetch(RUN, run_id)


def queue_of(ctx: Context, run_id: str) -> QueueRow | None:
    """The run's queue row, or None."""
    return ctx.fetch(QUEUE, run_id)


def live_owner(ctx: Context, run_id: str) -> bool:
    """True while a worker holds an unexpired lease on the run."""
    queue = queue_of(ctx, run_id)
    return queue is not None and queue.owner_worker_epoch is not None and queue.held(ctx.now)


def revision_of(ctx: Context, run_id: str) -> int:
    """The run's current revision."""
    return int(ctx.value("SELECT revision FROM runs WHERE run_id = ?", run_id))


# ------------------------------------------------------------------ reservation


def _lineage(
    ctx: Context, parent_id: str, origin: str | None, kind: LineageKind, restart_number: int
) -> str:
    """Check a child's lineage (§5.2) and return its root run id."""
    parent = get_run(ctx, parent_id)
    if parent is None:
        raise refuse(f"Workflow parent run not found: {parent_id}")
    if parent.origin_session_id != origin:
        raise refuse("Workflow parent belongs to another Pi session")
    if kind == "restart":
        queue = queue_of(ctx, parent_id)
        if (
            parent.status not in TERMINAL
            or queue is None
            or queue.status
            not in (
                "done",
                "failed",
                "cancelled",
            )
        ):
            raise refuse("Restart parent is not terminal")
        if restart_number != parent.restart_number + 1:
            raise refuse("Restart lineage must increase the restart number by one")
        return str(parent.root_run_id)
    if restart_number != parent.restart_number:
        raise refuse("Continuation lineage conflicts with restart metadata")
    queue = queue_of(ctx, parent_id)
    status = "missing" if queue is None else queue.status
    if status == "done":
        raise refuse("Continuation parent already has a reserved continuation")
    if status != "parked":
        raise refuse(f"Continuation parent queue is {status}")
    if queue is not None and queue.owner_worker_epoch is not None:
        raise refuse("Continuation parent still has an active owner")
    return str(parent.root_run_id)


def reserve(  # noqa: PLR0913 - a reservation has this many facts
    ctx: Context,
    *,
    run_id: str,
    template: RunTemplate,
    parent_id: str | None = None,
    lineage: LineageKind = "continuation",
    restart_number: int = 0,
    fingerprint: str | None = None,
) -> None:
    """Reserve a run (and its lineage) from a template of RunReserved fields."""
    origin = template["origin_session_id"]
    root = run_id
    if parent_id is not None:
        root = _lineage(ctx, parent_id, origin, lineage, restart_number)
    elif fingerprint is not None or restart_number != 0:
        raise refuse("A root workflow run cannot declare lineage or restart metadata")
    if origin is not None and ctx.one(
        "SELECT 1 FROM run_queue WHERE origin_session_id = ?"
        " AND status IN ('queued', 'starting', 'running')",
        origin,
    ):
        raise refuse(f"Workflow session {origin} already has an active run")
    ctx.emit(
        RunReserved(
            run_id=run_id,
            root_run_id=root,
            parent_run_id=parent_id,
            lineage_kind=None if parent_id is None else lineage,
            restart_number=restart_number,
            parent_terminal_fingerprint=fingerprint,
            **template,
        )
    )
    if parent_id is not None and lineage == "continuation":
        ctx.emit(RunQueueDoneForContinuation(run_id=parent_id, continuation_run_id=run_id))


def _template(request: ClientRequest, payload: dict[str, object]) -> RunTemplate:
    """The run ``request`` asks for; its JSON members are kept as the line's bytes when known.

    A definition snapshot is the request's largest member; encoding it again
    was most of a ``run.start``'s Python when it is large (ADR 0105).
    """
    mode: ExecutionMode = (
        "headless" if payload.get("executionMode") == "headless" else "interactive"
    )
    launch = payload_member(request, "launchOptions")
    if launch is None or bytes(launch) == b"null":  # absent or null: no options
        value = payload.get("launchOptions")
        launch = canonical.raw({} if value is None else value)
    return {
        "project_path": absolute_path(payload, "projectPath"),
        "workflow_name": text(payload, "workflowName"),
        "workflow_ref": text(payload, "workflowSourceRef"),
        "workflow_source": canonical.raw(normalised_source(payload.get("workflowSource"))),
        "definition_digest": text(payload, "definitionDigest"),
        "definition_snapshot": _json(request, payload, "definitionSnapshot"),
        "input": _json(request, payload, "input"),
        "launch_options": launch,
        "origin_session_id": optional_text(payload, "originSessionId"),
        "execution_mode": mode,
    }


def _json(request: ClientRequest, payload: dict[str, object], name: str) -> msgspec.Raw:
    """Payload member ``name``'s canonical bytes (``null`` when absent)."""
    known = payload_member(request, name)
    return canonical.raw(payload.get(name)) if known is None else known


def template_of(ctx: Context, run: RunRow, run_input: msgspec.Raw) -> RunTemplate:
    """A new run of ``run``'s workflow, definition and options, as stored, on ``run_input``."""

    def stored(blob_hash: bytes | None, default: bytes) -> msgspec.Raw:
        return msgspec.Raw(json_bytes(ctx, blob_hash) or default)

    return {
        "project_path": run.project_path,
        "workflow_name": run.workflow_name,
        "workflow_ref": run.workflow_ref,
        "workflow_source": canonical.raw(source_of(ctx, run)),
        "definition_digest": run.definition_digest,
        "definition_snapshot": stored(run.definition_snapshot_hash, b"null"),
        "input": run_input,
        "launch_options": stored(run.launch_options_hash, b"{}"),
        "origin_session_id": run.origin_session_id,
        "execution_mode": run.execution_mode,
    }


def source_of(ctx: Context, run: RunRow | Row) -> object:
    """A run's ``{root, mounted}`` read back from ``run_sources`` (text for older runs).

    ``run`` is a typed row, or a view's untyped ``runs`` row.
    """
    if isinstance(run, RunRow):
        return _source(ctx, run.run_id, run.workflow_source, run.definition_snapshot_hash)
    return _source(ctx, run["run_id"], run["workflow_source"], run["definition_snapshot_hash"])


def _source(ctx: Context, run_id: str, workflow_source: str, snapshot_hash: bytes | None) -> object:
    snapshot = json_bytes(ctx, snapshot_hash)
    stored = stored_source(ctx, run_id, None if snapshot is None else canonical.decode(snapshot))
    return workflow_source if stored is None else stored


def _compatible(
    ctx: Context, run: RunRow, template: RunTemplate, payload: dict[str, object]
) -> bool:
    """Whether the existing run is the one asked for, compared as the original does (HOST §5.3)."""
    parent = payload.get("parentRunId")
    return (
        run.workflow_name == template["workflow_name"]
        and run.workflow_ref == template["workflow_ref"]
        and run.definition_digest == template["definition_digest"]
        and canonical.encode(source_of(ctx, run)) == bytes(template["workflow_source"])
        and bytes(run.input_hash) == canonical.digest(payload.get("input"))
        and json_bytes(ctx, run.launch_options_hash) == bytes(template["launch_options"])
        and run.origin_session_id == template["origin_session_id"]
        and run.execution_mode == template["execution_mode"]
        and run.parent_run_id == (parent if isinstance(parent, str) else None)
    )


_NEWEST: Final = Query(
    RunListRow,
    "SELECT r.run_id, r.status, r.paused, r.workflow_name, r.origin_session_id,"
    " r.updated_at, q.status AS queue_status FROM runs r"
    " LEFT JOIN run_queue q ON q.run_id = r.run_id"
    " ORDER BY r.created_at DESC, r.run_id DESC LIMIT ?",
)


def run_start(ctx: Context, request: ClientRequest) -> Result:
    """``run.start``: reserve a new run, or adopt an identical existing one."""
    run_id = require_run_id(request)
    payload = members(request.payload)
    template = _template(request, payload)
    existing = get_run(ctx, run_id)
    if existing is not None:
        if not _compatible(ctx, existing, template, payload):
            raise refuse(f"Workflow run preparation conflicts: {run_id}")
        return Result(
            outcome="adopted",
            receipt=receipt(RunStarted(run_id=run_id, status=existing.status)),
            revision=existing.revision,
            run_id=run_id,
        )
    parent = payload.get("parentRunId")
    reserve(
        ctx,
        run_id=run_id,
        template=template,
        parent_id=parent if isinstance(parent, str) else None,
    )
    # The reservation's rows are new, so their generation and revision are the projector's
    # first ones: known without reading them back (ADR 0101).
    return Result(
        receipt=receipt(RunStarted(run_id=run_id, generation=RESERVED_GENERATION)),
        revision=RESERVED_REVISION,
        run_id=run_id,
    )


def run_status(ctx: Context, request: ClientRequest) -> Result:
    """``run.status``: the run view, or notFound."""
    run_id = require_run_id(request)
    run = get_run(ctx, run_id)
    if run is None:
        return Result(outcome="notFound", error=f"Workflow run not found: {run_id}", run_id=run_id)
    return Result(receipt=run_view(ctx, run), revision=run.revision, run_id=run_id)


def run_list(ctx: Context, request: ClientRequest) -> Result:
    """``run.list``: the newest runs, at most ``limit`` (100 unless a safe positive integer)."""
    payload = members_or_none(request.payload)
    limit = positive_int(payload.get("limit")) or 100
    runs = [
        {
            "originSessionId": row.origin_session_id,
            "paused": bool(row.paused),
            "queueStatus": row.queue_status,
            "runId": row.run_id,
            "status": row.status,
            "updatedAt": row.updated_at,
            "workflowName": row.workflow_name,
        }
        for row in ctx.fetch_all(_NEWEST, limit)
    ]
    return Result(receipt={"runs": runs})


def host_status(ctx: Context, _request: ClientRequest) -> Result:
    """``host.status``: counts read from the projections."""
    return Result(receipt=host_counts(ctx))


def host_stop(_ctx: Context, _request: ClientRequest) -> Result:
    """``host.stop``: recorded; only a served host acts on it (ADR 0010)."""
    return Result(receipt=receipt(Stopping(stopping=True)))


# ------------------------------------------------------------------ pause / resume
