"""The ``state`` of an explanation: the read-model rows of an interaction or a run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands.ids import message_id, message_key
from pwf.explain._reading import values

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pwf.commands import Row
    from pwf.explain._facts import Facts
    from pwf.explain._run import RunFacts

__all__ = ["interaction_state", "run_full_state"]

_REASONS: Final = ("initial", "resumed", "reminder")


def _message_keys(request: Row) -> dict[str, str]:
    """Message id -> idempotency key for the keys this request's messages can have."""
    kind = "decision" if request["kind"] == "decision" else "step"
    keys: dict[str, str] = {}
    for revision in range(1, request["revision"] + 3):
        for reason in _REASONS:
            key = message_key(revision, reason)
            keys[message_id(kind, request["request_id"], key)] = key
    return keys


def interaction_state(facts: Facts) -> dict[str, object]:
    """The rows an interaction's explanation shows as its state."""
    return {
        "request": _request_state(facts.request),
        "messages": _message_states(facts.request, facts.messages),
        "turns": [_turn_state(t) for t in facts.turns],
        "submissions": [_submission_state(s) for s in facts.submissions],
        "attempt": _attempt_state(facts.attempt),
        "run": _run_state(facts.run, facts.queue),
        "coordinator": _coordinator_state(facts.coordinator),
        "nextMessageId": None if facts.next is None else facts.next["workflow_message_id"],
    }


def _request_state(request: Row) -> dict[str, object] | None:
    return values(
        request,
        "request_id run_id attempt_id target_session_id kind revision status"
        " unproductive_turn_ends accepted_submission_id created_at settled_at consumed_at",
    )


def _message_states(request: Row, messages: Sequence[Row]) -> list[dict[str, object]]:
    """The request's messages, each with the idempotency key its id was made from."""
    keys = _message_keys(request)
    return [
        {
            "workflowMessageId": m["workflow_message_id"],
            "kind": m["kind"],
            "key": keys.get(m["workflow_message_id"]),
            "status": m["status"],
            "orderNumber": m["order_number"],
            "piSessionEntryId": m["pi_session_entry_id"],
        }
        for m in messages
    ]


def _turn_state(turn: Row) -> dict[str, object] | None:
    return values(
        turn, "workflow_turn_id workflow_message_id state stop_reason started_at ended_at"
    )


def _submission_state(submission: Row) -> dict[str, object] | None:
    return values(submission, "submission_id request_revision outcome submitted_at")


def _attempt_state(attempt: Row | None) -> dict[str, object] | None:
    return values(attempt, "attempt_id node_id attempt_number status started_at deadline_at")


def _run_state(run: Row | None, queue: Row | None) -> dict[str, object] | None:
    state = values(
        run,
        "run_id status paused status_detail origin_session_id parent_run_id",
        {"status_detail": "detail"},
    )
    if state is not None:
        state["queue"] = values(queue, "status generation owner_worker_epoch lease_expires_at")
    return state


def _coordinator_state(row: Row | None) -> dict[str, object] | None:
    state = values(row, "coordinator_epoch connection_id branch_reported")
    if state is not None:
        state["branchReported"] = bool(state["branchReported"])
    return state


def run_full_state(facts: RunFacts) -> dict[str, object]:
    """The rows a run's explanation shows as its state."""
    ctx = facts.ctx
    attempts = ctx.all(
        "SELECT * FROM node_attempts WHERE run_id = ? ORDER BY created_at, attempt_id",
        facts.run_id,
    )
    requests = ctx.all(
        "SELECT * FROM interactive_requests WHERE run_id = ? ORDER BY created_at, request_id",
        facts.run_id,
    )
    session = facts.run["origin_session_id"]
    coordinator = (
        None
        if session is None
        else ctx.one("SELECT * FROM session_coordinators WHERE target_session_id = ?", session)
    )
    return {
        "run": _run_state(facts.run, facts.queue),
        "attempts": [_attempt_state(row) for row in attempts],
        "interactions": [values(r, "request_id kind revision status") for r in requests],
        "checkpoint": values(facts.checkpoint, "node_id continuation_run_id"),
        "terminalMessage": values(facts.terminal, "workflow_message_id status"),
        "coordinator": _coordinator_state(coordinator),
    }
