"""The report ``pwf explain`` prints: the explanation, its timeline items and findings."""

from __future__ import annotations

import msgspec

__all__ = ["Cause", "Explanation", "Finding", "Item"]


class Cause(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """What caused a batch: a client request, a worker message or a host action."""

    operation: str
    request_id: str | None = None
    client_id: str | None = None
    worker_epoch: str | None = None
    message_id: str | None = None

    def text(self) -> str:
        """One line: the operation and who asked for it."""
        if self.request_id is not None:
            return f"{self.operation} {self.request_id} ({self.client_id})"
        if self.worker_epoch is not None:
            return f"{self.operation} {self.worker_epoch}/{self.message_id}"
        return self.operation


class Item(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """One event of the timeline."""

    seq: int
    batch: int
    at: int
    type: str
    summary: str
    cause: Cause | None = None
    times: tuple[int, ...] = ()
    """The epoch milliseconds written in ``summary`` (ADR 0079)."""


class Finding(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """One diagnosis rule that holds: its name, what it means here, and since which seq."""

    rule: str
    summary: str
    since_seq: int | None = None
    request_id: str | None = None
    diagnosis: tuple[Finding, ...] = ()
    times: tuple[int, ...] = ()
    """The epoch milliseconds written in ``summary``, for readers that print times (ADR 0079)."""


class Explanation(msgspec.Struct, frozen=True, rename="camel"):
    """The whole answer of ``pwf explain``."""

    subject: str
    id: str
    at_seq: int
    now: int
    state: dict[str, object]
    timeline: tuple[Item, ...]
    diagnosis: tuple[Finding, ...]
