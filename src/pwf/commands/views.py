"""Read-side answers built from the projections: run views and host counts."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.commands import Result, refuse
from pwf.commands.rows import BlobRow, ChunkRow, Query, QueueStateRow, RequestStateRow
from pwf.projections.run_view_content import view_content
from pwf.protocol.schemas import ContentChunk, receipt

if TYPE_CHECKING:
    from pwf.commands import Context
    from pwf.commands.rows import RunRow
    from pwf.protocol.client import ClientRequest

__all__ = [
    "CHUNK_BYTES",
    "host_counts",
    "json_bytes",
    "run_view",
    "stored_json",
    "view_content_chunk",
    "view_text",
    "view_value",
]

ARTIFACT_KEYS: Final = frozenset({"$artifact", "$escaped"})


NOT_JSON: Final = "JSON blob is missing or has the wrong media type"
"""The original's refusal to read a blob as JSON unless it is ``application/json`` (§3.3)."""
NOT_TEXT: Final = "Text blob is missing or has the wrong media type"


_BLOB: Final = Query(BlobRow, "SELECT media_type, content FROM blobs WHERE blob_hash = ?")


def json_bytes(ctx: Context, blob_hash: bytes | None) -> bytes | None:
    """A JSON blob's canonical bytes, or None for no hash.

    Raises:
        CommandError: the hash names no blob, or one stored as text.
    """
    return None if blob_hash is None else _content(ctx, blob_hash, "application/json", NOT_JSON)


def _content(ctx: Context, blob_hash: bytes, media_type: str, refusal: str) -> bytes:
    """The bytes of the blob ``blob_hash`` names, which must be stored as ``media_type``.

    Raises:
        CommandError: ``refusal``, when there is no such blob or it has another media type.
    """
    row = ctx.fetch(_BLOB, blob_hash)
    if row is None or row.media_type != media_type:
        raise refuse(refusal)
    return row.content


def stored_json(ctx: Context, blob_hash: bytes | None) -> object:
    """A JSON blob's value, or None when there is none."""
    content = json_bytes(ctx, blob_hash)
    return None if content is None else canonical.decode(content)


def view_value(ctx: Context, blob_hash: bytes | None) -> object:
    """A run value for a view: large ones become ``$artifact`` references (§5.10)."""
    raw = json_bytes(ctx, blob_hash)
    return None if raw is None else _shown(raw)


def view_text(ctx: Context, blob_hash: bytes | None) -> object:
    """A text value for a view (a follow-up's prompt), shown as that text would be as JSON.

    Text is stored as its UTF-8 bytes (``text/plain``); a long one becomes a
    ``text/plain`` ``$artifact`` reference, as a long JSON string does.

    Raises:
        CommandError: the hash names no blob, or one not stored as text.
    """
    if blob_hash is None:
        return None
    content = _content(ctx, blob_hash, "text/plain", NOT_TEXT)
    return _shown(canonical.encode(content.decode()))


def _shown(raw: bytes) -> object:
    found = view_content(raw)
    if found is None:
        value = canonical.decode(raw)
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ARTIFACT_KEYS:
            return {"$escaped": value}
        return value
    content, media_type = found
    digest = hashlib.sha256(content).hexdigest()
    suffix = "json" if media_type == "application/json" else "txt"
    return {
        "$artifact": {
            "bytes": len(content),
            "mediaType": media_type,
            "opaque": True,
            "path": f"artifacts/sha256/{digest}.{suffix}",
            "sha256": digest,
        }
    }


_QUEUE_STATE: Final = Query(
    QueueStateRow, "SELECT status, generation FROM run_queue WHERE run_id = ?"
)
_REQUEST_STATES: Final = Query(
    RequestStateRow,
    "SELECT request_id, attempt_id, kind, revision, status FROM interactive_requests"
    " WHERE run_id = ? ORDER BY created_at, request_id",
)


def run_view(ctx: Context, run: RunRow) -> dict[str, object]:
    """What ``run.status`` answers about one run."""
    queue = ctx.fetch(_QUEUE_STATE, run.run_id)
    requests = ctx.fetch_all(_REQUEST_STATES, run.run_id)
    return {
        "createdAt": run.created_at,
        "error": view_value(ctx, run.error_hash),
        "errorCode": run.error_code,
        "executionMode": run.execution_mode,
        "finalOutput": view_value(ctx, run.final_output_hash),
        "finishedAt": run.finished_at,
        "input": view_value(ctx, run.input_hash),
        "interactions": [
            {
                "attemptId": row.attempt_id,
                "kind": row.kind,
                "requestId": row.request_id,
                "revision": row.revision,
                "status": row.status,
            }
            for row in requests
        ],
        "lineageKind": run.lineage_kind,
        "originSessionId": run.origin_session_id,
        "parentRunId": run.parent_run_id,
        "paused": bool(run.paused),
        "queue": None
        if queue is None
        else {"generation": queue.generation, "status": queue.status},
        "restartNumber": run.restart_number,
        "revision": run.revision,
        "rootRunId": run.root_run_id,
        "runId": run.run_id,
        "status": run.status,
        "statusDetail": run.status_detail,
        "updatedAt": run.updated_at,
        "workflowName": run.workflow_name,
        "workflowRef": run.workflow_ref,
    }


def _host_state(ctx: Context) -> str:
    """``running`` under a live served claim (HOST §3.1), else ``direct`` (ADR 0010)."""
    if not ctx.value("SELECT count(*) FROM sqlite_master WHERE name = 'host_state'"):
        return "direct"
    live = ctx.value(
        "SELECT count(*) FROM host_state WHERE host_id IS NOT NULL AND expires_at > ?", ctx.now
    )
    return "running" if live else "direct"


def host_counts(ctx: Context) -> dict[str, object]:
    """``host.status``: counts read from the projections."""

    def count(sql: str, *params: object) -> int:
        return int(ctx.value(sql, *params) or 0)

    return {
        "expiredClaims": count(
            "SELECT count(*) FROM run_queue WHERE owner_worker_epoch IS NOT NULL"
            " AND lease_expires_at <= ?",
            ctx.now,
        ),
        "parkedRuns": count("SELECT count(*) FROM run_queue WHERE status = 'parked'"),
        "pendingInteractions": count(
            "SELECT count(*) FROM interactive_requests WHERE status = 'pending'"
        ),
        "queuedRuns": count("SELECT count(*) FROM run_queue WHERE status = 'queued'"),
        "runningRuns": count("SELECT count(*) FROM runs WHERE status = 'running'"),
        "state": _host_state(ctx),
        "waitingRuns": count("SELECT count(*) FROM runs WHERE status = 'waiting'"),
        "workers": count(
            "SELECT count(*) FROM run_workers WHERE status IN ('starting', 'running')"
        ),
    }


CHUNK_BYTES: Final = 196_608
"""``view.content`` serves stored view values in chunks of this many raw bytes (HOST.md §2.11)."""

CONTENT_CHUNK_SCHEMA: Final = "pi-workflows.content-chunk.v1"
_CONTENT_PATH: Final = re.compile(r"artifacts/sha256/([0-9a-f]{64})\.(json|txt)")
_MEDIA_TYPES: Final = {"json": "application/json", "txt": "text/plain"}
_MAX_SAFE: Final = 2**53 - 1


_CHUNK: Final = Query(
    ChunkRow,
    "SELECT byte_length, substr(content, ?, ?) AS chunk FROM run_view_content"
    " WHERE run_id = ? AND content_hash = ? AND media_type = ?",
)


def _content_request(request: ClientRequest) -> tuple[str, str, int]:
    """The run id, path and offset a ``view.content`` request names, else its refusal."""
    if not isinstance(request.payload, dict):
        raise refuse("view.content payload must be an object")
    payload = request.payload
    if request.run_id is None:
        raise refuse("view.content requires runId")
    path = payload.get("path")
    if not isinstance(path, str) or not path:
        raise refuse("path must be text")
    offset = payload.get("offset")
    if type(offset) is not int or not 0 <= offset <= _MAX_SAFE:
        raise refuse("offset must be a non-negative integer")
    return request.run_id, path, offset


def view_content_chunk(ctx: Context, request: ClientRequest) -> Result:
    """``view.content`` ``{path, offset}``: one base64 chunk of a large run value (HOST.md §2.11).

    ``path`` is ``artifacts/sha256/<hex>.<json|txt>``; the extension names
    the media type the stored value must have.
    """
    run_id, path, offset = _content_request(request)
    match = _CONTENT_PATH.fullmatch(path)
    row = None
    if match is not None:
        media_type = _MEDIA_TYPES[match[2]]
        row = ctx.fetch(
            _CHUNK, offset + 1, CHUNK_BYTES, run_id, bytes.fromhex(match[1]), media_type
        )
    if match is None or row is None:
        return Result(outcome="notFound", error="Workflow content not found")
    size = row.byte_length
    if offset > size:
        raise refuse("Workflow content offset is outside the content range")
    end = min(size, offset + CHUNK_BYTES)
    return Result(
        receipt=receipt(
            ContentChunk(
                bytes=size,
                complete=end == size,
                data=base64.b64encode(row.chunk or b"").decode("ascii"),
                media_type=_MEDIA_TYPES[match[2]],
                next_offset=end,
                offset=offset,
                path=path,
                run_id=run_id,
                schema=CONTENT_CHUNK_SCHEMA,
                sha256=match[1],
            )
        )
    )
