"""Idempotent recording: adopt a recorded request, or execute it and record its outcome.

Imports commands, events, protocol and the host's context room.  The
lookup of DOMAIN §7.2 (by request id, then by client id and idempotency
key) runs under the write lock, so two processes racing with one key get
one ``accepted`` and one ``adopted`` (ADR 0008 D5).  The batch of a recorded
operation ends with ``command.recorded`` (D6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands import Context, Result, raw_or_missing
from pwf.commands.catalogue import Route
from pwf.errors import CommandError
from pwf.events import CommandRecorded
from pwf.host._context import cause_of, context, guarded, json_value, refused, text_value
from pwf.protocol.client import ClientRequest, ClientResponse
from pwf.store.unit import OnceOnly, Repeatable

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.host import Host
    from pwf.store import EventStore, StoreTransaction

__all__ = ["adopt_or_execute", "record", "replay"]

_LOOKUP: Final = (
    "SELECT h.request_id = ?1 AS by_id, h.request_fingerprint, h.outcome, h.accepted_revision,"
    " r.content AS receipt, e.content AS error FROM host_commands h"
    " LEFT JOIN blobs r ON r.blob_hash = h.receipt_hash"
    " LEFT JOIN blobs e ON e.blob_hash = h.error_hash"
    " WHERE h.request_id = ?1 OR (h.client_id = ?2 AND h.idempotency_key = ?3)"
)
"""Both rows DOMAIN §7.2 looks up, in one statement (SQLite answers the OR from both indexes)."""


def adopt_or_execute(  # noqa: PLR0913 - the request, its route and handler, and what it came with
    host: Host[EventStore],
    request: ClientRequest,
    route: Route,
    handler: Callable[[Context, ClientRequest], Result],
    now: int,
    *,
    connection: str | None = None,
) -> ClientResponse:
    """Answer a recorded request from its record, else run ``handler`` and record it.

    A stopping served host (its gate) refuses an executed command before the
    lookup and a maintenance command after it (ADR 0028 D6).  ``connection``
    is the served connection the request came on (None in direct mode): the
    session commands check that it is their coordinator's (DOMAIN §5.13).
    """

    def executed(ctx: Context) -> Result:
        """The handler's result, its file work (an effect) done inside the savepoint."""
        result = handler(ctx, request)
        if result.effect is not None:
            host.effect(*result.effect)
        return result

    def decide(tx: StoreTransaction) -> ClientResponse:
        ctx = context(tx, now, host.actor, cause_of(request), host.mint, connection=connection)
        closed = host.gate(ctx) if host.gate is not None else None
        if closed is not None and route is Route.EXECUTED:
            return refused(request, closed, "unavailable")
        stored = replay(ctx, request)
        if stored is not None:
            return stored
        if closed is not None:
            return refused(request, closed, "unavailable")
        result = guarded(tx, lambda: executed(ctx))
        if isinstance(result, CommandError):
            if route is Route.EXECUTED:
                return refused(request, str(result), result.outcome)
            result = Result(outcome="rejected", error=str(result))
        return record(ctx, request, result, host.host_epoch)

    # A maintenance command may ask for file work (an effect): it runs once.
    return host.run(Repeatable(decide) if route is Route.EXECUTED else OnceOnly(decide))


def record(
    ctx: Context, request: ClientRequest, result: Result, host_epoch: int | None
) -> ClientResponse:
    """Stage ``command.recorded`` for a recorded outcome and answer with it."""
    ctx.emit(
        CommandRecorded(
            request_id=request.request_id,
            client_id=request.client_id,
            operation=request.operation,
            idempotency_key=request.idempotency_key,
            fingerprint=request.fingerprint,
            outcome=result.outcome,
            run_id=result.run_id or request.run_id,
            revision=result.revision,
            receipt=raw_or_missing(result.receipt),
            error=result.error,
            host_epoch=host_epoch,
        )
    )
    return ClientResponse(
        request_id=request.request_id,
        outcome=result.outcome,
        revision=result.revision,
        receipt=result.receipt,
        error=result.error,
    )


def replay(ctx: Context, request: ClientRequest) -> ClientResponse | None:
    """DOMAIN §7.2 steps 1 and 2, read under the write lock; None when nothing is recorded.

    One statement finds both candidates: the row of the request id and the
    row of the client's idempotency key (``UNIQUE (client_id,
    idempotency_key)``, so at most one each).  The request id's row decides
    when there is one, as step 1 comes first; the key's row only without it.
    """
    fingerprint = bytes.fromhex(request.fingerprint)
    rows = ctx.all(_LOOKUP, request.request_id, request.client_id, request.idempotency_key)
    row = next((found for found in rows if found["by_id"]), None)
    if row is not None:
        if bytes(row["request_fingerprint"]) != fingerprint:
            return refused(request, "Request ID was reused with another payload", "conflict")
    elif rows:
        row = rows[0]
        if bytes(row["request_fingerprint"]) != fingerprint:
            return refused(request, "Idempotency key was reused with another payload", "conflict")
    if row is None:
        return None
    outcome = "adopted" if row["outcome"] in ("accepted", "adopted") else row["outcome"]
    return ClientResponse(
        request_id=request.request_id,
        outcome=outcome,
        revision=row["accepted_revision"],
        receipt=json_value(row["receipt"]),
        error=text_value(row["error"]),
    )
