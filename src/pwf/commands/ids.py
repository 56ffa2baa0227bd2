"""Derived identifiers and fingerprints (DOMAIN §4, §12.1); pure, imports canonical."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf import canonical

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "continuation_run_id",
    "interaction_request_id",
    "message_id",
    "message_key",
    "notification_id",
    "restart_run_id",
    "session_request_id",
    "terminal_fingerprint",
    "terminal_source_id",
]


def interaction_request_id(run_id: str, attempt_id: str) -> str:
    """``interaction-{runId}-{attemptId}`` for agent and assistant requests."""
    return f"interaction-{run_id}-{attempt_id}"


def message_key(revision: int, reason: str) -> str:
    """``{revision}:{reason}``, the idempotency key of step and decision messages."""
    return f"{revision}:{reason}"


def message_id(kind: str, source_id: str, idempotency_key: str) -> str:
    """``workflow-message-`` + SHA-256 of the canonical (key, kind, source) object."""
    value = {"idempotencyKey": idempotency_key, "kind": kind, "sourceId": source_id}
    return "workflow-message-" + canonical.hex_digest(value)


def notification_id(run_id: str, attempt_id: str, index: int) -> str:
    """``notification-{runId}-{attemptId}-{notificationIndex}``."""
    return f"notification-{run_id}-{attempt_id}-{index}"


def terminal_source_id(run_id: str) -> str:
    """``terminal:{runId}``, the source of a run's terminal message."""
    return f"terminal:{run_id}"


def terminal_fingerprint(facts: Mapping[str, object]) -> str:
    """SHA-256 of the six terminal facts; a missing one counts as null."""
    names = ("error", "finalOutput", "input", "reason", "status", "workflowRef")
    return canonical.hex_digest({name: facts.get(name) for name in names})


def session_request_id(client_id: str, idempotency_key: str) -> str:
    """``session-`` + SHA-256 of ``clientId NUL idempotencyKey``."""
    return "session-" + canonical.text_hex_digest(f"{client_id}\0{idempotency_key}")


def restart_run_id(terminal_message_id: str) -> str:
    """``restart-`` + the first 40 hex digits of SHA-256 of the terminal message id."""
    return "restart-" + canonical.text_hex_digest(terminal_message_id)[:40]


def continuation_run_id(decision_id: str) -> str:
    """``continuation-`` + the decision id without a leading ``decision-``."""
    return "continuation-" + decision_id.removeprefix("decision-")
