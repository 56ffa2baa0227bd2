"""Typed rows: one named tuple per projection table or query shape the deciders read (ADR 0093).

Imports nothing of pwf's (typing only): deciders, views and rules import it.
A :class:`Query` pairs one SQL statement with the row type its result
columns fill, in order; :func:`select` writes the statement of a whole-table
row from the row type's own fields, so the select list and the fields are
one list.  Every query made here or in a decider module is kept in
:data:`QUERIES`, and a test runs each against a freshly installed read model
and compares its columns with its row type's fields, and each table row's
fields with its table's columns: a DDL change that breaks a row type fails
that test, and mypy ``--strict`` checks every column a decider uses.

A row is built as ``tuple.__new__(RowType, row)`` over the reader's row (a
sequence in column order): no conversion and no validation, a fraction of a
microsecond a row, since the projections' ``STRICT`` tables already hold
these types and the test holds the columns to the fields.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pwf.commands import Reader
    from pwf.events.interactions import MessageKind, RequestKind
    from pwf.events.runs import (
        AttemptStatus,
        ExecutionMode,
        LineageKind,
        QueueStatus,
        RunStatus,
        WorkerOutcome,
    )
    from pwf.events.sessions import StopReason

RequestStatus = Literal["pending", "settled", "cancelled"]
"""What ``interactive_requests.status`` holds."""

__all__ = [
    "ATTEMPT",
    "CHECKPOINT",
    "FOLLOW_UP",
    "MESSAGE",
    "PENDING_OF_SESSION",
    "QUERIES",
    "QUEUE",
    "REQUEST",
    "RUN",
    "STARTED_TURN_OF_MESSAGE",
    "TABLES",
    "TURN",
    "AnsweredRow",
    "AttemptRow",
    "BlobRow",
    "CandidateRow",
    "CheckpointRow",
    "ChunkRow",
    "ContentRow",
    "CoordinatorRow",
    "ExpiringRow",
    "FollowUpRow",
    "HashRow",
    "HostStateRow",
    "LatestStartRow",
    "MessageRow",
    "PrunedRunRow",
    "Query",
    "QueueRow",
    "QueueStateRow",
    "RequestRow",
    "RequestStateRow",
    "RequestStatus",
    "RunListRow",
    "RunRow",
    "RunSourceRow",
    "StoredSubmissionRow",
    "SubmissionOfAttemptRow",
    "SubmissionRow",
    "TerminalViewRow",
    "TurnOfAttemptRow",
    "TurnRow",
    "WorkerRow",
    "fetch_all",
    "fetch_one",
    "fields",
    "select",
]


R = TypeVar("R", bound=tuple[Any, ...])
"""A row type: a named tuple whose fields are a statement's columns, in order."""


def fields(row: type[tuple[Any, ...]]) -> tuple[str, ...]:
    """A row type's field names, in order."""
    return tuple(row.__annotations__)


class Query(Generic[R]):
    """One SQL statement and the row type its result columns fill, in order."""

    __slots__ = ("make", "row", "sql")

    def __init__(self, row: type[R], sql: str) -> None:
        """Pair ``sql`` with ``row``; the statement's columns must be the row's fields."""
        self.row = row
        self.sql = sql
        self.make: Callable[[Iterable[Any]], R] = partial(tuple.__new__, row)
        QUERIES.append(self)

    def __repr__(self) -> str:
        """The row type and the statement, for a failing test's message."""
        return f"Query({self.row.__name__}, {self.sql!r})"


QUERIES: Final[list[Query[Any]]] = []
"""Every query made, in the order the modules made them (the DDL test walks them)."""


def fetch_one(reader: Reader, query: Query[R], params: tuple[object, ...] = ()) -> R | None:
    """The first row of ``query`` as its row type, or None."""
    row = reader.one(query.sql, params)
    return None if row is None else query.make(row)


def fetch_all(reader: Reader, query: Query[R], params: tuple[object, ...] = ()) -> list[R]:
    """Every row of ``query`` as its row type."""
    make = query.make
    return [make(row) for row in reader.all(query.sql, params)]


# ------------------------------------------------------------------ the tables' rows


class RunRow(NamedTuple):
    """A row of ``runs``."""

    run_id: str
    parent_run_id: str | None
    root_run_id: str
    lineage_kind: LineageKind | None
    restart_number: int
    parent_terminal_fingerprint: bytes | None
    project_path: str
    workflow_name: str
    workflow_ref: str
    workflow_source: str
    definition_digest: str
    definition_snapshot_hash: bytes | None
    launch_options_hash: bytes
    origin_session_id: str | None
    execution_mode: ExecutionMode
    status: RunStatus
    paused: int
    paused_at: int | None
    status_detail: str | None
    revision: int
    input_hash: bytes
    final_output_hash: bytes | None
    error_hash: bytes | None
    error_code: str | None
    presentation_prompt_hash: bytes | None
    created_at: int
    updated_at: int
    finished_at: int | None


class QueueRow(NamedTuple):
    """A row of ``run_queue``."""

    run_id: str
    origin_session_id: str | None
    status: QueueStatus
    generation: int
    owner_worker_epoch: str | None
    lease_expires_at: int | None
    error_code: str | None
    error_message: str | None
    created_at: int
    updated_at: int

    def held(self, now: int) -> bool:
        """True while a worker holds an unexpired lease on the run at ``now``."""
        return self.lease_expires_at is not None and self.lease_expires_at > now


class CheckpointRow(NamedTuple):
    """A row of ``run_checkpoints``."""

    run_id: str
    node_id: str
    continuation_run_id: str | None
    created_at: int
    updated_at: int


class AttemptRow(NamedTuple):
    """A row of ``node_attempts``."""

    attempt_id: str
    run_id: str
    node_id: str
    attempt_number: int
    status: AttemptStatus
    output_hash: bytes | None
    started_at: int | None
    deadline_at: int | None
    created_at: int
    updated_at: int


class RequestRow(NamedTuple):
    """A row of ``interactive_requests``."""

    request_id: str
    run_id: str
    attempt_id: str
    target_session_id: str
    kind: RequestKind
    contract_hash: bytes
    revision: int
    status: RequestStatus
    unproductive_turn_ends: int
    accepted_submission_id: str | None
    created_at: int
    updated_at: int
    settled_at: int | None
    consumed_at: int | None


class SubmissionRow(NamedTuple):
    """A row of ``interactive_submissions``."""

    submission_id: str
    request_id: str
    idempotency_key: str
    request_revision: int
    payload_hash: bytes
    outcome: str
    receipt_hash: bytes | None
    submitted_at: int
    updated_at: int


class MessageRow(NamedTuple):
    """A row of ``workflow_messages``."""

    workflow_message_id: str
    run_id: str
    target_session_id: str
    kind: MessageKind
    source_id: str
    content_hash: bytes
    order_number: int
    status: str
    pi_session_entry_id: str | None
    created_at: int
    updated_at: int
    latest_turn_id: str | None
    latest_turn_state: str | None
    latest_turn_started_at: int | None
    latest_turn_ended_at: int | None


class TurnRow(NamedTuple):
    """A row of ``workflow_turns``."""

    workflow_turn_id: str
    workflow_message_id: str
    run_id: str
    target_session_id: str
    state: str
    stop_reason: StopReason | None
    response_session_entry_id: str | None
    started_at: int
    ended_at: int | None


class FollowUpRow(NamedTuple):
    """A row of ``workflow_follow_ups``."""

    follow_up_id: str
    run_id: str
    request_id: str
    order_number: int
    target_session_id: str
    actor_type: str
    actor_id: str | None
    source_type: str
    prompt_hash: bytes
    status: str
    reason_hash: bytes | None
    created_at: int
    updated_at: int


class CoordinatorRow(NamedTuple):
    """A row of ``session_coordinators``."""

    target_session_id: str
    coordinator_epoch: str
    connection_id: str
    branch_reported: int
    attached_at: int
    reported_at: int | None


class TerminalViewRow(NamedTuple):
    """A row of ``session_terminal_views``."""

    target_session_id: str
    cleared_run_id: str | None
    cleared_at: int


class WorkerRow(NamedTuple):
    """A row of ``run_workers``."""

    worker_epoch: str
    run_id: str
    generation: int
    host_epoch: int | None
    launch_envelope_hash: bytes
    pid: int | None
    process_start_identity: str | None
    status: str
    started_at: int
    ready_at: int | None
    finished_at: int | None
    exit_code: int | None
    signal: str | None
    diagnostic_hash: bytes | None


class HostStateRow(NamedTuple):
    """The row of ``host_state``."""

    id: int
    epoch: int
    host_id: str | None
    token_hash: bytes | None
    pid: int | None
    process_start_identity: str | None
    started_at: int | None
    heartbeat_at: int | None
    expires_at: int | None


class RunSourceRow(NamedTuple):
    """A row of ``run_sources``."""

    run_id: str
    mount_path: str
    source_type: str
    source_ref: str
    source_revision: str


class BlobRow(NamedTuple):
    """What a view reads of a ``blobs`` row: its media type and content."""

    media_type: str
    content: bytes


# ------------------------------------------------------------------ query shapes


class QueueStateRow(NamedTuple):
    """A run's queue status and generation."""

    status: QueueStatus
    generation: int


class RequestStateRow(NamedTuple):
    """What a run's view shows of one of its interactive requests."""

    request_id: str
    attempt_id: str
    kind: RequestKind
    revision: int
    status: RequestStatus


class AnsweredRow(NamedTuple):
    """A worker message's stored answer: its fingerprint, outcome, revision, result and error."""

    request_fingerprint: bytes
    outcome: WorkerOutcome
    accepted_revision: int | None
    result: bytes | None
    error: bytes | None


class CandidateRow(NamedTuple):
    """A submission waiting for validation, with its request's attempt and contract."""

    submission_id: str
    payload_hash: bytes
    request_id: str
    attempt_id: str
    contract_hash: bytes


class RunListRow(NamedTuple):
    """What ``run.list`` shows of a run, with its queue status (None without an entry)."""

    run_id: str
    status: RunStatus
    paused: int
    workflow_name: str
    origin_session_id: str | None
    updated_at: int
    queue_status: QueueStatus | None


class PrunedRunRow(NamedTuple):
    """What prune's selection reads of a run: its end, its parent and its launch options."""

    run_id: str
    status: RunStatus
    finished_at: int | None
    parent_run_id: str | None
    options: bytes | None


class ExpiringRow(NamedTuple):
    """A pending request past its attempt's deadline, with that attempt's status."""

    request_id: str
    run_id: str
    attempt_id: str
    target_session_id: str
    revision: int
    deadline_at: int
    attempt_status: AttemptStatus


class HashRow(NamedTuple):
    """One blob hash a statement names (None where its column is empty)."""

    h: bytes | None


class ContentRow(NamedTuple):
    """A blob's bytes."""

    content: bytes


class ChunkRow(NamedTuple):
    """A stored view value's length and one chunk of its bytes (None past the end)."""

    byte_length: int
    chunk: bytes | None


class StoredSubmissionRow(NamedTuple):
    """A submission's identity, payload digest and outcome, with its receipt's bytes."""

    submission_id: str
    request_id: str
    payload_hash: bytes
    outcome: str
    receipt: bytes | None


class SubmissionOfAttemptRow(NamedTuple):
    """A submission of a run with its request and that request's attempt."""

    submission_id: str
    outcome: str
    request_id: str
    attempt_id: str


class TurnOfAttemptRow(NamedTuple):
    """A step turn's attempt and end (None while it runs)."""

    attempt_id: str
    ended_at: int | None


class LatestStartRow(NamedTuple):
    """An attempt and the start of its newest started step turn."""

    attempt_id: str
    latest_start: int


TABLES: Final[dict[type[tuple[Any, ...]], str]] = {
    RunRow: "runs",
    QueueRow: "run_queue",
    CheckpointRow: "run_checkpoints",
    AttemptRow: "node_attempts",
    RequestRow: "interactive_requests",
    SubmissionRow: "interactive_submissions",
    MessageRow: "workflow_messages",
    TurnRow: "workflow_turns",
    FollowUpRow: "workflow_follow_ups",
    CoordinatorRow: "session_coordinators",
    WorkerRow: "run_workers",
    HostStateRow: "host_state",
    RunSourceRow: "run_sources",
    TerminalViewRow: "session_terminal_views",
}
"""The table each whole-table row type is a row of (its fields are the table's columns)."""


def select(row: type[R], where: str = "", *, alias: str = "") -> Query[R]:
    """``SELECT`` the row's fields ``FROM`` its table (as ``alias``), then ``where``.

    ``where`` is the rest of the statement: conditions, joins, order, limit.
    """
    prefix = f"{alias}." if alias else ""
    columns = ", ".join(prefix + field for field in fields(row))
    table = TABLES[row] + (f" {alias}" if alias else "")
    return Query(row, f"SELECT {columns} FROM {table} {where}".rstrip())  # noqa: S608 - names


# ------------------------------------------------------------------ rows by key

RUN: Final = select(RunRow, "WHERE run_id = ?")
QUEUE: Final = select(QueueRow, "WHERE run_id = ?")
CHECKPOINT: Final = select(CheckpointRow, "WHERE run_id = ?")
ATTEMPT: Final = select(AttemptRow, "WHERE attempt_id = ?")
REQUEST: Final = select(RequestRow, "WHERE request_id = ?")
MESSAGE: Final = select(MessageRow, "WHERE workflow_message_id = ?")
TURN: Final = select(TurnRow, "WHERE workflow_turn_id = ?")
FOLLOW_UP: Final = select(FollowUpRow, "WHERE follow_up_id = ?")
PENDING_OF_SESSION: Final = select(
    RequestRow, "WHERE target_session_id = ? AND status = 'pending' ORDER BY created_at, request_id"
)
STARTED_TURN_OF_MESSAGE: Final = select(
    TurnRow, "WHERE workflow_message_id = ? AND state = 'started'"
)
