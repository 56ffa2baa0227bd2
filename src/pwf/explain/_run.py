"""What a run's rules look at, and the run diagnosis rules in evaluation order (ADR 0016)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands.ids import terminal_source_id
from pwf.commands.runs import TERMINAL
from pwf.events import (
    InteractionRequested,
    InteractionTimeoutStarted,
    RunClaimed,
    RunFinished,
    RunPaused,
    RunQueueDoneForContinuation,
    RunReserved,
    RunResumed,
    RunWaiting,
    WorkerEnded,
    WorkerMessageRecorded,
)
from pwf.explain._facts import Facts, Seen, evaluate, find
from pwf.explain._interaction import INTERACTION_RULES
from pwf.explain._report import Finding
from pwf.explain._summaries import short

if TYPE_CHECKING:
    from pwf.commands import Context, Row
    from pwf.explain._facts import Log

__all__ = ["RUN_RULES", "RunFacts"]


class RunFacts(Seen):
    """What the rules of one run look at."""

    def __init__(self, ctx: Context, run: Row, log: Log) -> None:
        super().__init__(ctx, log)
        self.run = run
        self.run_id: str = run["run_id"]
        self.queue = ctx.one("SELECT * FROM run_queue WHERE run_id = ?", self.run_id)
        self.checkpoint = ctx.one("SELECT * FROM run_checkpoints WHERE run_id = ?", self.run_id)
        self.requests = ctx.all(
            "SELECT * FROM interactive_requests WHERE run_id = ? AND status = 'pending'"
            " ORDER BY created_at, request_id",
            self.run_id,
        )
        self.terminal = ctx.one(
            "SELECT * FROM workflow_messages WHERE source_id = ? ORDER BY order_number DESC",
            terminal_source_id(self.run_id),
        )

    @property
    def owner(self) -> str | None:
        """The worker epoch that owns the run's queue row, if any."""
        queue = self.queue
        return None if queue is None else queue["owner_worker_epoch"]

    def lease_since(self) -> int | None:
        """The seq of the event that set the owner's current lease."""
        seqs = [self.log.last(RunClaimed, worker_epoch=self.owner)]
        seqs += [
            entry.seq
            for entry in self.log.entries
            if isinstance(entry.event, WorkerMessageRecorded)
            and entry.event.worker_epoch == self.owner
            and entry.event.lease_expires_at is not None
        ]
        return max((seq for seq in seqs if seq is not None), default=None)


def _terminal(facts: RunFacts) -> Finding | None:
    status = facts.run["status"]
    if status not in TERMINAL:
        return None
    message = facts.terminal
    if message is None:
        shown = "no terminal message"
    else:
        shown = f"terminal message {short(message['workflow_message_id'])} {message['status']}"
    return find("terminal", f"the run ended {status} ({shown})", facts.log.last(RunFinished))


def _continued(facts: RunFacts) -> Finding | None:
    if facts.queue is None or facts.queue["status"] != "done":
        return None
    since = facts.log.last(RunQueueDoneForContinuation)
    event = facts.log.event(since)
    child = event.continuation_run_id if isinstance(event, RunQueueDoneForContinuation) else "?"
    return find("continued", f"the run handed its work to continuation {child}", since)


def _run_paused_run(facts: RunFacts) -> Finding | None:
    if not facts.run["paused"]:
        return None
    return find(
        "run-paused",
        "the run is paused on a pending interaction; run.resume continues it",
        facts.log.last(RunPaused),
    )


def _holds(facts: RunFacts) -> Finding | None:
    queue = facts.queue
    if facts.owner is None or queue is None or queue["lease_expires_at"] <= facts.now:
        return None
    return find(
        "worker-holds-run",
        f"worker {facts.owner} holds the run until {queue['lease_expires_at']}"
        f" (queue {queue['status']})",
        facts.lease_since(),
        queue["lease_expires_at"],
    )


def _lease_expired(facts: RunFacts) -> Finding | None:
    queue = facts.queue
    if facts.owner is None or queue is None:
        return None
    return find(
        "worker-lease-expired",
        f"worker {facts.owner}'s lease ended at {queue['lease_expires_at']}:"
        " a new worker may claim the run",
        facts.lease_since(),
        queue["lease_expires_at"],
    )


def _at_checkpoint(facts: RunFacts) -> Finding | None:
    checkpoint = facts.checkpoint
    if checkpoint is None or checkpoint["continuation_run_id"] is not None:
        return None
    return find(
        "parked-at-checkpoint",
        f"the run waits at checkpoint {checkpoint['node_id']} for checkpoint.answer",
        facts.log.last(RunWaiting, checkpoint_node_id=checkpoint["node_id"]),
    )


def _on_interaction(facts: RunFacts) -> Finding | None:
    if not facts.requests:
        return None
    request = facts.requests[0]
    inner = Facts(facts.ctx, request, facts.log)
    return Finding(
        rule="parked-on-interaction",
        summary=f"the run waits on interaction {request['request_id']}",
        since_seq=facts.log.last(InteractionRequested, request_id=request["request_id"]),
        request_id=request["request_id"],
        diagnosis=evaluate(INTERACTION_RULES, inner),
    )


def _queued(facts: RunFacts) -> Finding | None:
    queue = facts.queue
    if queue is None or queue["status"] in ("done", "failed", "cancelled"):
        return None
    kinds = (RunReserved, RunWaiting, RunResumed, InteractionTimeoutStarted, WorkerEnded)
    since = max(
        (entry.seq for entry in facts.log.entries if isinstance(entry.event, kinds)),
        default=None,
    )
    return find(
        "queued-awaiting-worker",
        f"the run has work for a worker and none holds it (queue {queue['status']}):"
        f" pwf worker launch {facts.run_id}",
        since,
    )


RUN_RULES: Final = (
    ("terminal", _terminal, True),
    ("continued", _continued, True),
    ("run-paused", _run_paused_run, True),
    ("worker-holds-run", _holds, True),
    ("worker-lease-expired", _lease_expired, True),
    ("parked-at-checkpoint", _at_checkpoint, True),
    ("parked-on-interaction", _on_interaction, True),
    ("queued-awaiting-worker", _queued, True),
)
"""The run rules in evaluation order; the first that holds is the diagnosis (ADR 0016)."""
