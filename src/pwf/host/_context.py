"""What every decision of the host is given and how it refuses (DOMAIN §7).

Imports commands, events, protocol and the store's types.  A decision runs on
a :class:`~pwf.commands.Context` built from the write transaction: its
reader sees the projections, its stager seals events into the batch.  A
refusal is one ``ClientResponse`` with a collapsed error line.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from pwf import canonical
from pwf.commands import Context
from pwf.errors import CommandError
from pwf.events import Cause
from pwf.protocol.client import ClientRequest, ClientResponse, collapse_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.events import Actor
    from pwf.protocol.worker import WorkerMessage
    from pwf.store import StoreTransaction

__all__ = ["cause_of", "context", "guarded", "json_value", "refusal", "refused", "text_value"]

T = TypeVar("T")


def context(  # noqa: PLR0913 - the transaction and everything a decider is given
    tx: StoreTransaction,
    now: int,
    actor: Actor,
    cause: Cause | None,
    mint: Callable[[str], str] | None = None,
    *,
    connection: str | None = None,
) -> Context:
    """The decider's view of ``tx``: its reads, and staging under ``actor`` and ``cause``."""

    def stage(events: Any) -> object:  # noqa: ANN401 - the store's own signature
        return tx.stage(events, at=now, actor=actor, cause=cause)

    return Context(tx.reader(), stage, now, mint, connection=connection)


def cause_of(source: ClientRequest | WorkerMessage) -> Cause:
    """What the events a client request or a worker message stages say caused them.

    The cause takes the members of the same name: the operation and the
    fingerprint, and a request's id, client id and idempotency key, or a
    message's worker epoch and message id.  A client request's cause is
    built from its members directly, a tenth of the time of
    ``msgspec.convert``'s walk of its attributes (ADR 0105); its members
    were checked when the request was read.
    """
    if isinstance(source, ClientRequest):
        return Cause(
            operation=source.operation,
            request_id=source.request_id,
            client_id=source.client_id,
            idempotency_key=source.idempotency_key,
            fingerprint=source.fingerprint,
        )
    return msgspec.convert(source, Cause, from_attributes=True)


def refused(request: ClientRequest, error: str, outcome: str = "rejected") -> ClientResponse:
    """The answer to ``request`` that refuses it with one line."""
    return ClientResponse(
        request_id=request.request_id, outcome=outcome, error=collapse_error(error)
    )


def refusal(error: CommandError | sqlite3.IntegrityError) -> CommandError:
    """A projection constraint that stopped a batch is a refusal, not a crash.

    Deciders check every rule first; a constraint firing here means one was
    missed, and the savepoint has already dropped the handler's events.
    """
    if isinstance(error, CommandError):  # a blob conflict too (BlobConflictError)
        return error
    return CommandError(f"Workflow state constraint failed: {error}")


def guarded(tx: StoreTransaction, decide: Callable[[], T]) -> T | CommandError:
    """Run ``decide`` in a savepoint of ``tx``; a refusal is returned, its events undone.

    A projection constraint that fired is a refusal too (:func:`refusal`);
    any other error goes on to end the transaction.
    """
    try:
        with tx.savepoint():
            return decide()
    except (CommandError, sqlite3.IntegrityError) as error:
        return refusal(error)


def json_value(value: bytes | None) -> object:
    """A stored canonical blob as a value (MISSING when there is none)."""
    return canonical.decode(value) if value is not None else canonical.MISSING


def text_value(value: bytes | None) -> str | None:
    """A stored text blob as text (None when there is none)."""
    return None if value is None else value.decode()
