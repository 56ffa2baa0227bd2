"""Session events: coordinators, evidence, turns, deadlines, follow-ups (§5.6-§5.9, §10, §11).

Imports the event base only.  Deadline shifts carry every number they
change, so folding them is copying (DOMAIN §10.1).
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal, get_args

from pwf.events._base import Event, OpaqueId, Positive, SafeInt

StopReason = Literal["completed", "aborted", "error", "lost"]
STOP_REASONS: Final[tuple[StopReason, ...]] = get_args(StopReason)
ShiftCause = Literal["turn.start", "run.resume", "session.resumed", "host.recovery"]
"""What credited idle time to a deadline (§10.1)."""


class CoordinatorAttached(Event, frozen=True, kw_only=True):
    """A connection became the session's coordinator with a new epoch, fencing the previous one."""

    TAG = "session.coordinator_attached"

    target_session_id: OpaqueId
    coordinator_epoch: OpaqueId
    connection_id: OpaqueId


class CoordinatorDetached(Event, frozen=True, kw_only=True):
    """The coordinator's connection ended; the session has no coordinator."""

    TAG = "session.coordinator_detached"

    target_session_id: OpaqueId
    coordinator_epoch: OpaqueId


class BranchReported(Event, frozen=True, kw_only=True):
    """The coordinator reported its branch; session control and model turns may follow."""

    TAG = "session.branch_reported"

    target_session_id: OpaqueId
    coordinator_epoch: OpaqueId
    is_idle: bool
    has_pending_messages: bool


class MessageSent(Event, frozen=True, kw_only=True):
    """Branch evidence: the message is on the session's branch as this entry (§11.1)."""

    TAG = "message.sent"

    workflow_message_id: OpaqueId
    run_id: OpaqueId
    target_session_id: OpaqueId
    pi_session_entry_id: OpaqueId


class TurnStarted(Event, frozen=True, kw_only=True):
    """A model turn started on a sent message."""

    TAG = "turn.started"

    workflow_turn_id: OpaqueId
    workflow_message_id: OpaqueId
    run_id: OpaqueId
    target_session_id: OpaqueId


class TurnEnded(Event, frozen=True, kw_only=True):
    """A model turn ended (``lost`` when an idle branch proves it)."""

    TAG = "turn.ended"

    workflow_turn_id: OpaqueId
    workflow_message_id: OpaqueId
    run_id: OpaqueId
    target_session_id: OpaqueId
    stop_reason: StopReason
    response_session_entry_id: OpaqueId | None = None


class DeadlineShifted(Event, frozen=True, kw_only=True):
    """SHIFT(attempt, idleMs, now): idle time credited to an attempt's deadline (§10.1)."""

    TAG = "attempt.deadline_shifted"

    run_id: OpaqueId
    attempt_id: OpaqueId
    idle_ms: Positive
    from_deadline: SafeInt
    to_deadline: SafeInt
    from_started_at: SafeInt | None = None
    to_started_at: SafeInt | None = None
    cause: ShiftCause


class InteractionTimeoutStarted(Event, frozen=True, kw_only=True):
    """An expired interaction's timeout began: the worker will finish the node as timed out."""

    TAG = "run.interaction_timeout_started"

    run_id: OpaqueId
    request_id: OpaqueId
    attempt_id: OpaqueId
    detail: str


class FollowUpQueued(Event, frozen=True, kw_only=True):
    """A follow-up prompt was queued for a run's session (§5.8)."""

    TAG = "followup.queued"
    TEXT_BLOBS: ClassVar[tuple[str, ...]] = ("prompt",)

    follow_up_id: OpaqueId
    run_id: OpaqueId
    request_id: OpaqueId
    order_number: Positive
    target_session_id: OpaqueId
    actor_type: str
    actor_id: str | None = None
    source_type: str
    prompt: str


class FollowUpClosed(Event, frozen=True, kw_only=True):
    """A queued follow-up was removed by its session or cancelled with its source run."""

    TAG = "followup.closed"
    TEXT_BLOBS: ClassVar[tuple[str, ...]] = ("reason",)

    follow_up_id: OpaqueId
    run_id: OpaqueId
    status: Literal["removed", "cancelled"]
    reason: str


class TerminalCleared(Event, frozen=True, kw_only=True):
    """A session stopped showing a run's retained terminal result (§5.9)."""

    TAG = "session.terminal_cleared"

    target_session_id: OpaqueId
    run_id: OpaqueId | None
    """None once a prune removed the cleared run (its link is set null, §13.2)."""
