"""Events of runs, their queue, workers and node attempts (DOMAIN §5.2, §5.3, §5.12, §14).

Imports the event base only.  Every value a projector writes is carried here:
statuses, details, generations, lease expiries and revisions are decided by
the handler, so folding the log needs no clock and no lookups.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal, get_args

import msgspec

from pwf.events._base import Event, Hex256, OpaqueId, Positive, SafeInt

RunStatus = Literal["queued", "running", "waiting", "completed", "failed", "timed_out", "cancelled"]
TerminalStatus = Literal["completed", "failed", "timed_out", "cancelled"]
QueueStatus = Literal["queued", "starting", "running", "parked", "done", "failed", "cancelled"]
AttemptStatus = Literal[
    "pending", "running", "waiting", "interrupted", "completed", "failed", "timed_out", "cancelled"
]
EndedQueueStatus = Literal["done", "failed", "cancelled"]
"""Where a finished run's queue entry goes: ``done`` after success, else failed or cancelled."""
WorkerEnd = Literal["exited", "cancelled", "timedOut", "crashed", "claimLost", "orphaned"]
WorkerOutcome = Literal["accepted", "adopted", "rejected", "claimLost"]
"""The outcomes a worker message's response carries (DOMAIN §14)."""
WORKER_OUTCOME_MEMBERS: Final[tuple[WorkerOutcome, ...]] = get_args(WorkerOutcome)
LineageKind = Literal["continuation", "restart"]
ExecutionMode = Literal["interactive", "headless"]
Json = msgspec.Raw | msgspec.UnsetType


class RunReserved(Event, frozen=True, kw_only=True):
    """A run was reserved: its row, its queue entry (``queued``) and its binding."""

    TAG = "run.reserved"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = (
        "input",
        "launch_options",
        "definition_snapshot",
    )

    run_id: OpaqueId
    root_run_id: OpaqueId
    parent_run_id: OpaqueId | None = None
    lineage_kind: LineageKind | None = None
    restart_number: SafeInt = 0
    parent_terminal_fingerprint: Hex256 | None = None
    project_path: str
    workflow_name: str
    workflow_ref: str
    workflow_source: msgspec.Raw
    """The normalised ``{root, mounted}`` object (HOST.md §5); text in logs written before."""
    definition_digest: str
    definition_snapshot: Json = msgspec.UNSET
    input: msgspec.Raw
    launch_options: msgspec.Raw
    origin_session_id: OpaqueId | None = None
    execution_mode: ExecutionMode = "interactive"


class RunClaimed(Event, frozen=True, kw_only=True):
    """A worker was launched for a run: queue ``starting``, a new generation and epoch."""

    TAG = "run.claimed"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("launch",)

    run_id: OpaqueId
    generation: Positive
    worker_epoch: OpaqueId
    lease_expires_at: SafeInt
    launch: msgspec.Raw
    host_epoch: Positive | None = None
    """The served host that will supervise the worker; None in direct mode."""


class RunStarted(Event, frozen=True, kw_only=True):
    """The worker said it is ready: run and queue ``running``."""

    TAG = "run.started"

    run_id: OpaqueId
    worker_epoch: OpaqueId
    detail: str


class RunWaiting(Event, frozen=True, kw_only=True):
    """The run parked: run ``waiting`` (finish stamp set), queue ``parked``, no owner."""

    TAG = "run.waiting"

    run_id: OpaqueId
    detail: str
    checkpoint_node_id: str | None = None


class RunPaused(Event, frozen=True, kw_only=True):
    """A parked run was paused; ``paused_at`` is the pause start (DOMAIN §15.5)."""

    TAG = "run.paused"

    run_id: OpaqueId
    paused_at: SafeInt


class RunResumed(Event, frozen=True, kw_only=True):
    """A paused parked run was resumed."""

    TAG = "run.resumed"

    run_id: OpaqueId
    detail: str


class RunFinished(Event, frozen=True, kw_only=True):
    """A run reached a terminal status; its queue entry leaves the queue."""

    TAG = "run.finished"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("final_output", "error")

    run_id: OpaqueId
    status: TerminalStatus
    queue_status: EndedQueueStatus
    detail: str
    final_output: Json = msgspec.UNSET
    error: Json = msgspec.UNSET
    error_code: str | None = None
    reason: str | None = None
    stale_control: bool = False
    """A cancel of a run nobody held took the stale path (HOST §4.1 ``staleControl``)."""


class RunQueueDoneForContinuation(Event, frozen=True, kw_only=True):
    """A parked parent handed its work to a continuation: its queue is ``done``."""

    TAG = "run.queue_done_for_continuation"

    run_id: OpaqueId
    continuation_run_id: OpaqueId


class RunUpdatePublished(Event, frozen=True, kw_only=True):
    """A progress update of an interaction was published on the run's trace."""

    TAG = "run.update_published"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("update",)

    run_id: OpaqueId
    sequence: Positive
    request_id: OpaqueId
    attempt_id: OpaqueId
    update: msgspec.Raw


class WorkerEnded(Event, frozen=True, kw_only=True):
    """A worker stopped; the run's queue loses its owner."""

    TAG = "worker.ended"
    TEXT_BLOBS: ClassVar[tuple[str, ...]] = ("diagnostic",)

    run_id: OpaqueId
    worker_epoch: OpaqueId
    status: WorkerEnd
    exit_code: int | None = None
    signal: str | None = None
    """The signal that ended a supervised worker's process (``SIGTERM``), if one did."""
    diagnostic: str | None = None
    """What a supervised worker wrote on stderr (at most 64 KiB), if anything."""


class RunLeaseRenewed(Event, frozen=True, kw_only=True):
    """A served host renewed the claim of a run its worker holds (HOST §1.9 heartbeat).

    One event a run and heartbeat: what a host wrote before ADR 0119, and
    what a log written then keeps; a host now writes ``run.leases_renewed``.
    """

    TAG = "run.lease_renewed"

    run_id: OpaqueId
    worker_epoch: OpaqueId
    lease_expires_at: SafeInt


LeaseClaim = tuple[OpaqueId, OpaqueId]
"""One worker's claim of a run: the run's id and the worker's epoch."""

MOST_CLAIMS: Final = 4_096
"""The claims one :class:`RunLeasesRenewed` names at most; a heartbeat with more writes several."""


class RunLeasesRenewed(Event, frozen=True, kw_only=True):
    """A served host's heartbeat renewed the claims of the runs their workers hold (HOST §1.9).

    One event a heartbeat for all of its claims, each to ``lease_expires_at``
    (ADR 0119): the heartbeat is what a host writes while nothing happens.
    It names no run of its own, so the log's run index and a prune pass it by.
    """

    TAG = "run.leases_renewed"

    claims: Annotated[tuple[LeaseClaim, ...], msgspec.Meta(min_length=1, max_length=MOST_CLAIMS)]
    lease_expires_at: SafeInt


class WorkerAttached(Event, frozen=True, kw_only=True):
    """A served host started the worker's process (HOST §7.3)."""

    TAG = "worker.attached"

    run_id: OpaqueId
    worker_epoch: OpaqueId
    pid: Positive
    start_identity: str


class WorkerMessageRecorded(Event, frozen=True, kw_only=True):
    """A worker message was answered; the response is stored for replay (DOMAIN §14)."""

    TAG = "worker.message_recorded"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("result",)
    TEXT_BLOBS: ClassVar[tuple[str, ...]] = ("error",)

    run_id: OpaqueId
    worker_epoch: OpaqueId
    message_id: OpaqueId
    operation: str
    fingerprint: Hex256
    outcome: WorkerOutcome
    revision: SafeInt | None = None
    result: Json = msgspec.UNSET
    error: str | None = None
    lease_expires_at: SafeInt | None = None


class AttemptStarted(Event, frozen=True, kw_only=True):
    """A node attempt began running."""

    TAG = "attempt.started"

    run_id: OpaqueId
    attempt_id: OpaqueId
    node_id: str
    attempt_number: Positive
    deadline_at: SafeInt | None = None


class AttemptChanged(Event, frozen=True, kw_only=True):
    """A node attempt moved to another status."""

    TAG = "attempt.changed"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("output",)

    run_id: OpaqueId
    attempt_id: OpaqueId
    status: AttemptStatus
    output: Json = msgspec.UNSET
