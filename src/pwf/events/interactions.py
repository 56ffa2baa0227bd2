"""Events of interactive requests, submissions and workflow messages (DOMAIN §5.4 to §5.6, §9).

Imports the event base only.  Revisions are carried as values, never
computed by a projector.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import msgspec

from pwf.events._base import Event, OpaqueId, Positive, SafeInt

RequestKind = Literal["agent", "assistant", "decision"]
MessageKind = Literal["step", "decision", "notification", "terminal", "followUp"]
SubmissionOutcome = Literal["validating", "accepted"]
"""How a submission is first stored: awaiting the worker's verdict, or settled at once."""
Verdict = Literal["accepted", "rejected"]
"""How the validation of a submission ended."""


class InteractionRequested(Event, frozen=True, kw_only=True):
    """A request was created (revision 1) or a settled, unconsumed one reopened."""

    TAG = "interaction.requested"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("contract",)

    request_id: OpaqueId
    run_id: OpaqueId
    attempt_id: OpaqueId
    target_session_id: OpaqueId
    kind: RequestKind
    contract: msgspec.Raw
    revision: Positive
    reopened: bool = False


class InteractionSettled(Event, frozen=True, kw_only=True):
    """An accepted submission settled the request."""

    TAG = "interaction.settled"

    request_id: OpaqueId
    run_id: OpaqueId
    submission_id: OpaqueId
    revision: Positive


class InteractionRevised(Event, frozen=True, kw_only=True):
    """The request stays pending at a new revision (resume, reminder)."""

    TAG = "interaction.revised"

    request_id: OpaqueId
    run_id: OpaqueId
    revision: Positive
    reason: Literal["resumed", "reminder"]
    unproductive_turn_ends: SafeInt | None = None


class InteractionCancelled(Event, frozen=True, kw_only=True):
    """The request will not be answered any more."""

    TAG = "interaction.cancelled"

    request_id: OpaqueId
    run_id: OpaqueId
    revision: Positive
    reason: str


class InteractionConsumed(Event, frozen=True, kw_only=True):
    """The node finished with the settled answer."""

    TAG = "interaction.consumed"

    request_id: OpaqueId
    run_id: OpaqueId


class SubmissionRecorded(Event, frozen=True, kw_only=True):
    """A submission was stored: ``validating``, or ``accepted`` when it settles at once."""

    TAG = "submission.recorded"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("payload", "receipt")

    submission_id: OpaqueId
    request_id: OpaqueId
    run_id: OpaqueId
    idempotency_key: OpaqueId
    request_revision: Positive
    payload: msgspec.Raw
    outcome: SubmissionOutcome
    receipt: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class SubmissionFinished(Event, frozen=True, kw_only=True):
    """Validation of a submission ended."""

    TAG = "submission.finished"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("receipt",)

    submission_id: OpaqueId
    request_id: OpaqueId
    run_id: OpaqueId
    outcome: Verdict
    receipt: msgspec.Raw


class MessageCreated(Event, frozen=True, kw_only=True):
    """A workflow message was queued for a session at the next order number."""

    TAG = "message.created"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("content",)

    workflow_message_id: OpaqueId
    run_id: OpaqueId
    target_session_id: OpaqueId
    kind: MessageKind
    source_id: OpaqueId
    content: msgspec.Raw
    order_number: Positive


class MessageCancelled(Event, frozen=True, kw_only=True):
    """A pending workflow message was cancelled by its source's lifecycle."""

    TAG = "message.cancelled"

    workflow_message_id: OpaqueId
    run_id: OpaqueId
    target_session_id: OpaqueId
