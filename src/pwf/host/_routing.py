"""Client routing: which path one client request takes through the host (DOMAIN §7, §8).

Imports commands, protocol, views and the host's rooms.  An operation is
unsupported, file maintenance, recorded (executed or maintenance: adopted
or executed and recorded), a state read, or direct (its own idempotency,
nothing recorded in ``host_commands``), in the original's order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf.commands import Result
from pwf.commands.catalogue import CLIENT_OPERATIONS, Route
from pwf.errors import AnswerTooLargeError, BlobConflictError, CommandError, ProtocolError
from pwf.host._context import cause_of, context, guarded, refused
from pwf.host._maintenance import FILE_MAINTENANCE, maintain
from pwf.host._recording import adopt_or_execute
from pwf.host.statereads import state_read
from pwf.projections.blobs import BLOB_CONFLICT
from pwf.protocol.client import (
    TOO_LARGE,
    ClientRequest,
    ClientResponse,
    collapse_error,
    encode_line,
    encode_response,
)
from pwf.store.unit import Repeatable
from pwf.views import READS
from pwf.views.status import served_host_status

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context
    from pwf.commands.catalogue import Operation
    from pwf.host import Host
    from pwf.store import EventStore, StoreTransaction
    from pwf.views.status import Live

__all__ = ["decide", "frame"]


def decide(
    host: Host[EventStore], request: ClientRequest, now: int, connection: str | None = None
) -> tuple[ClientResponse, str | None]:
    """Decide one request; the submission whose verdict its answer awaits, if any."""
    operation = CLIENT_OPERATIONS.get(request.operation)
    if operation is None:
        return refused(request, f"Unsupported workflow operation: {request.operation}"), None
    if request.operation in FILE_MAINTENANCE:
        return maintain(host, request, operation.handler, now), None
    if operation.route in (Route.EXECUTED, Route.MAINTENANCE):
        return _recorded(host, request, operation, now, connection), None
    if request.operation in ("state.status", "state.verify"):
        return _state_read(host, request, now), None
    handler = READS.get(request.operation, operation.handler)
    return _direct(host, request, handler, now, connection)


def _recorded(
    host: Host[EventStore],
    request: ClientRequest,
    operation: Operation,
    now: int,
    connection: str | None,
) -> ClientResponse:
    """Adopt or execute ``operation``; a blob conflict found while recording refuses the request."""
    route, handler = operation
    if request.operation == "host.status" and host.status_live is not None:
        handler = _served_status(host.status_live)
    try:
        return adopt_or_execute(host, request, route, handler, now, connection=connection)
    except BlobConflictError:
        # Recording the outcome stored a blob another media type holds: the
        # whole batch is gone with its own transaction, as in the original.
        # In a group's transaction the group's savepoint undoes it instead.
        if host.shared is not None:
            raise
        return refused(request, BLOB_CONFLICT)


def _served_status(live: Callable[[], Live]) -> Callable[[Context, ClientRequest], Result]:
    """``host.status`` of a served host: exactly the members of HOST §3.1."""

    def status(ctx: Context, _request: ClientRequest) -> Result:
        return Result(receipt=served_host_status(ctx, live()))

    return status


def _state_read(host: Host[EventStore], request: ClientRequest, now: int) -> ClientResponse:
    """``state.status`` and ``state.verify`` ignore their payload (HOST §2)."""
    return state_read(host.store, request, now, verifier=host.verifier, overview=host.overview)


def _direct(
    host: Host[EventStore],
    request: ClientRequest,
    handler: Callable[[Context, ClientRequest], Result],
    now: int,
    connection: str | None = None,
) -> tuple[ClientResponse, str | None]:
    """Operations with their own idempotency: nothing is recorded in host_commands."""

    def direct(tx: StoreTransaction) -> Result | ClientResponse:
        ctx = context(tx, now, host.actor, cause_of(request), host.mint, connection=connection)
        result = guarded(tx, lambda: handler(ctx, request))
        if isinstance(result, CommandError):
            return refused(request, str(result), result.outcome)
        return result

    result = host.run(Repeatable(direct))  # a refusal or a result: nothing outside the store
    if isinstance(result, ClientResponse):
        return result, None
    response = ClientResponse(
        request_id=request.request_id,
        outcome=result.outcome,
        revision=result.revision,
        receipt=result.receipt,
        error=None if result.error is None else collapse_error(result.error),
    )
    return response, result.awaiting


def frame(request: ClientRequest, response: ClientResponse) -> bytes:
    """The answer's framed line (canonical bytes and a newline).

    Raises:
        AnswerTooLargeError: the line exceeds 1 MiB; says whether the request was recorded.
    """
    try:
        return encode_line(encode_response(response))
    except ProtocolError as error:
        if str(error) != TOO_LARGE:
            raise
        operation = CLIENT_OPERATIONS.get(request.operation)
        recorded = operation is not None and operation.route in (
            Route.EXECUTED,
            Route.MAINTENANCE,
        )
        raise AnswerTooLargeError(response.outcome, recorded=recorded) from None
