"""``view.content`` of any large value a run view names (HOST §2.11, DOMAIN §5.10).

Imports commands and projections; reads only.  A run view replaces every
value over 16 KiB by an ``$artifact`` reference: the run's input, output
and error (kept in ``run_view_content``), and also its steps' outputs, its
updates, its follow-up prompts, its interactions' contracts, its messages'
contents, its definition snapshot and a long failure reason.  This handler
serves them all: first what ``run_view_content`` holds, then the run's
other values, matched by media type and the SHA-256 of the served bytes.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Final

from pwf.commands import Result, refuse
from pwf.commands.rows import ContentRow, HashRow, Query
from pwf.commands.views import CHUNK_BYTES, view_content_chunk
from pwf.projections.run_view_content import VIEW_VALUE_LIMIT, view_content
from pwf.views.runs import reason_texts

if TYPE_CHECKING:
    from pwf.commands import Context
    from pwf.protocol.client import ClientRequest

__all__ = ["view_content_of_run"]

CONTENT_CHUNK_SCHEMA: Final = "pi-workflows.content-chunk.v1"
_SUFFIXES: Final = {"json": "application/json", "txt": "text/plain"}
_HEX: Final = frozenset("0123456789abcdef")
_RUN_VALUES: Final = Query(
    HashRow,
    "SELECT input_hash AS h FROM runs WHERE run_id = ?1"
    " UNION SELECT final_output_hash FROM runs WHERE run_id = ?1"
    " UNION SELECT error_hash FROM runs WHERE run_id = ?1"
    " UNION SELECT definition_snapshot_hash FROM runs WHERE run_id = ?1"
    " UNION SELECT output_hash FROM node_attempts WHERE run_id = ?1"
    " UNION SELECT update_hash FROM run_updates WHERE run_id = ?1"
    " UNION SELECT prompt_hash FROM workflow_follow_ups WHERE run_id = ?1"
    " UNION SELECT contract_hash FROM interactive_requests WHERE run_id = ?1"
    " UNION SELECT content_hash FROM workflow_messages WHERE run_id = ?1",
)
"""Every blob a view of the run shows through ``view_value``."""
_LARGE_JSON: Final = Query(
    ContentRow,
    "SELECT content FROM blobs WHERE blob_hash = ? AND media_type = 'application/json'"
    " AND byte_length > ?",
)
"""A JSON blob long enough to be an artifact (a string's text is at least 2 bytes shorter)."""
_PROMPTS: Final = Query(
    ContentRow,
    "SELECT b.content FROM workflow_follow_ups f JOIN blobs b ON b.blob_hash = f.prompt_hash"
    " WHERE f.run_id = ? AND b.media_type = 'text/plain' AND b.byte_length > ?",
)
"""The run's follow-up prompts (text) long enough to be artifacts."""


def _named(path: str) -> tuple[str, str] | None:
    """``(hex digest, media type)`` of ``artifacts/sha256/<hex>.<json|txt>``, or None."""
    prefix, _, name = path.partition("artifacts/sha256/")
    digest, _, suffix = name.partition(".")
    if prefix or len(digest) != 64 or not set(digest) <= _HEX or suffix not in _SUFFIXES:
        return None
    return digest, _SUFFIXES[suffix]


def _run_content(ctx: Context, run_id: str, digest: str, media_type: str) -> bytes | None:
    """The bytes of the run's large value whose SHA-256 is ``digest``, served as ``media_type``.

    A JSON value is served as its stored bytes, so its blob hash is the
    digest; a JSON string is served as its text, which only decoding tells.
    """
    hashes = {row.h for row in ctx.fetch_all(_RUN_VALUES, run_id) if row.h is not None}
    if media_type == "application/json":
        wanted = bytes.fromhex(digest)
        hashes = {wanted} if wanted in hashes else set()
    for blob_hash in sorted(hashes):
        stored = ctx.fetch(_LARGE_JSON, blob_hash, VIEW_VALUE_LIMIT)
        found = None if stored is None else view_content(stored.content)
        if found is not None and found[1] == media_type:
            content = found[0]
            if hashlib.sha256(content).hexdigest() == digest:
                return content
    if media_type == "text/plain":
        for row in ctx.fetch_all(_PROMPTS, run_id, VIEW_VALUE_LIMIT):
            content = row.content
            if hashlib.sha256(content).hexdigest() == digest:
                return content
        for text in reason_texts(ctx, run_id):
            content = text.encode()
            if hashlib.sha256(content).hexdigest() == digest:
                return content
    return None


def view_content_of_run(ctx: Context, request: ClientRequest) -> Result:
    """``view.content`` ``{path, offset}``: one chunk of any large value of the run's views.

    The payload checks and the run's inputs, outputs and errors are
    :func:`pwf.commands.views.view_content_chunk`'s; what it does not find
    is looked for among the run's other values.
    """
    answer = view_content_chunk(ctx, request)
    if answer.outcome != "notFound":
        return answer
    assert isinstance(request.payload, dict)
    assert request.run_id is not None
    path = request.payload["path"]
    offset = request.payload["offset"]
    assert isinstance(path, str)
    assert isinstance(offset, int)
    named = _named(path)
    content = None if named is None else _run_content(ctx, request.run_id, *named)
    if named is None or content is None:
        return answer
    digest, media_type = named
    size = len(content)
    if offset > size:
        raise refuse("Workflow content offset is outside the content range")
    end = min(size, offset + CHUNK_BYTES)
    return Result(
        receipt={
            "bytes": size,
            "complete": end == size,
            "data": base64.b64encode(content[offset:end]).decode("ascii"),
            "mediaType": media_type,
            "nextOffset": end,
            "offset": offset,
            "path": path,
            "runId": request.run_id,
            "schema": CONTENT_CHUNK_SCHEMA,
            "sha256": digest,
        }
    )
