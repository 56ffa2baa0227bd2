"""One-line summaries of events, and the timeline items built from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pwf import canonical
from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    BranchReported,
    CommandRecorded,
    CoordinatorAttached,
    CoordinatorDetached,
    DeadlineShifted,
    Event,
    FollowUpClosed,
    FollowUpQueued,
    InteractionCancelled,
    InteractionConsumed,
    InteractionRequested,
    InteractionRevised,
    InteractionSettled,
    InteractionTimeoutStarted,
    MessageCancelled,
    MessageCreated,
    MessageSent,
    RunClaimed,
    RunFinished,
    RunPaused,
    RunQueueDoneForContinuation,
    RunReserved,
    RunResumed,
    RunStarted,
    RunUpdatePublished,
    RunWaiting,
    SubmissionFinished,
    SubmissionRecorded,
    TerminalCleared,
    TurnEnded,
    TurnStarted,
    WorkerEnded,
    WorkerMessageRecorded,
)
from pwf.explain._reading import cause_of
from pwf.explain._report import Item

if TYPE_CHECKING:
    from collections.abc import Callable

    import msgspec

    from pwf.events import Entry

__all__ = ["item", "refusal", "short", "summary"]


def short(message: str) -> str:
    """A message id without its prefix, cut to twelve characters."""
    return message.removeprefix("workflow-message-")[:12]


def _deadline(event: AttemptStarted) -> str:
    deadline = "no deadline" if event.deadline_at is None else f"deadline {event.deadline_at}"
    return f"{event.attempt_id} node {event.node_id} #{event.attempt_number}, {deadline}"


def _finished(event: RunFinished) -> str:
    code = f" ({event.error_code})" if event.error_code else ""
    return f"{event.status}, queue {event.queue_status}: {event.detail}{code}"


def _revised(event: InteractionRevised) -> str:
    text = f"revision {event.revision} ({event.reason})"
    if event.unproductive_turn_ends is not None:
        text += f", unproductive {event.unproductive_turn_ends}"
    return text


def _receipt_error(receipt: msgspec.Raw) -> str:
    value = canonical.decode(receipt)
    error = value.get("error") if isinstance(value, dict) else None
    return f": {error}" if isinstance(error, str) else ""


def _shifted(event: DeadlineShifted) -> str:
    return (
        f"deadline {event.from_deadline} -> {event.to_deadline} (+{event.idle_ms}, {event.cause})"
    )


def _ended(event: TurnEnded) -> str:
    response = event.response_session_entry_id
    tail = "" if response is None else f" (response {response})"
    return (
        f"turn {event.workflow_turn_id} on {short(event.workflow_message_id)}"
        f" ended {event.stop_reason}{tail}"
    )


def _branch(event: BranchReported) -> str:
    idle = "idle" if event.is_idle else "busy"
    pending = "pending messages" if event.has_pending_messages else "no pending messages"
    return f"coordinator {event.coordinator_epoch} reported its branch ({idle}, {pending})"


def _recorded(event: CommandRecorded | WorkerMessageRecorded) -> str:
    return f"{event.operation} {event.outcome}" + (f": {event.error}" if event.error else "")


_SUMMARIES: Final[dict[type[Event], Callable[[Any], str]]] = {
    RunReserved: lambda e: (
        f"origin {e.origin_session_id}, {e.execution_mode}"
        + (f", {e.lineage_kind} of {e.parent_run_id}" if e.parent_run_id else "")
    ),
    RunClaimed: lambda e: (
        f"worker {e.worker_epoch} generation {e.generation}, lease until {e.lease_expires_at}"
    ),
    RunStarted: lambda e: f"worker {e.worker_epoch} ready: {e.detail}",
    RunWaiting: lambda e: e.detail,
    RunPaused: lambda e: f"paused at {e.paused_at}",
    RunResumed: lambda e: e.detail,
    RunFinished: _finished,
    RunQueueDoneForContinuation: lambda e: f"queue done for continuation {e.continuation_run_id}",
    RunUpdatePublished: lambda e: f"update {e.sequence} of {e.request_id}",
    WorkerEnded: lambda e: (
        f"worker {e.worker_epoch} {e.status}"
        + ("" if e.exit_code is None else f" (exit code {e.exit_code})")
    ),
    WorkerMessageRecorded: _recorded,
    CommandRecorded: _recorded,
    AttemptStarted: _deadline,
    AttemptChanged: lambda e: f"{e.attempt_id} {e.status}",
    DeadlineShifted: _shifted,
    InteractionRequested: lambda e: (
        f"revision {e.revision} ({e.kind}"
        + (", reopened" if e.reopened else "")
        + f"), target {e.target_session_id}"
    ),
    InteractionSettled: lambda e: f"revision {e.revision}, submission {e.submission_id} accepted",
    InteractionRevised: _revised,
    InteractionCancelled: lambda e: f"revision {e.revision}: {e.reason}",
    InteractionConsumed: lambda _: "the node finished with the answer",
    InteractionTimeoutStarted: lambda e: f"{e.request_id}: {e.detail}",
    SubmissionRecorded: lambda e: (
        f"{e.submission_id} at revision {e.request_revision}: {e.outcome}"
    ),
    SubmissionFinished: lambda e: f"{e.submission_id} {e.outcome}{_receipt_error(e.receipt)}",
    MessageCreated: lambda e: (
        f"{short(e.workflow_message_id)} {e.kind} order {e.order_number} for {e.target_session_id}"
    ),
    MessageCancelled: lambda e: f"{short(e.workflow_message_id)} cancelled",
    MessageSent: lambda e: f"{short(e.workflow_message_id)} sent as entry {e.pi_session_entry_id}",
    TurnStarted: lambda e: f"turn {e.workflow_turn_id} on {short(e.workflow_message_id)} started",
    TurnEnded: _ended,
    CoordinatorAttached: lambda e: (
        f"coordinator {e.coordinator_epoch} attached on {e.connection_id}"
    ),
    CoordinatorDetached: lambda e: f"coordinator {e.coordinator_epoch} detached",
    BranchReported: _branch,
    FollowUpQueued: lambda e: f"{e.follow_up_id} order {e.order_number}",
    FollowUpClosed: lambda e: f"{e.follow_up_id} {e.status}: {e.reason}",
    TerminalCleared: lambda e: f"{e.run_id} cleared from {e.target_session_id}",
}


_TIMES: Final[dict[type[Event], Callable[[Any], tuple[int | None, ...]]]] = {
    RunClaimed: lambda e: (e.lease_expires_at,),
    RunPaused: lambda e: (e.paused_at,),
    AttemptStarted: lambda e: (e.deadline_at,),
    DeadlineShifted: lambda e: (e.from_deadline, e.to_deadline),
}
"""The epoch milliseconds each summary writes, so readers can print them as times."""


def summary(event: Event) -> str:
    """One line saying what an event changed."""
    describe = _SUMMARIES.get(type(event))
    return event.TAG if describe is None else describe(event)


def item(entry: Entry) -> Item:
    """The timeline item of one entry."""
    return Item(
        seq=entry.seq,
        batch=entry.batch,
        at=entry.at,
        type=entry.type,
        summary=summary(entry.event),
        cause=cause_of(entry),
        times=tuple(time for time in _times(entry.event) if time is not None),
    )


def _times(event: Event) -> tuple[int | None, ...]:
    found = _TIMES.get(type(event))
    return () if found is None else found(event)


def refusal(entry: Entry) -> bool:
    """Command and worker-message records add to the timeline only when they refused."""
    event = entry.event
    if isinstance(event, CommandRecorded | WorkerMessageRecorded):
        return event.outcome not in ("accepted", "adopted")
    return True
