"""Worker protocol: launch, the handling order, and the routing of what a worker sends (§9, §14).

Imports commands, events, protocol and errors.  Workers are external
processes; a worker obtains its launch envelope by claiming a run here.
The operations on node attempts and interactions are in
:mod:`pwf.commands.nodes`; the run's own (ready, exiting, read, park,
finished) are here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.commands import Context, Result, refuse
from pwf.commands.interactions import finish_validation
from pwf.commands.nodes import (
    create_decision,
    interaction_accept,
    interaction_reject,
    interaction_request,
    node_failed,
    node_finished,
    node_started,
    notification_request,
)
from pwf.commands.payload import members, members_or_none, text
from pwf.commands.rows import (
    AnsweredRow,
    CandidateRow,
    Query,
    QueueRow,
    RunRow,
    WorkerRow,
    select,
)
from pwf.commands.runcontrol import finish_run
from pwf.commands.runs import TERMINAL, get_run, queue_of, revision_of, source_of
from pwf.commands.sources import INVALID_SOURCE
from pwf.commands.views import run_view, stored_json
from pwf.events import (
    AttemptChanged,
    RunClaimed,
    RunStarted,
    RunWaiting,
    WorkerEnded,
    one_of,
)
from pwf.protocol.worker import LaunchEnvelope, WorkerResponse

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.protocol.worker import WorkerMessage

__all__ = ["WORKER_OPERATIONS", "check_worker", "claimable", "launch_run", "park", "run_revision"]

_NO_REVISION_CHECK: Final = frozenset({"worker.ready", "worker.exiting"})


def run_revision(ctx: Context, run_id: str) -> int | None:
    """The run's revision, or None when the run is unknown."""
    value = ctx.value("SELECT revision FROM runs WHERE run_id = ?", run_id)
    return None if value is None else int(value)


def launch_run(
    ctx: Context, run_id: str, worker_epoch: str, lease_ms: int, host_epoch: int | None = None
) -> LaunchEnvelope:
    """Claim a queued run, or a parked one with work for a worker, for a new worker epoch.

    ``host_epoch`` names the served host that will supervise the worker.
    """
    run, queue = _launchable(ctx, run_id)
    stale = ctx.fetch(_ACTIVE_WORKER, run_id)
    if stale is not None:
        ctx.emit(WorkerEnded(run_id=run_id, worker_epoch=stale.worker_epoch, status="timedOut"))
    input_hash = "sha256:" + run.input_hash.hex()
    source = source_of(ctx, run)
    if not isinstance(source, dict):
        raise refuse(INVALID_SOURCE)  # a run reserved while pwf still took text
    envelope = LaunchEnvelope(
        run_id=run_id,
        generation=queue.generation + 1,
        worker_epoch=worker_epoch,
        project_path=run.project_path,
        workflow_source=source,
        definition_digest=run.definition_digest,
        input_hash=input_hash,
    )
    ctx.emit(
        RunClaimed(
            run_id=run_id,
            generation=envelope.generation,
            worker_epoch=worker_epoch,
            lease_expires_at=ctx.now + lease_ms,
            launch=canonical.raw(envelope),
            host_epoch=host_epoch,
        )
    )
    return envelope


_ACTIVE_WORKER: Final = select(WorkerRow, "WHERE run_id = ? AND status IN ('starting', 'running')")


def _launchable(ctx: Context, run_id: str) -> tuple[RunRow, QueueRow]:
    """The run and its queue entry when a new worker may claim it, else the refusal."""
    run = get_run(ctx, run_id)
    queue = queue_of(ctx, run_id)
    if run is None or queue is None:
        raise refuse(f"Workflow run not found: {run_id}")
    if queue.owner_worker_epoch is not None and queue.held(ctx.now):
        raise refuse(f"Workflow run {run_id} already has a live worker")
    if not claimable(ctx, run, queue):
        raise refuse(f"Workflow run {run_id} has nothing for a worker to do (queue {queue.status})")
    origin = run.origin_session_id
    if (
        queue.status == "parked"
        and origin is not None
        and ctx.one(
            "SELECT 1 FROM run_queue WHERE origin_session_id = ? AND run_id != ?"
            " AND status IN ('queued', 'starting', 'running')",
            origin,
            run_id,
        )
    ):
        raise refuse(f"Workflow session {origin} already has an active run")
    return run, queue


_CHECKPOINTED: Final = "SELECT 1 FROM run_checkpoints WHERE run_id = {run}"
"""A checkpoint holds the run: it is not claimable while parked."""
_UNANSWERED: Final = (
    "SELECT 1 FROM interactive_requests r WHERE r.run_id = {run} AND r.status = 'pending'"
    " AND NOT EXISTS (SELECT 1 FROM interactive_submissions s"
    " WHERE s.request_id = r.request_id AND s.outcome = 'validating')"
)
"""A request waits for an answer no submission is validating: the parked run waits for it."""

_ENDED: Final = ", ".join(f"'{status}'" for status in TERMINAL)
CLAIM_CANDIDATES: Final = (
    "SELECT q.run_id FROM run_queue q WHERE q.status IN ('queued', 'parked')"  # noqa: S608 - constants
    f" AND (q.status = 'queued' OR (NOT EXISTS ({_UNANSWERED.format(run='q.run_id')})"
    f" AND NOT EXISTS ({_CHECKPOINTED.format(run='q.run_id')})"
    " AND EXISTS (SELECT 1 FROM runs u WHERE u.run_id = q.run_id AND u.paused = 0"
    f" AND u.status NOT IN ({_ENDED}))))"
    " ORDER BY q.created_at, q.run_id"
)
"""The queued runs and the parked runs :func:`claimable` takes, oldest first (§7.1), in SQL.

A parked run that waits for an answer, is checkpointed, paused or ended is
left out by SQLite's own probes, the commonest first, where every one of
them was read row by row at every claim: a host with 10 000 runs waiting
for people spent a quarter of a second of its writer on each (ADR 0117).
Each candidate is still judged by :func:`claimable`: the two rules are the
same strings.
"""


def claimable(ctx: Context, run: RunRow, queue: QueueRow) -> bool:
    """Queued runs; parked runs that are not paused and have no unanswered request."""
    if queue.status in ("queued", "starting", "running"):
        # A starting entry without an owner is a timed-out interaction waiting for
        # its worker (§10.7); an owned one has a worker whose lease ran out.
        return queue.status != "running" or queue.owner_worker_epoch is not None
    if queue.status != "parked" or run.paused or run.status in TERMINAL:
        return False
    if ctx.one(_CHECKPOINTED.format(run="?"), run.run_id):
        return False
    return ctx.one(_UNANSWERED.format(run="?"), run.run_id) is None


_ACTIVE_EPOCH: Final = select(
    WorkerRow, "WHERE worker_epoch = ? AND status IN ('starting', 'running')"
)
_ANSWERED: Final = Query(
    AnsweredRow,
    "SELECT m.request_fingerprint, m.outcome, m.accepted_revision, r.content AS result,"
    " e.content AS error FROM worker_messages m"
    " LEFT JOIN blobs r ON r.blob_hash = m.result_hash"
    " LEFT JOIN blobs e ON e.blob_hash = m.error_hash"
    " WHERE m.worker_epoch = ? AND m.message_id = ?",
)


def check_worker(ctx: Context, message: WorkerMessage) -> WorkerResponse | None:
    """Steps 1 and 2 of §14: the active worker, then a stored response for the message id."""
    worker = ctx.fetch(_ACTIVE_EPOCH, message.worker_epoch)
    if worker is None or (worker.run_id, worker.generation) != (
        message.run_id,
        message.generation,
    ):
        return WorkerResponse(
            message_id=message.message_id, outcome="claimLost", error="Worker epoch is stale"
        )
    stored = ctx.fetch(_ANSWERED, message.worker_epoch, message.message_id)
    if stored is None:
        return None
    if stored.request_fingerprint.hex() != message.fingerprint:
        return WorkerResponse(
            message_id=message.message_id,
            outcome="rejected",
            error="Worker message ID was reused with another payload",
        )
    return WorkerResponse(
        message_id=message.message_id,
        outcome=stored.outcome,
        revision=stored.accepted_revision,
        result=canonical.MISSING if stored.result is None else canonical.decode(stored.result),
        error=None if stored.error is None else stored.error.decode(),
    )


def _guarded(
    handler: Callable[[Context, WorkerMessage], Result],
) -> Callable[[Context, WorkerMessage], Result]:
    """Revision check, then claim check, then the handler (§14 step 3)."""

    def run(ctx: Context, message: WorkerMessage) -> Result:
        current = run_revision(ctx, message.run_id)
        if message.operation not in _NO_REVISION_CHECK and current != message.expected_revision:
            return Result(
                outcome="rejected",
                error=f"Workflow run revision conflict: expected {message.expected_revision},"
                f" got {current}",
                revision=current,
            )
        queue = queue_of(ctx, message.run_id)
        claim_ok = (
            queue is not None
            and queue.owner_worker_epoch == message.worker_epoch
            and queue.held(ctx.now)
        )
        if not claim_ok and message.operation != "worker.exiting":
            return Result(outcome="claimLost", error="Run claim expired")
        return handler(ctx, message)

    return run


def _view(ctx: Context, run_id: str) -> dict[str, object]:
    run = get_run(ctx, run_id)
    assert run is not None
    return run_view(ctx, run)


# ------------------------------------------------------------------ operations


def worker_ready(ctx: Context, message: WorkerMessage) -> Result:
    """``worker.ready``: the run and its queue are running.

    When a submission waits for validation, the receipt names it as
    ``candidateInteraction`` (HOST §7.5): its request, attempt, contract and value.
    """
    ctx.emit(RunStarted(run_id=message.run_id, worker_epoch=message.worker_epoch, detail="running"))
    receipt: dict[str, object] = {"generation": message.generation, "runId": message.run_id}
    candidate = ctx.fetch(_CANDIDATE, message.run_id)
    if candidate is not None:
        receipt["candidateInteraction"] = {
            "attemptId": candidate.attempt_id,
            "contract": stored_json(ctx, candidate.contract_hash),
            "requestId": candidate.request_id,
            "submissionId": candidate.submission_id,
            "value": stored_json(ctx, candidate.payload_hash),
        }
    return Result(receipt=receipt)


_CANDIDATE: Final = Query(
    CandidateRow,
    "SELECT s.submission_id, s.payload_hash, r.request_id, r.attempt_id, r.contract_hash"
    " FROM interactive_submissions s JOIN interactive_requests r"
    " ON r.request_id = s.request_id WHERE r.run_id = ? AND s.outcome = 'validating'"
    " ORDER BY s.submitted_at, s.submission_id LIMIT 1",
)


def worker_exiting(ctx: Context, message: WorkerMessage) -> Result:
    """``worker.exiting``: end the worker; an unfinished validation is rejected (§9.3)."""
    payload = members_or_none(message.payload)
    outcome = payload.get("outcome") if isinstance(payload.get("outcome"), str) else "exited"
    code = payload.get("exitCode")
    ctx.emit(
        WorkerEnded(
            run_id=message.run_id,
            worker_epoch=message.worker_epoch,
            status="exited",
            exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        )
    )
    run = get_run(ctx, message.run_id)
    if run is None or run.status in TERMINAL or run.status == "waiting":
        return Result(receipt={"exited": True})
    validating = ctx.all(
        "SELECT s.submission_id FROM interactive_submissions s JOIN interactive_requests r"
        " ON r.request_id = s.request_id WHERE r.run_id = ? AND s.outcome = 'validating'",
        message.run_id,
    )
    error = f"Workflow worker {outcome} before it completed interaction validation"
    for row in validating:
        finish_validation(
            ctx, row["submission_id"], "rejected", {"error": error, "status": "rejected"}
        )
    park(ctx, message.run_id, error if validating else f"Workflow worker {outcome}")
    return Result(receipt={"exited": True})


def park(ctx: Context, run_id: str, detail: str) -> None:
    """Park the run for a new worker epoch: unfinished attempts wait, the run waits."""
    for attempt in ctx.all(
        "SELECT attempt_id FROM node_attempts WHERE run_id = ?"
        " AND status IN ('running', 'interrupted', 'pending')",
        run_id,
    ):
        ctx.emit(AttemptChanged(run_id=run_id, attempt_id=attempt["attempt_id"], status="waiting"))
    ctx.emit(RunWaiting(run_id=run_id, detail=detail))


def read_run(ctx: Context, message: WorkerMessage) -> Result:
    """``store.readRun``: the run view."""
    return Result(receipt=_view(ctx, message.run_id))


def run_park(ctx: Context, message: WorkerMessage) -> Result:
    """``run.park``: the run waits at an ordinary checkpoint for ``checkpoint.answer``."""
    payload = members(message.payload)
    node_id = text(payload, "checkpoint")
    ctx.emit(
        RunWaiting(
            run_id=message.run_id,
            detail=f"waiting at checkpoint {node_id}",
            checkpoint_node_id=node_id,
        )
    )
    ctx.emit(WorkerEnded(run_id=message.run_id, worker_epoch=message.worker_epoch, status="exited"))
    return Result(receipt={"checkpoint": node_id, "runId": message.run_id})


def run_finished(ctx: Context, message: WorkerMessage) -> Result:
    """``run.finished``: the run ends; interactive runs post their terminal result (§12.1)."""
    payload = members(message.payload)
    status = one_of(payload.get("status"), TERMINAL)
    if status is None:
        raise refuse("Workflow run finish status is invalid")
    reason = payload.get("reason")
    finish_run(
        ctx,
        message.run_id,
        status=status,
        detail=status,
        final_output=payload.get("finalOutput"),
        error=payload.get("error"),
        error_code=code if isinstance(code := payload.get("errorCode"), str) else None,
        reason=reason if isinstance(reason, str) else None,
    )
    ctx.emit(WorkerEnded(run_id=message.run_id, worker_epoch=message.worker_epoch, status="exited"))
    return Result(
        receipt={"runId": message.run_id, "status": status},
        revision=revision_of(ctx, message.run_id),
    )


WORKER_OPERATIONS: Final[dict[str, Callable[[Context, WorkerMessage], Result]]] = {
    name: _guarded(handler)
    for name, handler in {
        "worker.ready": worker_ready,
        "worker.exiting": worker_exiting,
        "store.readRun": read_run,
        "node.started": node_started,
        "node.finished": node_finished,
        "node.failed": node_failed,
        "interaction.request": interaction_request,
        "store.createHumanDecisionRequest": create_decision,
        "interaction.accept": interaction_accept,
        "interaction.reject": interaction_reject,
        "notification.request": notification_request,
        "run.park": run_park,
        "run.finished": run_finished,
    }.items()
}
