"""``state.status`` and ``state.verify``: reads that need the database file (HOST §2.16, §2.17).

Both read in their own read transaction, so writers go on meanwhile.
The file they read is the store's projection file (SQLite by design, ADR 0059);
the chain they verify is the log of record's.
``state.verify`` runs SQLite's integrity check of the file, then a verifier: by
default the hash chain; the edge passes pwf's whole verification (chain,
then projections == a rebuild of the log, :func:`pwf.verify.verify_failure`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands import Context, Result, refuse
from pwf.errors import CommandError
from pwf.protocol.client import ClientResponse, collapse_error
from pwf.protocol.schemas import Verified, receipt
from pwf.views.status import state_counts

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.protocol.client import ClientRequest
    from pwf.store import EventStore

__all__ = ["STATE_READS", "chain_failure", "state_read", "state_status", "state_verify"]

STATE_READS: Final = frozenset({"state.status", "state.verify"})
"""The two reads answered from the database file rather than from one command's context."""


def _read_only(_events: object) -> object:
    raise refuse("state reads append nothing")


def state_status(
    store: EventStore, now: int, overview: Callable[[EventStore, int], object] | None = None
) -> Result:
    """``{sizeBytes, counts}``, plus ``overview`` (what ``pwf status`` shows) when one is given."""
    with store.snapshot() as reader:  # inside a served host's group, the group's transaction
        ctx = Context(reader, _read_only, now)
        receipt: dict[str, object] = {
            "counts": state_counts(ctx),
            "sizeBytes": store.projections_file.path.stat().st_size,
        }
    if overview is not None:
        receipt["overview"] = overview(store, now)
    return Result(receipt=receipt)


def chain_failure(store: EventStore) -> str | None:
    """Why the hash chain does not verify, or None when it does."""
    report = store.verify()
    if report.ok:
        return None
    return f"Pi Workflows event chain is broken at seq {report.first_bad_seq}: {report.reason}"


def state_verify(
    store: EventStore, verifier: Callable[[EventStore], str | None] | None = None
) -> Result:
    """``{valid:true}``, or a refusal naming the first check that failed."""
    result = store.projections_file.integrity_check()
    if result is not None:
        raise refuse(f"Pi Workflows SQLite integrity check failed: {result}")
    failure = (verifier or chain_failure)(store)
    if failure is not None:
        raise refuse(failure)
    return Result(receipt=receipt(Verified(valid=True)))


def state_read(
    store: EventStore,
    request: ClientRequest,
    now: int,
    *,
    verifier: Callable[[EventStore], str | None] | None = None,
    overview: Callable[[EventStore, int], object] | None = None,
) -> ClientResponse:
    """The answer to ``state.status`` or ``state.verify``; both ignore their payload (HOST §2).

    Direct mode calls it with the host's own store; a served host calls it
    off its writer thread with a read-only store of the same file, so the
    two answer the same request with the same bytes.
    """
    try:
        if request.operation == "state.status":
            result = state_status(store, now, overview)
        else:
            result = state_verify(store, verifier)
    except CommandError as error:
        return ClientResponse(
            request_id=request.request_id,
            outcome=error.outcome,
            error=collapse_error(str(error)),
        )
    return ClientResponse(
        request_id=request.request_id, outcome=result.outcome, receipt=result.receipt
    )
