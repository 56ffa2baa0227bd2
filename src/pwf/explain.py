"""Why an interaction or a run is where it is; imports readmodel, store, events, commands, errors.

:func:`explain_interaction` and :func:`explain_run` read the log and the
projections and answer three questions: what touched it (the timeline of
events, each with its batch, time and cause), where it is now (the rows of
the read model), and what it is waiting for (the diagnosis: named rules,
evaluated in a fixed order, each finding naming the seq since which it
holds).  With ``at_seq`` the log up to that seq is folded into an in-memory
database and everything is explained as of that point (ADR 0016).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

import msgspec

from pwf.commands import Context
from pwf.commands.ids import message_id, message_key, terminal_source_id
from pwf.commands.sessionview import next_message
from pwf.errors import InputError
from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    BranchReported,
    CommandRecorded,
    CoordinatorAttached,
    CoordinatorDetached,
    DeadlineShifted,
    Entry,
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
    open_body,
)
from pwf.readmodel import rebuild_into

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from pwf.commands import Row
    from pwf.store.sqlite import SqliteStore

__all__ = [
    "INTERACTION_RULES",
    "RUN_RULES",
    "Cause",
    "Explanation",
    "Finding",
    "Item",
    "explain_interaction",
    "explain_run",
    "summary",
]

TERMINAL: Final = ("completed", "failed", "timed_out", "cancelled")
UNPRODUCTIVE: Final = "Workflow step ended three times without a valid submission"
EXPIRED: Final = "Workflow node model-turn deadline expired"
_SESSION_TYPES: Final = (
    CoordinatorAttached.TAG,
    CoordinatorDetached.TAG,
    BranchReported.TAG,
)
_RUN_TYPES: Final = (
    CoordinatorAttached,
    CoordinatorDetached,
    BranchReported,
    RunClaimed,
    RunStarted,
    RunWaiting,
    RunPaused,
    RunResumed,
    RunFinished,
    RunQueueDoneForContinuation,
    WorkerEnded,
)
"""Run and session events an interaction's timeline shows from its attempt's start on."""
_REASONS: Final = ("initial", "resumed", "reminder")
T = TypeVar("T")


# --------------------------------------------------------------------------- the report


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


class Finding(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """One diagnosis rule that holds: its name, what it means here, and since which seq."""

    rule: str
    summary: str
    since_seq: int | None = None
    request_id: str | None = None
    diagnosis: tuple[Finding, ...] = ()


class Explanation(msgspec.Struct, frozen=True, rename="camel"):
    """The whole answer of ``pwf explain``."""

    subject: str
    id: str
    at_seq: int
    now: int
    state: dict[str, object]
    timeline: tuple[Item, ...]
    diagnosis: tuple[Finding, ...]


# --------------------------------------------------------------------------- reading


class _Reader:
    """Rows of one connection, by column name (read only)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def one(self, sql: str, params: tuple[object, ...] = ()) -> Row | None:
        cursor = self.connection.execute(sql, params)
        cursor.row_factory = sqlite3.Row
        row: Row | None = cursor.fetchone()
        return row

    def all(self, sql: str, params: tuple[object, ...] = ()) -> list[Row]:
        cursor = self.connection.execute(sql, params)
        cursor.row_factory = sqlite3.Row
        return list(cursor.fetchall())


def _read_only(_events: object) -> object:
    raise InputError("explaining never writes")


@contextmanager
def _state(store: SqliteStore, at_seq: int | None) -> Iterator[tuple[sqlite3.Connection, int]]:
    """The projections to read (live, or folded up to ``at_seq``) and the last seq they hold."""
    live = store.connection
    live.execute("BEGIN")
    try:
        head = store.head().seq
        if at_seq is None:
            yield live, head
            return
        if at_seq > head:
            raise InputError(f"the log ends at seq {head}; there is no seq {at_seq}")
        last = _whole_batches(live, at_seq)
        folded = sqlite3.connect(":memory:")
        try:
            rebuild_into(folded, store.entries(1, last))
            yield folded, last
        finally:
            folded.close()
    finally:
        live.execute("COMMIT")


def _whole_batches(connection: sqlite3.Connection, at_seq: int) -> int:
    """The last seq of the last batch that ends at or before ``at_seq``.

    A batch is one command's decision; the state in the middle of one never
    existed, so a seq inside a batch explains the state before that batch.
    """
    row = connection.execute(
        "SELECT e.batch, (SELECT batch FROM events WHERE seq = e.seq + 1)"
        " FROM events e WHERE e.seq = ?",
        (at_seq,),
    ).fetchone()
    if row is None or row[0] != row[1]:
        return at_seq
    before = connection.execute("SELECT max(seq) FROM events WHERE batch < ?", (row[0],))
    return int(before.fetchone()[0] or 0)


def _clock(store: SqliteStore, last: int, now: int | None) -> int:
    if now is not None:
        return now
    row = store.connection.execute("SELECT at FROM events WHERE seq = ?", (last,)).fetchone()
    return 0 if row is None else int(row[0])


def _events(
    store: SqliteStore,
    last: int,
    *,
    run_id: str | None = None,
    session_id: str | None = None,
    kind: str | None = None,
) -> Iterator[Entry]:
    for stored in store.find(run_id=run_id, session_id=session_id, type=kind):
        if stored.seq > last:
            return
        yield open_body(stored.body)


def _cause(entry: Entry) -> Cause | None:
    cause = entry.cause
    if cause is None:
        return None
    return Cause(
        operation=cause.operation,
        request_id=cause.request_id,
        client_id=cause.client_id,
        worker_epoch=cause.worker_epoch,
        message_id=cause.message_id,
    )


def _values(row: Row | None, **names: str) -> dict[str, object] | None:
    """Chosen columns of a row as a JSON object (``camelName="column"``); BLOBs as hex."""
    if row is None:
        return None
    return {
        name: value.hex() if isinstance(value := row[column], bytes) else value
        for name, column in names.items()
    }


# --------------------------------------------------------------------------- one-line summaries


def _short(message: str) -> str:
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
    value = msgspec.json.decode(receipt)
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
        f"turn {event.workflow_turn_id} on {_short(event.workflow_message_id)}"
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
        f"{_short(e.workflow_message_id)} {e.kind} order {e.order_number} for {e.target_session_id}"
    ),
    MessageCancelled: lambda e: f"{_short(e.workflow_message_id)} cancelled",
    MessageSent: lambda e: f"{_short(e.workflow_message_id)} sent as entry {e.pi_session_entry_id}",
    TurnStarted: lambda e: f"turn {e.workflow_turn_id} on {_short(e.workflow_message_id)} started",
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


def summary(event: Event) -> str:
    """One line saying what an event changed."""
    describe = _SUMMARIES.get(type(event))
    return event.TAG if describe is None else describe(event)


def _item(entry: Entry) -> Item:
    return Item(
        seq=entry.seq,
        batch=entry.batch,
        at=entry.at,
        type=entry.type,
        summary=summary(entry.event),
        cause=_cause(entry),
    )


def _refusal(entry: Entry) -> bool:
    """Command and worker-message records add to the timeline only when they refused."""
    event = entry.event
    if isinstance(event, CommandRecorded | WorkerMessageRecorded):
        return event.outcome not in ("accepted", "adopted")
    return True


# --------------------------------------------------------------------------- facts


class _Log:
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


class _Facts:
    """What the rules of one interaction look at."""

    def __init__(self, ctx: Context, request: Row, log: _Log) -> None:
        self.ctx = ctx
        self.now = ctx.now
        self.log = log
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
        return next((m for m in self.messages if m["status"] == "pending"), None)

    @property
    def open_turn(self) -> Row | None:
        return next((t for t in self.turns if t["state"] == "started"), None)

    @property
    def live_worker(self) -> str | None:
        queue = self.queue
        if queue is None or queue["owner_worker_epoch"] is None:
            return None
        return str(queue["owner_worker_epoch"]) if queue["lease_expires_at"] > self.now else None

    @property
    def pending(self) -> bool:
        return bool(self.request["status"] == "pending")


Rule: TypeAlias = "tuple[str, Callable[[_Facts], Finding | None], bool]"
"""(name, check, final): a final rule that holds ends the evaluation."""


def _find(rule: str, summary: str, since: int | None) -> Finding:
    return Finding(rule=rule, summary=summary, since_seq=since)


def _consumed(facts: _Facts) -> Finding | None:
    if facts.request["status"] != "settled" or facts.request["consumed_at"] is None:
        return None
    since = facts.log.last(InteractionConsumed, request_id=facts.request_id)
    return _find("consumed", "the node finished with the accepted answer: done", since)


def _settled(facts: _Facts) -> Finding | None:
    if facts.request["status"] != "settled":
        return None
    worker = facts.live_worker
    holder = f"worker {worker} holds the run" if worker else "no live worker holds the run"
    since = facts.log.last(InteractionSettled, request_id=facts.request_id)
    return _find(
        "settled-awaiting-worker",
        f"submission {facts.request['accepted_submission_id']} settled the request;"
        f" the worker must finish the node ({holder})",
        since,
    )


def _cancellation(facts: _Facts) -> tuple[str, int | None] | None:
    if facts.request["status"] != "cancelled":
        return None
    since = facts.log.last(InteractionCancelled, request_id=facts.request_id)
    event = facts.log.event(since)
    reason = event.reason if isinstance(event, InteractionCancelled) else ""
    return reason, since


def _cancelled_unproductive(facts: _Facts) -> Finding | None:
    found = _cancellation(facts)
    if found is None or found[0] != UNPRODUCTIVE:
        return None
    return _find(
        "cancelled-unproductive",
        "cancelled by the third unproductive turn; the run failed (unproductiveTurns)",
        found[1],
    )


def _cancelled_timeout(facts: _Facts) -> Finding | None:
    found = _cancellation(facts)
    if found is None or found[0] != EXPIRED:
        return None
    return _find(
        "cancelled-timeout",
        "the model-turn deadline expired and the timeout began;"
        " a worker finishes the node as timed out",
        found[1],
    )


def _cancelled_run_ended(facts: _Facts) -> Finding | None:
    found = _cancellation(facts)
    if found is None or found[0] in (UNPRODUCTIVE, EXPIRED):
        return None
    status = facts.run["status"] if facts.run is not None else "gone"
    return _find("cancelled-run-ended", f"cancelled because the run ended ({status})", found[1])


def _run_paused(facts: _Facts) -> Finding | None:
    if not facts.pending or facts.run is None or not facts.run["paused"]:
        return None
    since = facts.log.last(RunPaused, run_id=facts.request["run_id"])
    return _find(
        "run-paused",
        "the run is paused: its step messages are hidden and no turn may start;"
        " run.resume continues it",
        since,
    )


def _validating(facts: _Facts) -> Row | None:
    return next((s for s in facts.submissions if s["outcome"] == "validating"), None)


def _validating_in_worker(facts: _Facts) -> Finding | None:
    submission = _validating(facts)
    worker = facts.live_worker
    if not facts.pending or submission is None or worker is None:
        return None
    since = facts.log.last(SubmissionRecorded, submission_id=submission["submission_id"])
    return _find(
        "validating-in-worker",
        f"submission {submission['submission_id']} is being validated by worker {worker}",
        since,
    )


def _validating_awaiting_worker(facts: _Facts) -> Finding | None:
    submission = _validating(facts)
    if not facts.pending or submission is None:
        return None
    since = facts.log.last(SubmissionRecorded, submission_id=submission["submission_id"])
    return _find(
        "validating-awaiting-worker",
        f"submission {submission['submission_id']} is validating and no live worker holds"
        f" the run: launch one (pwf worker launch {facts.request['run_id']})",
        since,
    )


def _interrupted(facts: _Facts) -> Finding | None:
    attempt = facts.attempt
    if not facts.pending or attempt is None or attempt["status"] != "interrupted":
        return None
    since = facts.log.last(AttemptChanged, attempt_id=attempt["attempt_id"], status="interrupted")
    return _find(
        "attempt-interrupted",
        "the attempt is interrupted: the coordinator went away during a turn;"
        " the next branch report resumes it",
        since,
    )


def _needs_session(facts: _Facts) -> Row | None:
    """The message the request waits on in its session: pending, else sent without an open turn."""
    if not facts.pending:
        return None
    pending = facts.pending_message
    if pending is not None:
        return pending
    if facts.open_turn is not None:
        return None
    return next((m for m in reversed(facts.messages) if m["status"] == "sent"), None)


def _no_coordinator(facts: _Facts) -> Finding | None:
    message = _needs_session(facts)
    if message is None or facts.coordinator is not None:
        return None
    created = facts.log.last(MessageCreated, workflow_message_id=message["workflow_message_id"])
    detached = facts.log.last(CoordinatorDetached, target_session_id=facts.session_id)
    since = max((seq for seq in (created, detached) if seq is not None), default=None)
    return _find(
        "no-coordinator",
        f"{message['kind']} message {_short(message['workflow_message_id'])} is"
        f" {message['status']} but session {facts.session_id} has no coordinator attached",
        since,
    )


def _branch_not_reported(facts: _Facts) -> Finding | None:
    message = _needs_session(facts)
    coordinator = facts.coordinator
    if message is None or coordinator is None or coordinator["branch_reported"]:
        return None
    since = facts.log.last(CoordinatorAttached, coordinator_epoch=coordinator["coordinator_epoch"])
    return _find(
        "branch-not-reported",
        f"coordinator {coordinator['coordinator_epoch']} is attached but has not reported"
        " its branch",
        since,
    )


def _message_blocked(facts: _Facts) -> Finding | None:
    message = facts.pending_message
    nxt = facts.next
    if not facts.pending or message is None or nxt is None:
        return None
    if nxt["workflow_message_id"] == message["workflow_message_id"]:
        return None
    if nxt["order_number"] > message["order_number"]:
        return None
    since = facts.log.last(MessageCreated, workflow_message_id=message["workflow_message_id"])
    return _find(
        "message-blocked",
        f"message {_short(message['workflow_message_id'])} is pending behind"
        f" {nxt['kind']} message {_short(nxt['workflow_message_id'])}"
        f" (order {nxt['order_number']}) of run {nxt['run_id']}",
        since,
    )


def _message_not_delivered(facts: _Facts) -> Finding | None:
    message = facts.pending_message
    nxt = facts.next
    coordinator = facts.coordinator
    if not facts.pending or message is None or nxt is None or coordinator is None:
        return None
    if not coordinator["branch_reported"]:
        return None
    if nxt["workflow_message_id"] != message["workflow_message_id"]:
        return None
    since = facts.log.last(MessageCreated, workflow_message_id=message["workflow_message_id"])
    return _find(
        "message-not-delivered",
        f"{message['kind']} message {_short(message['workflow_message_id'])} is the session's"
        " next message but no branch report shows it sent",
        since,
    )


def _turn_open(facts: _Facts) -> Finding | None:
    turn = facts.open_turn
    if not facts.pending or turn is None:
        return None
    since = facts.log.last(TurnStarted, workflow_turn_id=turn["workflow_turn_id"])
    return _find(
        "turn-open",
        f"turn {turn['workflow_turn_id']} started at {turn['started_at']} and has not ended",
        since,
    )


def _awaiting_turn(facts: _Facts) -> Finding | None:
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
    return _find(
        "awaiting-turn",
        f"step message {_short(sent['workflow_message_id'])} is sent and no turn is open:"
        " the model must take a turn and submit",
        since,
    )


def _deadline_since(facts: _Facts) -> int | None:
    attempt_id = facts.request["attempt_id"]
    return facts.log.last(DeadlineShifted, attempt_id=attempt_id) or facts.log.last(
        AttemptStarted, attempt_id=attempt_id
    )


def _passed(facts: _Facts) -> bool:
    attempt = facts.attempt
    return bool(
        facts.pending
        and attempt is not None
        and attempt["deadline_at"] is not None
        and attempt["deadline_at"] <= facts.now
    )


def _deadline_expired(facts: _Facts) -> Finding | None:
    if not _passed(facts) or facts.open_turn is None:
        return None
    assert facts.attempt is not None
    blockers = []
    if facts.live_worker:
        blockers.append("a worker holds the run")
    if facts.attempt["status"] == "interrupted":
        blockers.append("the attempt is interrupted")
    if facts.coordinator is None:
        blockers.append("the session has no coordinator")
    tail = f" once nothing blocks it ({', '.join(blockers)})" if blockers else ""
    return _find(
        "deadline-expired",
        f"deadline {facts.attempt['deadline_at']} passed at {facts.now} with a started turn:"
        f" pwf session expire would begin the timeout{tail}",
        _deadline_since(facts),
    )


def _deadline_passed_no_turn(facts: _Facts) -> Finding | None:
    if not _passed(facts) or facts.open_turn is not None:
        return None
    assert facts.attempt is not None
    return _find(
        "deadline-passed-no-turn",
        f"deadline {facts.attempt['deadline_at']} passed at {facts.now} but no step turn is"
        " started, so expiry cannot begin",
        _deadline_since(facts),
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


def _evaluate(
    rules: Iterable[tuple[str, Callable[[T], Finding | None], bool]], facts: T
) -> tuple[Finding, ...]:
    findings: list[Finding] = []
    for _, check, final in rules:
        finding = check(facts)
        if finding is None:
            continue
        findings.append(finding)
        if final:
            break
    return tuple(findings)


# --------------------------------------------------------------------------- runs


class _RunFacts:
    """What the rules of one run look at."""

    def __init__(self, ctx: Context, run: Row, log: _Log) -> None:
        self.ctx = ctx
        self.now = ctx.now
        self.log = log
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


def _terminal(facts: _RunFacts) -> Finding | None:
    status = facts.run["status"]
    if status not in TERMINAL:
        return None
    message = facts.terminal
    if message is None:
        shown = "no terminal message"
    else:
        shown = f"terminal message {_short(message['workflow_message_id'])} {message['status']}"
    return _find("terminal", f"the run ended {status} ({shown})", facts.log.last(RunFinished))


def _continued(facts: _RunFacts) -> Finding | None:
    if facts.queue is None or facts.queue["status"] != "done":
        return None
    since = facts.log.last(RunQueueDoneForContinuation)
    event = facts.log.event(since)
    child = event.continuation_run_id if isinstance(event, RunQueueDoneForContinuation) else "?"
    return _find("continued", f"the run handed its work to continuation {child}", since)


def _run_paused_run(facts: _RunFacts) -> Finding | None:
    if not facts.run["paused"]:
        return None
    return _find(
        "run-paused",
        "the run is paused on a pending interaction; run.resume continues it",
        facts.log.last(RunPaused),
    )


def _holds(facts: _RunFacts) -> Finding | None:
    queue = facts.queue
    if facts.owner is None or queue is None or queue["lease_expires_at"] <= facts.now:
        return None
    return _find(
        "worker-holds-run",
        f"worker {facts.owner} holds the run until {queue['lease_expires_at']}"
        f" (queue {queue['status']})",
        facts.lease_since(),
    )


def _lease_expired(facts: _RunFacts) -> Finding | None:
    queue = facts.queue
    if facts.owner is None or queue is None:
        return None
    return _find(
        "worker-lease-expired",
        f"worker {facts.owner}'s lease ended at {queue['lease_expires_at']}:"
        " a new worker may claim the run",
        facts.lease_since(),
    )


def _at_checkpoint(facts: _RunFacts) -> Finding | None:
    checkpoint = facts.checkpoint
    if checkpoint is None or checkpoint["continuation_run_id"] is not None:
        return None
    return _find(
        "parked-at-checkpoint",
        f"the run waits at checkpoint {checkpoint['node_id']} for checkpoint.answer",
        facts.log.last(RunWaiting, checkpoint_node_id=checkpoint["node_id"]),
    )


def _on_interaction(facts: _RunFacts) -> Finding | None:
    if not facts.requests:
        return None
    request = facts.requests[0]
    inner = _Facts(facts.ctx, request, facts.log)
    return Finding(
        rule="parked-on-interaction",
        summary=f"the run waits on interaction {request['request_id']}",
        since_seq=facts.log.last(InteractionRequested, request_id=request["request_id"]),
        request_id=request["request_id"],
        diagnosis=_evaluate(INTERACTION_RULES, inner),
    )


def _queued(facts: _RunFacts) -> Finding | None:
    queue = facts.queue
    if queue is None or queue["status"] in ("done", "failed", "cancelled"):
        return None
    kinds = (RunReserved, RunWaiting, RunResumed, InteractionTimeoutStarted, WorkerEnded)
    since = max(
        (entry.seq for entry in facts.log.entries if isinstance(entry.event, kinds)),
        default=None,
    )
    return _find(
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


# --------------------------------------------------------------------------- state


def _message_keys(request: Row) -> dict[str, str]:
    """Message id -> idempotency key for the keys this request's messages can have."""
    kind = "decision" if request["kind"] == "decision" else "step"
    keys: dict[str, str] = {}
    for revision in range(1, request["revision"] + 3):
        for reason in _REASONS:
            key = message_key(revision, reason)
            keys[message_id(kind, request["request_id"], key)] = key
    return keys


def _interaction_state(facts: _Facts) -> dict[str, object]:
    keys = _message_keys(facts.request)
    request = _values(
        facts.request,
        requestId="request_id",
        runId="run_id",
        attemptId="attempt_id",
        targetSessionId="target_session_id",
        kind="kind",
        revision="revision",
        status="status",
        unproductiveTurnEnds="unproductive_turn_ends",
        acceptedSubmissionId="accepted_submission_id",
        createdAt="created_at",
        settledAt="settled_at",
        consumedAt="consumed_at",
    )
    messages = [
        {
            "workflowMessageId": m["workflow_message_id"],
            "kind": m["kind"],
            "key": keys.get(m["workflow_message_id"]),
            "status": m["status"],
            "orderNumber": m["order_number"],
            "piSessionEntryId": m["pi_session_entry_id"],
        }
        for m in facts.messages
    ]
    turns = [
        _values(
            t,
            workflowTurnId="workflow_turn_id",
            workflowMessageId="workflow_message_id",
            state="state",
            stopReason="stop_reason",
            startedAt="started_at",
            endedAt="ended_at",
        )
        for t in facts.turns
    ]
    submissions = [
        _values(
            s,
            submissionId="submission_id",
            requestRevision="request_revision",
            outcome="outcome",
            submittedAt="submitted_at",
        )
        for s in facts.submissions
    ]
    return {
        "request": request,
        "messages": messages,
        "turns": turns,
        "submissions": submissions,
        "attempt": _attempt_state(facts.attempt),
        "run": _run_state(facts.run, facts.queue),
        "coordinator": _coordinator_state(facts.coordinator),
        "nextMessageId": None if facts.next is None else facts.next["workflow_message_id"],
    }


def _attempt_state(attempt: Row | None) -> dict[str, object] | None:
    return _values(
        attempt,
        attemptId="attempt_id",
        nodeId="node_id",
        attemptNumber="attempt_number",
        status="status",
        startedAt="started_at",
        deadlineAt="deadline_at",
    )


def _run_state(run: Row | None, queue: Row | None) -> dict[str, object] | None:
    state = _values(
        run,
        runId="run_id",
        status="status",
        paused="paused",
        detail="status_detail",
        originSessionId="origin_session_id",
        parentRunId="parent_run_id",
    )
    if state is not None:
        state["queue"] = _values(
            queue,
            status="status",
            generation="generation",
            ownerWorkerEpoch="owner_worker_epoch",
            leaseExpiresAt="lease_expires_at",
        )
    return state


def _coordinator_state(row: Row | None) -> dict[str, object] | None:
    state = _values(
        row,
        coordinatorEpoch="coordinator_epoch",
        connectionId="connection_id",
        branchReported="branch_reported",
    )
    if state is not None:
        state["branchReported"] = bool(state["branchReported"])
    return state


def _run_full_state(facts: _RunFacts) -> dict[str, object]:
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
        "interactions": [
            _values(r, requestId="request_id", kind="kind", revision="revision", status="status")
            for r in requests
        ],
        "checkpoint": _values(
            facts.checkpoint, nodeId="node_id", continuationRunId="continuation_run_id"
        ),
        "terminalMessage": _values(
            facts.terminal, workflowMessageId="workflow_message_id", status="status"
        ),
        "coordinator": _coordinator_state(coordinator),
    }


# --------------------------------------------------------------------------- timelines


def _relevant(entry: Entry, request: Row, messages: set[str], start: int) -> bool:
    """Whether an event of the request's run or session touched the request."""
    event = entry.event
    request_id = request["request_id"]
    if isinstance(event, MessageCreated) and event.source_id == request_id:
        messages.add(event.workflow_message_id)
    if getattr(event, "request_id", None) == request_id and not isinstance(event, CommandRecorded):
        return True
    if getattr(event, "workflow_message_id", None) in messages:
        return True
    if isinstance(event, AttemptStarted | AttemptChanged | DeadlineShifted):
        return bool(event.attempt_id == request["attempt_id"])
    if entry.seq < start:
        return False
    if isinstance(event, CommandRecorded | WorkerMessageRecorded):
        return _refusal(entry)
    return isinstance(event, _RUN_TYPES)


def _interaction_log(store: SqliteStore, request: Row, last: int) -> list[Entry]:
    run_events = list(_events(store, last, run_id=request["run_id"]))
    session_events = [
        entry
        for kind in _SESSION_TYPES
        for entry in _events(store, last, session_id=request["target_session_id"], kind=kind)
    ]
    entries = sorted(run_events + session_events, key=lambda entry: entry.seq)
    start = next(
        (
            entry.seq
            for entry in entries
            if isinstance(entry.event, AttemptStarted)
            and entry.event.attempt_id == request["attempt_id"]
        ),
        entries[0].seq if entries else 0,
    )
    messages: set[str] = set()
    return [entry for entry in entries if _relevant(entry, request, messages, start)]


def _run_log(store: SqliteStore, run: Row, last: int) -> list[Entry]:
    entries = [entry for entry in _events(store, last, run_id=run["run_id"]) if _refusal(entry)]
    session = run["origin_session_id"]
    if session is not None and entries:
        start = entries[0].seq
        entries += [
            entry
            for kind in _SESSION_TYPES
            for entry in _events(store, last, session_id=session, kind=kind)
            if entry.seq >= start
        ]
    return sorted(entries, key=lambda entry: entry.seq)


# --------------------------------------------------------------------------- entry points


def _context(connection: sqlite3.Connection, now: int) -> Context:
    return Context(_Reader(connection), _read_only, now)


def _missing(subject: str, subject_id: str, at_seq: int | None) -> InputError:
    where = "in the log" if at_seq is None else f"in the log at seq {at_seq}"
    return InputError(f"no {subject} {subject_id} {where}")


def explain_interaction(
    store: SqliteStore, request_id: str, at_seq: int | None = None, now: int | None = None
) -> Explanation:
    """Timeline, state and diagnosis of one interactive request.

    Raises:
        InputError: the request is not in the log (up to ``at_seq``), or the
            log has no ``at_seq``.
    """
    with _state(store, at_seq) as (connection, last):
        ctx = _context(connection, _clock(store, last, now))
        request = ctx.one("SELECT * FROM interactive_requests WHERE request_id = ?", request_id)
        if request is None:
            raise _missing("interaction", request_id, at_seq)
        entries = _interaction_log(store, request, last)
        facts = _Facts(ctx, request, _Log(entries))
        return Explanation(
            subject="interaction",
            id=request_id,
            at_seq=last,
            now=ctx.now,
            state=_interaction_state(facts),
            timeline=tuple(_item(entry) for entry in entries),
            diagnosis=_evaluate(INTERACTION_RULES, facts),
        )


def explain_run(
    store: SqliteStore, run_id: str, at_seq: int | None = None, now: int | None = None
) -> Explanation:
    """Timeline, state and diagnosis of one run.

    Raises:
        InputError: the run is not in the log (up to ``at_seq``), or the log
            has no ``at_seq``.
    """
    with _state(store, at_seq) as (connection, last):
        ctx = _context(connection, _clock(store, last, now))
        run = ctx.one("SELECT * FROM runs WHERE run_id = ?", run_id)
        if run is None:
            raise _missing("run", run_id, at_seq)
        entries = _run_log(store, run, last)
        facts = _RunFacts(ctx, run, _Log(entries))
        return Explanation(
            subject="run",
            id=run_id,
            at_seq=last,
            now=ctx.now,
            state=_run_full_state(facts),
            timeline=tuple(_item(entry) for entry in entries),
            diagnosis=_evaluate(RUN_RULES, facts),
        )
