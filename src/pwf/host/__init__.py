"""The command path: adopt-or-execute, decide, append, project, respond (DOMAIN §7, §14).

Imports commands, protocol, events, the store and the read model.  Every
client request and worker message runs inside one write transaction: the
idempotency lookup is repeated under the write lock, the decider stages its
events (projected as they are staged), and the batch ends with the record of
the outcome, so two processes racing with one key get one ``accepted`` and
one ``adopted``.  Direct mode (``pwf request`` / ``pwf worker``) holds no
host claim (ADR 0010).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec

from pwf import canonical
from pwf.commands import Context, Result
from pwf.commands.catalogue import CLIENT_OPERATIONS, Route
from pwf.commands.expiry import begin_timeouts
from pwf.commands.sessions import detach, recover_turns
from pwf.commands.sessionview import session_view
from pwf.commands.workers import WORKER_OPERATIONS, check_worker, launch_run, run_revision
from pwf.errors import AnswerTooLargeError, CommandError, ProtocolError, StoreError
from pwf.events import Actor, Cause, CommandRecorded, WorkerMessageRecorded
from pwf.host._statereads import state_read
from pwf.projections.blobs import BLOB_CONFLICT, CONFLICT_SIGNATURE
from pwf.protocol.client import (
    TOO_LARGE,
    ClientRequest,
    ClientResponse,
    collapse_error,
    encode_line,
    encode_response,
)
from pwf.protocol.worker import LaunchEnvelope, WorkerMessage, WorkerResponse
from pwf.readmodel import RowReader
from pwf.views import READS
from pwf.views.status import Live, served_host_status

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pwf.store.sqlite import SqliteStore, SqliteTransaction

__all__ = ["DIRECT_ACTOR", "Host"]

DIRECT_ACTOR: Final = Actor(type="host", id="pwf-direct")
T = TypeVar("T")
LEASE_MS: Final = 30_000
_POLL_SECONDS: Final = 0.05
_FILE_MAINTENANCE: Final = frozenset({"state.backup", "state.prune"})
"""Operations on the database file itself, which a shared log in PostgreSQL is not."""


def _context(  # noqa: PLR0913 - the transaction and everything a decider is given
    tx: SqliteTransaction,
    now: int,
    actor: Actor,
    cause: Cause | None,
    mint: Callable[[str], str] | None = None,
    *,
    connection: str | None = None,
) -> Context:
    def stage(events: Any) -> object:  # noqa: ANN401 - the store's own signature
        return tx.stage(events, at=now, actor=actor, cause=cause)

    return Context(RowReader(tx.connection), stage, now, mint, connection=connection)


def _json(value: object) -> object:
    return canonical.decode(bytes(value)) if value is not None else canonical.MISSING  # type: ignore[call-overload]


def _text(value: object) -> str | None:
    return None if value is None else bytes(value).decode()  # type: ignore[call-overload]


class Host:
    """Runs client requests and worker messages against one store."""

    def __init__(
        self,
        store: SqliteStore,
        *,
        actor: Actor = DIRECT_ACTOR,
        host_epoch: int | None = None,
        new_epoch: Callable[[], str] | None = None,
        replace_backups: bool = True,
    ) -> None:
        """Bind the store; ``new_epoch`` makes worker epochs (a UUID by default).

        ``replace_backups`` false makes ``state.backup`` refuse an existing
        destination instead of replacing it (the CLI without ``--overwrite``).
        """
        self.store = store
        self.replace_backups = replace_backups
        self.actor = actor
        self.host_epoch = host_epoch
        self.new_epoch = new_epoch or (lambda: str(uuid.uuid4()))
        self.shared: SqliteTransaction | None = None
        """A group's open write transaction: each decision is then its own batch in it."""
        self.gate: Callable[[Context], str | None] | None = None
        """Why executed and maintenance commands are ``unavailable`` now (a served host)."""
        self.verifier: Callable[[SqliteStore], str | None] | None = None
        """What ``state.verify`` runs after SQLite's integrity check (default: the chain)."""
        self.overview: Callable[[SqliteStore, int], object] | None = None
        """What ``state.status`` adds as ``overview`` (what ``pwf status`` shows)."""
        self.status_live: Callable[[], Live] | None = None
        """A served host's own facts: ``host.status`` is then HOST §3.1's receipt."""

    @contextmanager
    def _transaction(self) -> Iterator[SqliteTransaction]:
        """The write transaction of one decision: its own, or the next batch of a group's."""
        if self.shared is None:
            with self.store.transaction() as tx:
                yield tx
            return
        self.shared.new_batch()
        yield self.shared

    def _mint(self, prefix: str) -> str:
        return f"{prefix}{self.new_epoch()}"

    # ------------------------------------------------------------------ clients

    def request(self, request: ClientRequest, now: int, *, wait_ms: int = 0) -> ClientResponse:
        """Answer one client request as the original would (DOMAIN §7, §8)."""
        response, submission = self.decide(request, now)
        if submission is not None:
            return self._await_verdict(request, submission, response, wait_ms)
        return response

    def decide(  # noqa: PLR0911 - one return per route, in the original's order
        self, request: ClientRequest, now: int, connection: str | None = None
    ) -> tuple[ClientResponse, str | None]:
        """Decide one request; the submission whose verdict its answer awaits, if any.

        ``connection`` is the served connection the request came on: a
        coordinator attached by it belongs to it (DOMAIN §5.13).
        """
        operation = CLIENT_OPERATIONS.get(request.operation)
        if operation is None:
            refused = self._refused(request, f"Unsupported workflow operation: {request.operation}")
            return refused, None
        if request.operation in _FILE_MAINTENANCE and getattr(self.store, "shared_log", False):
            refused = self._refused(
                request,
                f"{request.operation} works on a SQLite log only; back up a PostgreSQL log"
                " with pg_dump or pwf log export",
            )
            return refused, None
        if request.operation in ("state.prune", "state.backup"):
            return self._maintain(request, operation.handler, now), None
        if operation.route in (Route.EXECUTED, Route.MAINTENANCE):
            handler = operation.handler
            if request.operation == "host.status" and self.status_live is not None:
                handler = self._served_status
            try:
                return self._adopt_or_execute(request, operation.route, handler, now), None
            except (sqlite3.IntegrityError, StoreError) as error:
                # Recording the outcome stored a blob another media type holds: the
                # whole batch is gone with its own transaction, as in the original.
                # In a group's transaction the group's savepoint undoes it instead.
                if self.shared is not None or CONFLICT_SIGNATURE not in str(error):
                    raise
                return self._refused(request, BLOB_CONFLICT), None
        if request.operation in ("state.status", "state.verify"):
            return self._state_read(request, now), None
        handler = READS.get(request.operation, operation.handler)
        return self._direct(request, handler, now, connection)

    def _served_status(self, ctx: Context, _request: ClientRequest) -> Result:
        """``host.status`` of a served host: exactly the members of HOST §3.1."""
        assert self.status_live is not None
        return Result(receipt=served_host_status(ctx, self.status_live()))

    def _state_read(self, request: ClientRequest, now: int) -> ClientResponse:
        """``state.status`` and ``state.verify`` ignore their payload (HOST §2)."""
        return state_read(self.store, request, now, verifier=self.verifier, overview=self.overview)

    def answer(self, request: ClientRequest, now: int, *, wait_ms: int = 0) -> bytes:
        """Answer one request as its framed line (canonical bytes and a newline).

        Raises:
            AnswerTooLargeError: the request ran, but its answer's line exceeds 1 MiB.
        """
        response = self.request(request, now, wait_ms=wait_ms)
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

    def _refused(
        self, request: ClientRequest, error: str, outcome: str = "rejected"
    ) -> ClientResponse:
        return ClientResponse(
            request_id=request.request_id, outcome=outcome, error=collapse_error(error)
        )

    def _cause(self, request: ClientRequest) -> Cause:
        return Cause(
            operation=request.operation,
            request_id=request.request_id,
            client_id=request.client_id,
            idempotency_key=request.idempotency_key,
            fingerprint=request.fingerprint,
        )

    def _adopt_or_execute(
        self,
        request: ClientRequest,
        route: Route,
        handler: Callable[[Context, ClientRequest], Result],
        now: int,
    ) -> ClientResponse:
        with self._transaction() as tx:
            ctx = _context(tx, now, self.actor, self._cause(request), self._mint)
            closed = self.gate(ctx) if self.gate is not None else None
            if closed is not None and route is Route.EXECUTED:
                return self._refused(request, closed, "unavailable")
            stored = self._replay(ctx, request)
            if stored is not None:
                return stored
            if closed is not None:
                return self._refused(request, closed, "unavailable")
            try:
                with tx.savepoint():
                    result = handler(ctx, request)
                    if result.effect is not None:
                        self._effect(*result.effect)
            except (CommandError, sqlite3.IntegrityError) as error:
                error = _refusal(error)
                if route is Route.EXECUTED:
                    return self._refused(request, str(error), error.outcome)
                result = Result(outcome="rejected", error=str(error))
            return self._record(ctx, request, result)

    def _record(self, ctx: Context, request: ClientRequest, result: Result) -> ClientResponse:
        """Stage ``command.recorded`` for a recorded outcome and answer with it."""
        ctx.emit(
            CommandRecorded(
                request_id=request.request_id,
                client_id=request.client_id,
                operation=request.operation,
                idempotency_key=request.idempotency_key,
                fingerprint=request.fingerprint,
                outcome=result.outcome,  # type: ignore[arg-type]
                run_id=result.run_id or request.run_id,
                revision=result.revision,
                receipt=canonical.MISSING
                if result.receipt is canonical.MISSING
                else canonical.raw(result.receipt),
                error=result.error,
                host_epoch=self.host_epoch,
            )
        )
        return ClientResponse(
            request_id=request.request_id,
            outcome=result.outcome,
            revision=result.revision,
            receipt=result.receipt,
            error=result.error,
        )

    def _replay(self, ctx: Context, request: ClientRequest) -> ClientResponse | None:
        """DOMAIN §7.2 steps 1 and 2, read under the write lock."""
        select = (
            "SELECT h.request_fingerprint, h.outcome, h.accepted_revision,"
            " r.content AS receipt, e.content AS error FROM host_commands h"
            " LEFT JOIN blobs r ON r.blob_hash = h.receipt_hash"
            " LEFT JOIN blobs e ON e.blob_hash = h.error_hash"
        )
        fingerprint = bytes.fromhex(request.fingerprint)
        row = ctx.one(f"{select} WHERE h.request_id = ?", request.request_id)
        if row is not None and bytes(row["request_fingerprint"]) != fingerprint:
            return self._refused(request, "Request ID was reused with another payload", "conflict")
        if row is None:
            row = ctx.one(
                f"{select} WHERE h.client_id = ? AND h.idempotency_key = ?",
                request.client_id,
                request.idempotency_key,
            )
            if row is not None and bytes(row["request_fingerprint"]) != fingerprint:
                return self._refused(
                    request, "Idempotency key was reused with another payload", "conflict"
                )
        if row is None:
            return None
        outcome = "adopted" if row["outcome"] in ("accepted", "adopted") else row["outcome"]
        return ClientResponse(
            request_id=request.request_id,
            outcome=outcome,
            revision=row["accepted_revision"],
            receipt=_json(row["receipt"]),
            error=_text(row["error"]),
        )

    def _direct(
        self,
        request: ClientRequest,
        handler: Callable[[Context, ClientRequest], Result],
        now: int,
        connection: str | None = None,
    ) -> tuple[ClientResponse, str | None]:
        """Operations with their own idempotency: nothing is recorded in host_commands."""
        with self._transaction() as tx:
            ctx = _context(
                tx, now, self.actor, self._cause(request), self._mint, connection=connection
            )
            try:
                with tx.savepoint():
                    result = handler(ctx, request)
            except (CommandError, sqlite3.IntegrityError) as error:
                error = _refusal(error)
                return self._refused(request, str(error), error.outcome), None
        response = ClientResponse(
            request_id=request.request_id,
            outcome=result.outcome,
            revision=result.revision,
            receipt=result.receipt,
            error=None if result.error is None else collapse_error(result.error),
        )
        return response, result.awaiting

    def _await_verdict(
        self, request: ClientRequest, submission_id: str, started: ClientResponse, wait_ms: int
    ) -> ClientResponse:
        """Wait (bounded) for the worker's verdict on a validating submission (ADR 0011)."""
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            verdict = self.verdict(request, submission_id, started)
            if verdict is not None:
                return verdict
            if time.monotonic() >= deadline:
                return self._refused(
                    request,
                    f"Workflow submission {submission_id} is still validating;"
                    " retry with the same idempotency key for its verdict",
                    "unavailable",
                )
            time.sleep(_POLL_SECONDS)

    def verdict(
        self, request: ClientRequest, submission_id: str, started: ClientResponse
    ) -> ClientResponse | None:
        """The answer of a submission once its worker's verdict is recorded, else None."""
        row = self.store.connection.execute(
            "SELECT s.outcome, b.content FROM interactive_submissions s"
            " LEFT JOIN blobs b ON b.blob_hash = s.receipt_hash WHERE s.submission_id = ?",
            (submission_id,),
        ).fetchone()
        if row is not None and row[0] == "accepted":
            return msgspec.structs.replace(started, receipt=_json(row[1]))
        if row is None or row[0] != "rejected":
            return None
        receipt = _json(row[1])
        error = receipt.get("error") if isinstance(receipt, dict) else None
        return ClientResponse(
            request_id=request.request_id,
            outcome="rejected",
            revision=started.revision,
            receipt=receipt,
            error=error
            if isinstance(error, str) and error
            else "Workflow step output failed validation",
        )

    def _maintain(
        self,
        request: ClientRequest,
        handler: Callable[[Context, ClientRequest], Result],
        now: int,
    ) -> ClientResponse:
        """``state.backup`` and ``state.prune`` (DOMAIN §13, ADR 0018, 0022).

        Recorded like any maintenance command, but their file work runs
        outside the write transactions that adopt and record them.
        """
        from pwf.host._backup import Recording, run_backup  # noqa: PLC0415 - only maintenance

        cause = self._cause(request)
        recording = Recording(
            open=lambda tx: _context(tx, now, self.actor, cause, self._mint),
            adopt=self._replay,
            record=self._record,
            validate=handler,
            closed=self._closed_answer,
        )
        if request.operation == "state.backup":
            return run_backup(self.store, request, recording, replace=self.replace_backups)
        from pwf.host._prune import run_prune  # noqa: PLC0415 - only state.prune

        return run_prune(self.store, request, now, recording, actor=self.actor, cause=cause)

    def _closed_answer(self, ctx: Context, request: ClientRequest) -> ClientResponse | None:
        """``unavailable`` while a served host is stopping or has lost its claim."""
        closed = self.gate(ctx) if self.gate is not None else None
        return None if closed is None else self._refused(request, closed, "unavailable")

    def _effect(self, kind: str, target: str) -> None:
        """File work a maintenance command asked for, done while the write lock is held."""
        if kind != "backup":
            raise CommandError(f"Unknown maintenance effect: {kind}")
        from pwf.host._backup import backup_database  # noqa: PLC0415 - only state.backup

        backup_database(
            self.store.path, self.store.connection, Path(target), replace=self.replace_backups
        )

    # ------------------------------------------------------------------ sessions and time

    def session_view(
        self, session_id: str, now: int, epoch: str | None = None
    ) -> dict[str, object]:
        """The session snapshot a watch publishes, as coordinator ``epoch`` (or a viewer) sees it.

        Direct mode has no connection to push it on; scripts and tests read it here.
        """

        def read_only(_events: object) -> object:
            raise CommandError("a session view reads only")

        ctx = Context(RowReader(self.store.connection), read_only, now)
        return session_view(ctx, session_id, epoch)

    def detach(self, session_id: str, now: int, epoch: str | None = None) -> bool:
        """The coordinator's connection ended (§10.5); False when there was none to detach."""
        with self._transaction() as tx:
            ctx = _context(tx, now, self.actor, Cause(operation="session.detach"))
            return detach(ctx, session_id, epoch)

    def expire(self, now: int) -> list[tuple[str, str]]:
        """Begin the timeout of every expired interaction (§10.7); return (run, session) pairs."""
        with self._transaction() as tx:
            ctx = _context(tx, now, self.actor, Cause(operation="host.expire"))
            try:
                with tx.savepoint():
                    return begin_timeouts(ctx)
            except sqlite3.IntegrityError as error:
                raise _refusal(error) from None

    def recover(self, now: int, heartbeat: int | None) -> int:
        """Host recovery (§10.6) after a host whose last heartbeat was ``heartbeat``."""
        with self._transaction() as tx:
            ctx = _context(tx, now, self.actor, Cause(operation="host.recover"))
            return recover_turns(ctx, heartbeat)

    # ------------------------------------------------------------------ workers

    def launch(self, run_id: str, now: int, host_epoch: int | None = None) -> LaunchEnvelope:
        """Claim a queued or resumable parked run for a new worker and return its envelope.

        ``host_epoch`` names the served host that supervises the worker.
        """
        with self._transaction() as tx:
            cause = Cause(operation="worker.launch")
            ctx = _context(tx, now, Actor(type="host", id=self.actor.id), cause)
            try:
                with tx.savepoint():
                    return launch_run(ctx, run_id, self.new_epoch(), LEASE_MS, host_epoch)
            except sqlite3.IntegrityError as error:
                raise _refusal(error) from None

    def supervise(self, operation: str, now: int, decide: Callable[[Context], T]) -> T:
        """One decision about supervised worker processes, in its own batch (HOST §7).

        ``decide`` is one of :mod:`pwf.commands.supervision`'s functions bound
        to its arguments; a refusal leaves nothing behind.
        """
        with self._transaction() as tx:
            ctx = _context(tx, now, self.actor, Cause(operation=operation))
            try:
                with tx.savepoint():
                    return decide(ctx)
            except sqlite3.IntegrityError as error:
                raise _refusal(error) from None

    def worker(self, message: WorkerMessage, now: int) -> WorkerResponse:
        """Answer one worker message (DOMAIN §14 handling order)."""
        try:
            return self._worker(message, now)
        except (sqlite3.IntegrityError, StoreError) as error:
            if self.shared is not None or CONFLICT_SIGNATURE not in str(error):
                raise
            return WorkerResponse(
                message_id=message.message_id, outcome="rejected", error=BLOB_CONFLICT
            )

    def _worker(self, message: WorkerMessage, now: int) -> WorkerResponse:
        with self._transaction() as tx:
            cause = Cause(
                operation=message.operation,
                worker_epoch=message.worker_epoch,
                message_id=message.message_id,
                fingerprint=message.fingerprint,
            )
            ctx = _context(tx, now, Actor(type="system", id=message.worker_epoch), cause)
            early = check_worker(ctx, message)
            if early is not None:
                return early
            try:
                with tx.savepoint():
                    result = self._worker_result(ctx, message)
            except (CommandError, sqlite3.IntegrityError) as error:
                error = _refusal(error)
                result = Result(outcome="rejected", error=str(error))
            revision = (
                result.revision
                if result.revision is not None
                else run_revision(ctx, message.run_id)
            )
            lease = now + LEASE_MS if result.outcome in ("accepted", "adopted") else None
            ctx.emit(
                WorkerMessageRecorded(
                    run_id=message.run_id,
                    worker_epoch=message.worker_epoch,
                    message_id=message.message_id,
                    operation=message.operation,
                    fingerprint=message.fingerprint,
                    outcome=result.outcome,  # type: ignore[arg-type]
                    revision=revision,
                    result=canonical.MISSING
                    if result.receipt is canonical.MISSING
                    else canonical.raw(result.receipt),
                    error=result.error,
                    lease_expires_at=lease if _still_owner(ctx, message) else None,
                )
            )
        return WorkerResponse(
            message_id=message.message_id,
            outcome=result.outcome,
            revision=revision,
            result=result.receipt,
            error=result.error,
        )

    def _worker_result(self, ctx: Context, message: WorkerMessage) -> Result:
        handler = WORKER_OPERATIONS.get(message.operation)
        if handler is None:
            raise CommandError("Unknown worker operation")
        return handler(ctx, message)


def _refusal(error: CommandError | sqlite3.IntegrityError) -> CommandError:
    """A projection constraint that stopped a batch is a refusal, not a crash.

    Deciders check every rule first; a constraint firing here means one was
    missed, and the savepoint has already dropped the handler's events.
    """
    if isinstance(error, CommandError):
        return error
    if CONFLICT_SIGNATURE in str(error):
        return CommandError(BLOB_CONFLICT)
    return CommandError(f"Workflow state constraint failed: {error}")


def _still_owner(ctx: Context, message: WorkerMessage) -> bool:
    owner = ctx.value("SELECT owner_worker_epoch FROM run_queue WHERE run_id = ?", message.run_id)
    return bool(owner == message.worker_epoch)
