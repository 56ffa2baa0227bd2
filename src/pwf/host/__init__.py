"""The command path: adopt-or-execute, decide, append, project, respond (DOMAIN §7, §14).

Imports commands, protocol, events, the store and the read model.  Every
client request and worker message runs inside one write transaction: the
idempotency lookup is repeated under the write lock, the decider stages its
events (projected as they are staged), and the batch ends with the record of
the outcome, so two processes racing with one key get one ``accepted`` and
one ``adopted``.  Direct mode (``pwf request`` / ``pwf worker``) holds no
host claim (ADR 0010) and is refused while a served host holds it.

:class:`Host` is the facade; its rooms hold the jobs: client routing
(:mod:`._routing`), idempotent recording (:mod:`._recording`), verdict
polling (:mod:`._verdict`), maintenance orchestration (:mod:`._maintenance`),
worker messages and launch (:mod:`._workers`), sessions and time
(:mod:`._sessions`) and direct mode's guard (:mod:`._direct`).
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from pwf.events import Actor
from pwf.host import _maintenance, _routing, _sessions, _verdict, _workers
from pwf.host._direct import refuse_if_served
from pwf.host._lock import acquire_lock
from pwf.host._maintenance import Handoff, run_handoff
from pwf.host._workers import LEASE_MS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pwf.commands import Context, Result
    from pwf.commands.processes import ProcessFacts
    from pwf.host._compacting import Prepared
    from pwf.host.prune import PruneHandoff
    from pwf.protocol.client import ClientRequest, ClientResponse
    from pwf.protocol.worker import LaunchEnvelope, WorkerMessage, WorkerResponse
    from pwf.store import EventStore, StoreTransaction
    from pwf.store.unit import Work
    from pwf.views.status import Live

__all__ = [
    "DIRECT_ACTOR",
    "LEASE_MS",
    "Handoff",
    "Host",
    "acquire_lock",
    "refuse_if_served",
    "run_handoff",
]

DIRECT_ACTOR: Final = Actor(type="host", id="pwf-direct")
T = TypeVar("T")
StoreT_co = TypeVar("StoreT_co", bound="EventStore", covariant=True)
"""The store a host is given; the host itself uses only the protocol's members."""


class Host(Generic[StoreT_co]):
    """Runs client requests and worker messages against one store.

    The host is typed against :class:`pwf.store.EventStore`; ``store`` keeps
    the type it was given for the callers that made it.
    """

    def __init__(
        self,
        store: StoreT_co,
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
        self.shared: StoreTransaction | None = None
        """A group's open write transaction: each decision is then its own batch in it."""
        self.gate: Callable[[Context], str | None] | None = None
        """Why executed and maintenance commands are ``unavailable`` now (a served host)."""
        self.verifier: Callable[[EventStore], str | None] | None = None
        """What ``state.verify`` runs after SQLite's integrity check (default: the chain)."""
        self.overview: Callable[[EventStore, int], object] | None = None
        """What ``state.status`` adds as ``overview`` (what ``pwf status`` shows)."""
        self.status_live: Callable[[], Live] | None = None
        """A served host's own facts: ``host.status`` is then HOST §3.1's receipt."""

    @contextmanager
    def transaction(self) -> Iterator[StoreTransaction]:
        """The write transaction of one decision: its own, or the next batch of a group's."""
        if self.shared is None:
            with self.store.transaction() as tx:
                yield tx
            return
        self.shared.new_batch()
        yield self.shared

    def run(self, work: Work[T]) -> T:
        """One decision as the store's unit of work, or the next batch of a group's (ADR 0087)."""
        if self.shared is None:
            return self.store.run(work)
        self.shared.new_batch()
        return work(self.shared)

    def mint(self, prefix: str) -> str:
        """A fresh id with ``prefix`` (a coordinator epoch), decided here at the edge."""
        return f"{prefix}{self.new_epoch()}"

    def refuse_if_served(self, now: int) -> None:
        """Direct mode's guard: refuse while a live served host holds the claim at ``now``.

        Raises:
            StoreError: a live host owns the database.
        """
        refuse_if_served(self.store, now)

    # ------------------------------------------------------------------ clients

    def request(self, request: ClientRequest, now: int, *, wait_ms: int = 0) -> ClientResponse:
        """Answer one client request as the original would (DOMAIN §7, §8)."""
        response, submission = self.decide(request, now)
        if submission is not None:
            return _verdict.await_verdict(self, request, submission, response, wait_ms)
        return response

    def decide(
        self, request: ClientRequest, now: int, connection: str | None = None
    ) -> tuple[ClientResponse, str | None]:
        """Decide one request; the submission whose verdict its answer awaits, if any.

        ``connection`` is the served connection the request came on: a
        coordinator attached by it belongs to it (DOMAIN §5.13).
        """
        return _routing.decide(self, request, now, connection)

    def answer(self, request: ClientRequest, now: int, *, wait_ms: int = 0) -> bytes:
        """Answer one request as its framed line (canonical bytes and a newline).

        Raises:
            AnswerTooLargeError: the request ran, but its answer's line exceeds 1 MiB.
        """
        return _routing.frame(request, self.request(request, now, wait_ms=wait_ms))

    def verdict(
        self, request: ClientRequest, submission_id: str, started: ClientResponse
    ) -> ClientResponse | None:
        """The answer of a submission once its worker's verdict is recorded, else None."""
        return _verdict.verdict(self, request, submission_id, started)

    def effect(self, kind: str, target: str) -> None:
        """File work a maintenance command asked for, done while the write lock is held."""
        _maintenance.effect(self, kind, target)

    def begin_backup(self, request: ClientRequest, now: int) -> ClientResponse | Handoff:
        """``state.backup`` up to its copy, which the caller makes off this thread (ADR 0114)."""
        from pwf.commands.catalogue import CLIENT_OPERATIONS  # noqa: PLC0415 - served only

        handler = CLIENT_OPERATIONS["state.backup"].handler
        return _maintenance.begin_backup(self, request, handler, now)

    def finish_backup(self, handoff: Handoff, error: str | None) -> ClientResponse:
        """Record a ``state.backup`` whose copy was made, or failed with ``error``."""
        return _maintenance.finish_backup(self, handoff, error)

    def begin_prune(self, request: ClientRequest, now: int) -> ClientResponse | PruneHandoff:
        """``state.prune`` of this host's own file up to its copy and compaction (ADR 0114)."""
        return _maintenance.begin_prune(self, request, now)

    def finish_prune(
        self, handoff: PruneHandoff, prepared: Prepared | Result | None
    ) -> ClientResponse:
        """Install the prepared compaction under the write lock and record the prune."""
        from pwf.host.prune import finish_prune  # noqa: PLC0415 - served only

        return finish_prune(handoff, prepared)

    # ------------------------------------------------------------------ sessions and time

    def session_view(
        self, session_id: str, now: int, epoch: str | None = None
    ) -> dict[str, object]:
        """The session snapshot a watch publishes, as coordinator ``epoch`` (or a viewer) sees it.

        Direct mode has no connection to push it on; scripts and tests read it here.
        """
        return _sessions.view(self, session_id, now, epoch)

    def detach(self, session_id: str, now: int, epoch: str | None = None) -> bool:
        """The coordinator's connection ended (§10.5); False when there was none to detach."""
        return _sessions.detach(self, session_id, now, epoch)

    def expire(self, now: int) -> list[tuple[str, str]]:
        """Begin the timeout of every expired interaction (§10.7); return (run, session) pairs."""
        return _sessions.expire(self, now)

    def recover(self, now: int, heartbeat: int | None) -> int:
        """Host recovery (§10.6) after a host whose last heartbeat was ``heartbeat``."""
        return _sessions.recover(self, now, heartbeat)

    # ------------------------------------------------------------------ workers

    def launch(self, run_id: str, now: int, host_epoch: int | None = None) -> LaunchEnvelope:
        """Claim a queued or resumable parked run for a new worker and return its envelope.

        ``host_epoch`` names the served host that supervises the worker.
        """
        return _workers.launch(self, run_id, now, host_epoch)

    def supervise(self, operation: str, now: int, decide: Callable[[Context], T]) -> T:
        """One decision about supervised worker processes, in its own batch (HOST §7).

        ``decide`` is one of :mod:`pwf.commands.supervision`'s functions bound
        to its arguments; a refusal leaves nothing behind.
        """
        return _workers.supervise(self, operation, now, decide)

    def worker(
        self, message: WorkerMessage, now: int, facts: ProcessFacts | None = None
    ) -> WorkerResponse:
        """Answer one worker message (DOMAIN §14 handling order).

        ``facts`` are what a supervising host knows about the pid a
        ``process.*`` message names (HOST §7.7).
        """
        return _workers.worker(self, message, now, facts)
