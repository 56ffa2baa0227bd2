"""The interaction diagnosis rules, in evaluation order (ADR 0016)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeAlias

from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    CoordinatorAttached,
    CoordinatorDetached,
    DeadlineShifted,
    InteractionCancelled,
    InteractionConsumed,
    InteractionSettled,
    MessageCreated,
    MessageSent,
    RunPaused,
    SubmissionRecorded,
    TurnEnded,
    TurnStarted,
)
from pwf.explain._facts import find
from pwf.explain._summaries import short

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Row
    from pwf.explain._facts import Facts
    from pwf.explain._report import Finding

__all__ = ["EXPIRED", "INTERACTION_RULES", "UNPRODUCTIVE", "Rule"]

UNPRODUCTIVE: Final = "Workflow step ended three times without a valid submission"
EXPIRED: Final = "Workflow node model-turn deadline expired"
Rule: TypeAlias = "tuple[str, Callable[[Facts], Finding | None], bool]"
"""(name, check, final): a final rule that holds ends the evaluation."""


def _created(facts: Facts, message: Row) -> int | None:
    """The seq of the event that created ``message``."""
    return facts.log.last(MessageCreated, workflow_message_id=message["workflow_message_id"])


def _submitted(facts: Facts, submission: Row) -> int | None:
    """The seq of the event that recorded ``submission``."""
    return facts.log.last(SubmissionRecorded, submission_id=submission["submission_id"])


def _consumed(facts: Facts) -> Finding | None:
    if facts.request["status"] != "settled" or facts.request["consumed_at"] is None:
        return None
    since = facts.log.last(InteractionConsumed, request_id=facts.request_id)
    return find("consumed", "the node finished with the accepted answer: done", since)


def _settled(facts: Facts) -> Finding | None:
    if facts.request["status"] != "settled":
        return None
    worker = facts.live_worker
    holder = f"worker {worker} holds the run" if worker else "no live worker holds the run"
    since = facts.log.last(InteractionSettled, request_id=facts.request_id)
    return find(
        "settled-awaiting-worker",
        f"submission {facts.request['accepted_submission_id']} settled the request;"
        f" the worker must finish the node ({holder})",
        since,
    )


def _cancellation(facts: Facts) -> tuple[str, int | None] | None:
    if facts.request["status"] != "cancelled":
        return None
    since = facts.log.last(InteractionCancelled, request_id=facts.request_id)
    event = facts.log.event(since)
    reason = event.reason if isinstance(event, InteractionCancelled) else ""
    return reason, since


def _cancelled_for(facts: Facts, reason: str, rule: str, summary: str) -> Finding | None:
    """``rule``'s finding when the request was cancelled for ``reason``."""
    found = _cancellation(facts)
    if found is None or found[0] != reason:
        return None
    return find(rule, summary, found[1])


def _cancelled_unproductive(facts: Facts) -> Finding | None:
    return _cancelled_for(
        facts,
        UNPRODUCTIVE,
        "cancelled-unproductive",
        "cancelled by the third unproductive turn; the run failed (unproductiveTurns)",
    )


def _cancelled_timeout(facts: Facts) -> Finding | None:
    return _cancelled_for(
        facts,
        EXPIRED,
        "cancelled-timeout",
        "the model-turn deadline expired and the timeout began;"
        " a worker finishes the node as timed out",
    )


def _cancelled_run_ended(facts: Facts) -> Finding | None:
    found = _cancellation(facts)
    if found is None or found[0] in (UNPRODUCTIVE, EXPIRED):
        return None
    status = facts.run["status"] if facts.run is not None else "gone"
    return find("cancelled-run-ended", f"cancelled because the run ended ({status})", found[1])


def _run_paused(facts: Facts) -> Finding | None:
    if not facts.pending or facts.run is None or not facts.run["paused"]:
        return None
    since = facts.log.last(RunPaused, run_id=facts.request["run_id"])
    return find(
        "run-paused",
        "the run is paused: its step messages are hidden and no turn may start;"
        " run.resume continues it",
        since,
    )


def _validating(facts: Facts) -> Row | None:
    return next((s for s in facts.submissions if s["outcome"] == "validating"), None)


def _validating_in_worker(facts: Facts) -> Finding | None:
    submission = _validating(facts)
    worker = facts.live_worker
    if not facts.pending or submission is None or worker is None:
        return None
    since = _submitted(facts, submission)
    return find(
        "validating-in-worker",
        f"submission {submission['submission_id']} is being validated by worker {worker}",
        since,
    )


def _validating_awaiting_worker(facts: Facts) -> Finding | None:
    submission = _validating(facts)
    if not facts.pending or submission is None:
        return None
    since = _submitted(facts, submission)
    return find(
        "validating-awaiting-worker",
        f"submission {submission['submission_id']} is validating and no live worker holds"
        f" the run: launch one (pwf worker launch {facts.request['run_id']})",
        since,
    )


def _interrupted(facts: Facts) -> Finding | None:
    attempt = facts.attempt
    if not facts.pending or attempt is None or attempt["status"] != "interrupted":
        return None
    since = facts.log.last(AttemptChanged, attempt_id=attempt["attempt_id"], status="interrupted")
    return find(
        "attempt-interrupted",
        "the attempt is interrupted: the coordinator went away during a turn;"
        " the next branch report resumes it",
        since,
    )


def _needs_session(facts: Facts) -> Row | None:
    """The message the request waits on in its session: pending, else sent without an open turn."""
    if not facts.pending:
        return None
    pending = facts.pending_message
    if pending is not None:
        return pending
    if facts.open_turn is not None:
        return None
    return next((m for m in reversed(facts.messages) if m["status"] == "sent"), None)


def _no_coordinator(facts: Facts) -> Finding | None:
    message = _needs_session(facts)
    if message is None or facts.coordinator is not None:
        return None
    created = _created(facts, message)
    detached = facts.log.last(CoordinatorDetached, target_session_id=facts.session_id)
    since = max((seq for seq in (created, detached) if seq is not None), default=None)
    return find(
        "no-coordinator",
        f"{message['kind']} message {short(message['workflow_message_id'])} is"
        f" {message['status']} but session {facts.session_id} has no coordinator attached:"
        f" open session {facts.session_id} in pi so its coordinator attaches"
        " (a view.session.watch with coordinator true)",
        since,
    )


def _branch_not_reported(facts: Facts) -> Finding | None:
    message = _needs_session(facts)
    coordinator = facts.coordinator
    if message is None or coordinator is None or coordinator["branch_reported"]:
        return None
    since = facts.log.last(CoordinatorAttached, coordinator_epoch=coordinator["coordinator_epoch"])
    return find(
        "branch-not-reported",
        f"coordinator {coordinator['coordinator_epoch']} is attached but has not reported"
        " its branch",
        since,
    )


def _pending_and_next(facts: Facts) -> tuple[Row, Row] | None:
    """The request's pending message and its session's next one, while the request waits."""
    message = facts.pending_message
    nxt = facts.next
    if not facts.pending or message is None or nxt is None:
        return None
    return message, nxt


def _message_blocked(facts: Facts) -> Finding | None:
    found = _pending_and_next(facts)
    if found is None:
        return None
    message, nxt = found
    if nxt["workflow_message_id"] == message["workflow_message_id"]:
        return None
    if nxt["order_number"] > message["order_number"]:
        return None
    return find(
        "message-blocked",
        f"message {short(message['workflow_message_id'])} is pending behind"
        f" {nxt['kind']} message {short(nxt['workflow_message_id'])}"
        f" (order {nxt['order_number']}) of run {nxt['run_id']}",
        _created(facts, message),
    )


def _message_not_delivered(facts: Facts) -> Finding | None:
    found = _pending_and_next(facts)
    coordinator = facts.coordinator
    if found is None or coordinator is None or not coordinator["branch_reported"]:
        return None
    message, nxt = found
    if nxt["workflow_message_id"] != message["workflow_message_id"]:
        return None
    return find(
        "message-not-delivered",
        f"{message['kind']} message {short(message['workflow_message_id'])} is the session's"
        " next message but no branch report shows it sent",
        _created(facts, message),
    )


def _turn_open(facts: Facts) -> Finding | None:
    turn = facts.open_turn
    if not facts.pending or turn is None:
        return None
    since = facts.log.last(TurnStarted, workflow_turn_id=turn["workflow_turn_id"])
    return find(
        "turn-open",
        f"turn {turn['workflow_turn_id']} started at {turn['started_at']} and has not ended",
        since,
        turn["started_at"],
    )


def _awaiting_turn(facts: Facts) -> Finding | None:
    if not facts.pending or facts.pending_message is not None or facts.open_turn is not None:
        return None
    sent = next(
        (m for m in reversed(facts.messages) if m["status"] == "sent" and m["kind"] == "step"),
        None,
    )
    if sent is None:
        return None
    seqs = [facts.log.last(MessageSent, workflow_message_id=sent["workflow_message_id"])]
    seqs += [
        facts.log.last(TurnEnded, workflow_turn_id=turn["workflow_turn_id"]) for turn in facts.turns
    ]
    since = max((seq for seq in seqs if seq is not None), default=None)
    return find(
        "awaiting-turn",
        f"step message {short(sent['workflow_message_id'])} is sent and no turn is open:"
        " the model must take a turn and submit",
        since,
    )


def _passed(facts: Facts) -> Row | None:
    """The attempt whose deadline has passed while the request waits, if any."""
    attempt = facts.attempt
    if not facts.pending or attempt is None or attempt["deadline_at"] is None:
        return None
    return attempt if attempt["deadline_at"] <= facts.now else None


def _deadline_finding(facts: Facts, attempt: Row, rule: str, rest: str) -> Finding:
    """``rule``'s finding: the attempt's deadline passed at now, then ``rest``.

    It holds since the deadline was last set: shifted, else the attempt's start.
    """
    attempt_id = facts.request["attempt_id"]
    since = facts.log.last(DeadlineShifted, attempt_id=attempt_id) or facts.log.last(
        AttemptStarted, attempt_id=attempt_id
    )
    deadline = attempt["deadline_at"]
    return find(
        rule, f"deadline {deadline} passed at {facts.now}{rest}", since, deadline, facts.now
    )


def _deadline_expired(facts: Facts) -> Finding | None:
    attempt = _passed(facts)
    if attempt is None or facts.open_turn is None:
        return None
    blockers = []
    if facts.live_worker:
        blockers.append("a worker holds the run")
    if attempt["status"] == "interrupted":
        blockers.append("the attempt is interrupted")
    if facts.coordinator is None:
        blockers.append("the session has no coordinator")
    tail = f" once nothing blocks it ({', '.join(blockers)})" if blockers else ""
    return _deadline_finding(
        facts,
        attempt,
        "deadline-expired",
        f" with a started turn: pwf session expire would begin the timeout{tail}",
    )


def _deadline_passed_no_turn(facts: Facts) -> Finding | None:
    attempt = _passed(facts)
    if attempt is None or facts.open_turn is not None:
        return None
    return _deadline_finding(
        facts,
        attempt,
        "deadline-passed-no-turn",
        " but no step turn is started, so expiry cannot begin",
    )


INTERACTION_RULES: Final[tuple[Rule, ...]] = (
    ("consumed", _consumed, True),
    ("settled-awaiting-worker", _settled, True),
    ("cancelled-unproductive", _cancelled_unproductive, True),
    ("cancelled-timeout", _cancelled_timeout, True),
    ("cancelled-run-ended", _cancelled_run_ended, True),
    ("run-paused", _run_paused, True),
    ("validating-in-worker", _validating_in_worker, True),
    ("validating-awaiting-worker", _validating_awaiting_worker, True),
    ("attempt-interrupted", _interrupted, False),
    ("no-coordinator", _no_coordinator, False),
    ("branch-not-reported", _branch_not_reported, False),
    ("message-blocked", _message_blocked, False),
    ("message-not-delivered", _message_not_delivered, False),
    ("turn-open", _turn_open, False),
    ("awaiting-turn", _awaiting_turn, False),
    ("deadline-expired", _deadline_expired, False),
    ("deadline-passed-no-turn", _deadline_passed_no_turn, False),
)
"""The interaction rules in evaluation order (ADR 0016)."""
