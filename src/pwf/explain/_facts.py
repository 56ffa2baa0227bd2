"""What the diagnosis rules look at: the timeline log and an interaction's facts."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from pwf.commands.sessionview import next_message
from pwf.explain._report import Finding

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from pwf.commands import Context, Row
    from pwf.events import Entry, Event

__all__ = ["Facts", "Log", "Seen", "evaluate", "find"]

T = TypeVar("T")


class Log:
    """The timeline's entries, searchable backwards for "since" seqs."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = entries

    def last(self, kind: type[Event], /, **fields: object) -> int | None:
        """The seq of the newest event of ``kind`` whose fields equal ``fields``."""
        for entry in reversed(self.entries):
            event = entry.event
            if isinstance(event, kind) and all(
                getattr(event, name, None) == value for name, value in fields.items()
            ):
                return entry.seq
        return None

    def event(self, seq: int | None) -> Event | None:
        """The event at ``seq``, if it is in the timeline."""
        for entry in self.entries:
            if entry.seq == seq:
                return entry.event
        return None


class Seen:
    """What every rule looks at: the read model through ``ctx``, its now, and the timeline."""

    def __init__(self, ctx: Context, log: Log) -> None:
        self.ctx = ctx
        self.now = ctx.now
        self.log = log


class Facts(Seen):
    """What the rules of one interaction look at."""

    def __init__(self, ctx: Context, request: Row, log: Log) -> None:
        super().__init__(ctx, log)
        self.request = request
        self.request_id: str = request["request_id"]
        self.session_id: str = request["target_session_id"]
        self.run = ctx.one("SELECT * FROM runs WHERE run_id = ?", request["run_id"])
        self.queue = ctx.one("SELECT * FROM run_queue WHERE run_id = ?", request["run_id"])
        self.attempt = ctx.one(
            "SELECT * FROM node_attempts WHERE attempt_id = ?", request["attempt_id"]
        )
        self.messages = ctx.all(
            "SELECT * FROM workflow_messages WHERE source_id = ? ORDER BY order_number",
            self.request_id,
        )
        self.turns = ctx.all(
            "SELECT t.* FROM workflow_turns t JOIN workflow_messages m"
            " ON m.workflow_message_id = t.workflow_message_id"
            " WHERE m.source_id = ? AND m.kind = 'step' ORDER BY t.started_at, t.workflow_turn_id",
            self.request_id,
        )
        self.submissions = ctx.all(
            "SELECT * FROM interactive_submissions WHERE request_id = ?"
            " ORDER BY submitted_at, submission_id",
            self.request_id,
        )
        self.coordinator = ctx.one(
            "SELECT * FROM session_coordinators WHERE target_session_id = ?", self.session_id
        )
        self.next = next_message(ctx, self.session_id)

    @property
    def pending_message(self) -> Row | None:
        """The request's first pending message, if any."""
        return next((m for m in self.messages if m["status"] == "pending"), None)

    @property
    def open_turn(self) -> Row | None:
        """The request's started step turn, if any."""
        return next((t for t in self.turns if t["state"] == "started"), None)

    @property
    def live_worker(self) -> str | None:
        """The worker epoch whose lease on the run has not ended, if any."""
        queue = self.queue
        if queue is None or queue["owner_worker_epoch"] is None:
            return None
        return str(queue["owner_worker_epoch"]) if queue["lease_expires_at"] > self.now else None

    @property
    def pending(self) -> bool:
        """Whether the request still waits for an answer."""
        return bool(self.request["status"] == "pending")


def find(rule: str, summary: str, since: int | None, *times: int | None) -> Finding:
    """A finding of ``rule`` holding since ``since``; ``times`` are those written in ``summary``."""
    return Finding(
        rule=rule,
        summary=summary,
        since_seq=since,
        times=tuple(time for time in times if time is not None),
    )


def evaluate(
    rules: Iterable[tuple[str, Callable[[T], Finding | None], bool]], facts: T
) -> tuple[Finding, ...]:
    """The findings of ``rules`` in order, up to the first final one that holds."""
    findings: list[Finding] = []
    for _, check, final in rules:
        finding = check(facts)
        if finding is None:
            continue
        findings.append(finding)
        if final:
            break
    return tuple(findings)
