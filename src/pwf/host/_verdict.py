"""Verdict polling: a submission's answer waits, bounded, for its worker's verdict (ADR 0011).

Imports protocol and the host's context room.  The wait happens after the
submission's transaction committed, outside the write lock (ADR 0008), and
reads committed state.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import msgspec

from pwf.host._context import json_value, refused
from pwf.protocol.client import ClientRequest, ClientResponse

if TYPE_CHECKING:
    from pwf.host import Host
    from pwf.store import EventStore

__all__ = ["await_verdict", "verdict"]

_POLL_SECONDS: Final = 0.05
_FAILED: Final = "Workflow step output failed validation"


def await_verdict(
    host: Host[EventStore],
    request: ClientRequest,
    submission_id: str,
    started: ClientResponse,
    wait_ms: int,
) -> ClientResponse:
    """The submission's verdict once recorded, or ``unavailable`` after ``wait_ms``."""
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        found = verdict(host, request, submission_id, started)
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            return refused(
                request,
                f"Workflow submission {submission_id} is still validating;"
                " retry with the same idempotency key for its verdict",
                "unavailable",
            )
        time.sleep(_POLL_SECONDS)


def verdict(
    host: Host[EventStore], request: ClientRequest, submission_id: str, started: ClientResponse
) -> ClientResponse | None:
    """The answer of a submission once its worker's verdict is recorded, else None."""
    row = host.store.reader().one(
        "SELECT s.outcome, b.content FROM interactive_submissions s"
        " LEFT JOIN blobs b ON b.blob_hash = s.receipt_hash WHERE s.submission_id = ?",
        (submission_id,),
    )
    if row is not None and row["outcome"] == "accepted":
        return msgspec.structs.replace(started, receipt=json_value(row["content"]))
    if row is None or row["outcome"] != "rejected":
        return None
    receipt = json_value(row["content"])
    error = receipt.get("error") if isinstance(receipt, dict) else None
    return ClientResponse(
        request_id=request.request_id,
        outcome="rejected",
        revision=started.revision,
        receipt=receipt,
        error=error if isinstance(error, str) and error else _FAILED,
    )
