"""The payload and receipt of every client operation as types; imports msgspec only.

Each of the 40 operations has a payload type (what its decider reads from
`payload`) and a receipt type (what an `accepted` or `adopted` answer
carries), as msgspec Structs whose wire names are camelCase.  `pwf schema`
prints their JSON Schemas, `pwf dev export` writes them to `schemas/`
and checks them for drift, and the deciders build the receipts they type
with :func:`receipt` (ADR 0081).

The deciders keep their own checks of a payload, which give the original's
refusal texts; a payload type names the members they read, in the types
they accept.  Unknown members of a payload are ignored as the deciders
ignore them (`state.prune` refuses them, as its decider does).  A receipt
type forbids unknown members, so a member added to a receipt without its
type fails the documented examples' test.  Operations this pwf does not
implement yet (`controller.*`, `channel.reload` ...) take any payload
and have no receipt.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, NamedTuple

import msgspec

__all__ = ["OPERATION_TYPES", "Types", "operation_schema", "receipt"]

_SafeInt = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]
_Text = Annotated[str, msgspec.Meta(min_length=1)]
_AbsolutePath = Annotated[str, msgspec.Meta(pattern="^/")]
_Json = Any
"""Any JSON value (the empty schema)."""
_Unset = msgspec.UnsetType


class _Payload(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A payload: members the decider does not read are ignored."""


class _Receipt(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """A receipt: exactly these members."""


def receipt(value: msgspec.Struct) -> dict[str, object]:
    """The receipt as the wire object a :class:`~pwf.commands.Result` carries."""
    built = msgspec.to_builtins(value)
    assert isinstance(built, dict)
    return built


# --------------------------------------------------------------------------- payloads


class Empty(_Payload, frozen=True):
    """No members are read: send `{}`."""


class RunStart(_Payload, frozen=True):
    """`run.start` (`runId` on the request): the run to reserve, or to adopt when identical."""

    project_path: _AbsolutePath
    workflow_name: _Text
    workflow_source_ref: _Text
    workflow_source: dict[str, _Json]
    definition_digest: _Text
    definition_snapshot: _Json = None
    input: _Json = None
    origin_session_id: _Text | None = None
    parent_run_id: str | None = None
    execution_mode: Literal["interactive", "headless"] = "interactive"
    launch_options: dict[str, _Json] | None = None


class RunList(_Payload, frozen=True):
    """`run.list`: the newest runs; `limit` 100 unless a safe positive integer."""

    limit: int | None = None


class CheckpointAnswer(_Payload, frozen=True):
    """`checkpoint.answer` (`runId`: the parked run): start its continuation run."""

    continuation_run_id: _Text
    input: _Json = None


class DecisionAnswer(_Payload, frozen=True):
    """`decision.answer`: settle a decision request and start its continuation run."""

    request_id: _Text
    submission_id: _Text
    response: _Json = None


class InteractionSubmit(_Payload, frozen=True):
    """`interaction.submit` (`runId`): answer a pending interactive request."""

    request_id: _Text
    attempt: _Text
    submission_id: _Text
    value: _Json = None
    step: _Json = None


class InteractionUpdate(_Payload, frozen=True):
    """`interaction.update` (`runId`, `expectedRevision`): publish a run update."""

    request_id: _Text
    attempt: _Text
    value: dict[str, _Json]
    step: _Json = None


class _Session(_Payload, frozen=True):
    """The coordinator a session command comes from (DOMAIN §5.13)."""

    target_session_id: _Text
    coordinator_epoch: _Text


class BranchEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One delivered workflow message and the session entry it became."""

    workflow_message_id: _Text
    pi_session_entry_id: _Text


class ReportBranch(_Session, frozen=True):
    """`workflowMessage.reportBranch`: which messages the session's branch holds."""

    entries: list[BranchEntry]
    is_idle: bool
    has_pending_messages: bool


class TurnReport(_Session, frozen=True):
    """`workflowTurn.report`: a model turn started or ended."""

    workflow_message_id: _Text
    workflow_turn_id: _Text
    run_id: _Text
    state: Literal["started", "ended"]
    stop_reason: str | None = None
    response_session_entry_id: str | None = None


class ClearTerminal(_Session, frozen=True):
    """`sessionView.clearTerminal` (`runId` optional): forget the retained terminal view."""


class RunRestart(_Session, frozen=True):
    """`run.restart` (`runId`: the ended run): restart it from its terminal message."""

    workflow_message_id: _Text
    workflow_turn_id: str | None = None


class FollowUpQueue(_Session, frozen=True):
    """`followUp.queue` (`runId`): queue a prompt for the run's next turn."""

    prompt: _Text


class FollowUpRemove(_Session, frozen=True):
    """`followUp.remove` (`runId`): remove a queued follow-up."""

    follow_up_id: _Text


class Subscribe(_Payload, frozen=True):
    """`view.run.watch` (`runId`) and `view.run.unwatch`: one subscription."""

    subscription_id: _Text


class RunsWatch(_Payload, frozen=True):
    """`view.runs.watch`: the run list, `limit` items per page."""

    subscription_id: _Text
    limit: int | None = None


class SessionWatch(_Payload, frozen=True):
    """`view.session.watch`: a session's view; `coordinator` true attaches this connection."""

    subscription_id: _Text
    session_id: _Text
    coordinator: bool = False


class RunsPage(_Payload, frozen=True):
    """`view.runs.page`: the run list from `cursor`, at the list's `revision`."""

    revision: _Text
    cursor: _SafeInt
    limit: int | None = None


class ViewPage(_Payload, frozen=True):
    """`view.page` (`runId`): the window of one history around `cursor`."""

    kind: _Text
    cursor: _SafeInt


class ViewContent(_Payload, frozen=True):
    """`view.content` (`runId`): one chunk of a large run value."""

    path: Annotated[str, msgspec.Meta(pattern=r"^artifacts/sha256/[0-9a-f]{64}\.(json|txt)$")]
    offset: _SafeInt


class StateBackup(_Payload, frozen=True):
    """`state.backup`: an online backup to an absolute path."""

    destination: _AbsolutePath


class StatePrune(_Payload, frozen=True, forbid_unknown_fields=True):
    """`state.prune`: run trees finished before `before`; `apply` needs `backupPath`."""

    before: _Text
    apply: bool = False
    backup_path: _AbsolutePath | None = None


# --------------------------------------------------------------------------- receipts


class HostStatus(_Receipt, frozen=True):
    """`host.status`: direct mode's counts, or a served host's HOST §3.1 members."""

    state: str
    expired_claims: int
    parked_runs: int
    pending_interactions: int
    queued_runs: int
    running_runs: int
    waiting_runs: int
    workers: int | _Unset = msgspec.UNSET
    active_controller_workers: int | _Unset = msgspec.UNSET
    active_workers: int | _Unset = msgspec.UNSET
    ambiguous_effects: int | _Unset = msgspec.UNSET
    connected_clients: int | _Unset = msgspec.UNSET
    epoch: int | _Unset | None = msgspec.UNSET
    expires_at: str | _Unset | None = msgspec.UNSET
    heartbeat_at: str | _Unset | None = msgspec.UNSET
    lifecycle_contradictions: int | _Unset = msgspec.UNSET
    pending_controllers: int | _Unset = msgspec.UNSET
    socket_available: bool | _Unset = msgspec.UNSET
    started_at: str | _Unset | None = msgspec.UNSET


class Stopping(_Receipt, frozen=True):
    """`host.stop`."""

    stopping: bool


class RunStarted(_Receipt, frozen=True):
    """`run.start`: `generation` when reserved, `status` when an identical run is adopted."""

    run_id: str
    generation: int | _Unset = msgspec.UNSET
    status: str | _Unset = msgspec.UNSET


class RunQueue(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A run's queue row."""

    generation: int
    status: str


class RunView(_Receipt, frozen=True):
    """`run.status`: the run as the original's `run.status` shows it."""

    run_id: str
    root_run_id: str
    parent_run_id: str | None
    lineage_kind: str | None
    restart_number: int
    workflow_name: str
    workflow_ref: str
    execution_mode: str
    origin_session_id: str | None
    status: str
    status_detail: str | None
    paused: bool
    revision: int
    created_at: int
    updated_at: int
    finished_at: int | None
    input: _Json
    final_output: _Json
    error: _Json
    error_code: str | None
    queue: RunQueue | None
    interactions: list[dict[str, _Json]]


class RunListItem(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """One run of `run.list`."""

    run_id: str
    status: str
    paused: bool
    workflow_name: str
    origin_session_id: str | None
    queue_status: str | None
    updated_at: int


class RunListed(_Receipt, frozen=True):
    """`run.list`."""

    runs: list[RunListItem]


class Paused(_Receipt, frozen=True):
    """`run.pause`."""

    run_id: str
    status: str
    paused: bool
    already_paused: bool
    detail: str | None


class Resumed(_Receipt, frozen=True):
    """`run.resume`: the members depend on what the run was waiting for."""

    run_id: str
    already_running: bool
    resumable: bool
    detail: str | None
    active: bool | _Unset = msgspec.UNSET
    generation: int | _Unset = msgspec.UNSET
    paused: bool | _Unset = msgspec.UNSET
    status: str | _Unset = msgspec.UNSET
    waiting_for_interaction: bool | _Unset = msgspec.UNSET


class Cancelled(_Receipt, frozen=True):
    """`run.cancel`."""

    run_id: str
    status: str


class Continuation(_Receipt, frozen=True):
    """`checkpoint.answer`: the continuation run (`alreadyAnswered` when adopted)."""

    parent_run_id: str
    run_id: str
    status: str | _Unset = msgspec.UNSET
    already_answered: bool | _Unset = msgspec.UNSET
    detail: str | _Unset = msgspec.UNSET


class Decided(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """`decision.answer`: the continuation run; a retry answers with :class:`Submitted`'s ids."""

    decision: _Json | _Unset = msgspec.UNSET
    parent_run_id: str | _Unset = msgspec.UNSET
    request_id: str
    run_id: str | _Unset = msgspec.UNSET
    submission_id: str | _Unset = msgspec.UNSET
    status: str | _Unset = msgspec.UNSET


class Submitted(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """`interaction.submit` and a retried `decision.answer`: the submission's ids.

    Once a worker validated the submission, a retry is answered with the
    receipt the worker's verdict recorded instead (`{"status":"accepted"}`),
    so this type allows other members.
    """

    request_id: str | _Unset = msgspec.UNSET
    submission_id: str | _Unset = msgspec.UNSET
    status: str | _Unset = msgspec.UNSET


class Updated(_Receipt, frozen=True):
    """`interaction.update`."""

    attempt_id: str
    request_id: str
    sequence: int
    update: _Json


class BranchRecorded(_Receipt, frozen=True):
    """`workflowMessage.reportBranch`."""

    coordinator_epoch: str
    recorded: bool


class Turn(_Receipt, frozen=True):
    """`workflowTurn.report`: the turn as recorded."""

    workflow_turn_id: str
    workflow_message_id: str
    run_id: str
    target_session_id: str
    state: str
    started_at: int
    ended_at: int | None
    stop_reason: str | None
    response_session_entry_id: str | None


class Cleared(_Receipt, frozen=True):
    """`sessionView.clearTerminal`."""

    cleared: bool
    run_id: str | _Unset = msgspec.UNSET


class Restarted(_Receipt, frozen=True):
    """`run.restart`: the restarted run (`restartNumber` when this request made it)."""

    parent_run_id: str
    run_id: str
    restart_number: int | _Unset = msgspec.UNSET


class FollowUp(_Receipt, frozen=True):
    """`followUp.queue` and `followUp.remove`."""

    follow_up_id: str
    run_id: str
    state: str
    order: int | _Unset = msgspec.UNSET


class Subscribed(_Receipt, frozen=True):
    """The watches and `view.run.unwatch`; a coordinator's epoch with `coordinator` true."""

    subscribed: bool
    coordinator_epoch: str | _Unset = msgspec.UNSET


class RunsPageReceipt(_Receipt, frozen=True):
    """`view.runs.page`: one page of the run list (HOST §2.12)."""

    schema: str
    revision: str
    start: int
    total: int
    items: list[dict[str, _Json]]


class RunViewPayload(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """`view.run.get`: the run view of HOST §2.14 (every member: docs/served-views.md)."""

    schema: str
    run_id: str
    revision: int
    display: dict[str, _Json]
    manifest: dict[str, _Json]


class RunPage(_Receipt, frozen=True):
    """`view.page`: a window of one history of the run view."""

    schema: str
    run_id: str
    kind: str
    revision: int
    cursor: int
    start: int
    total: int
    items: list[_Json]


class ContentChunk(_Receipt, frozen=True):
    """`view.content`: one base64 chunk of a large run value."""

    schema: str
    run_id: str
    path: str
    media_type: str
    sha256: str
    bytes: int
    offset: int
    next_offset: int
    complete: bool
    data: str


class StateCounts(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """`state.status`'s counts of what the database holds."""

    active_leases: int
    controllers: int
    decisions: int
    pending_follow_ups: int
    pending_interactions: int
    resources: int
    runs: int
    settings_scopes: int
    unsettled_effects: int


class StateStatus(_Receipt, frozen=True):
    """`state.status`: the file's size and counts, and `pwf status --json`'s overview."""

    size_bytes: int
    counts: StateCounts
    overview: dict[str, _Json] | _Unset = msgspec.UNSET


class Verified(_Receipt, frozen=True):
    """`state.verify`: `valid` true; a failed check is a refusal naming it."""

    valid: bool


class ChannelStatus(_Receipt, frozen=True):
    """`channel.status`: pwf configures no decision channel."""

    configured: bool
    error: str | None
    ambiguous: list[_Json]
    profiles: list[_Json]


class BackedUp(_Receipt, frozen=True):
    """`state.backup`: where the backup was written."""

    destination: str


class Pruned(_Receipt, frozen=True):
    """`state.prune`: the original's report; `applied` false for a dry run."""

    applied: bool
    cutoff: str
    candidate_trees: int
    blocked_trees: int
    selected_runs: int
    deleted_rows: int
    deleted_blobs: int
    deleted_blob_bytes: int
    database_bytes_before: int
    database_bytes_after: int
    backup_path: str | _Unset = msgspec.UNSET
    blocked: list[_Json] | _Unset = msgspec.UNSET


# --------------------------------------------------------------------------- the table


class Types(NamedTuple):
    """An operation's payload type and its receipt type (None: none is answered)."""

    payload: type[msgspec.Struct] | None
    receipt: type[msgspec.Struct] | None


_NOT_YET: Final = Types(None, None)
"""An operation this pwf does not implement yet: any payload, no receipt."""

OPERATION_TYPES: Final[dict[str, Types]] = {
    "host.status": Types(Empty, HostStatus),
    "host.stop": Types(Empty, Stopping),
    "run.start": Types(RunStart, RunStarted),
    "run.status": Types(Empty, RunView),
    "run.list": Types(RunList, RunListed),
    "run.pause": Types(Empty, Paused),
    "run.resume": Types(Empty, Resumed),
    "run.cancel": Types(Empty, Cancelled),
    "checkpoint.answer": Types(CheckpointAnswer, Continuation),
    "decision.answer": Types(DecisionAnswer, Decided),
    "interaction.submit": Types(InteractionSubmit, Submitted),
    "interaction.update": Types(InteractionUpdate, Updated),
    "workflowMessage.reportBranch": Types(ReportBranch, BranchRecorded),
    "workflowTurn.report": Types(TurnReport, Turn),
    "sessionView.clearTerminal": Types(ClearTerminal, Cleared),
    "run.restart": Types(RunRestart, Restarted),
    "followUp.queue": Types(FollowUpQueue, FollowUp),
    "followUp.remove": Types(FollowUpRemove, FollowUp),
    "view.runs.watch": Types(RunsWatch, Subscribed),
    "view.runs.page": Types(RunsPage, RunsPageReceipt),
    "view.run.get": Types(Empty, RunViewPayload),
    "view.run.watch": Types(Subscribe, Subscribed),
    "view.run.unwatch": Types(Subscribe, Subscribed),
    "view.page": Types(ViewPage, RunPage),
    "view.content": Types(ViewContent, ContentChunk),
    "view.session.watch": Types(SessionWatch, Subscribed),
    "state.status": Types(Empty, StateStatus),
    "state.verify": Types(Empty, Verified),
    "state.backup": Types(StateBackup, BackedUp),
    "state.prune": Types(StatePrune, Pruned),
    "channel.status": Types(Empty, ChannelStatus),
    "run.changeSettings": _NOT_YET,
    "session.record": _NOT_YET,
    "channel.reload": _NOT_YET,
    "channel.recover": _NOT_YET,
    "controller.list": _NOT_YET,
    "controller.get": _NOT_YET,
    "controller.apply": _NOT_YET,
    "controller.reconcile": _NOT_YET,
    "controller.delete": _NOT_YET,
}
"""The types of each of the 40 operations; None where this pwf does not implement it yet."""


def operation_schema(operation: str) -> dict[str, object]:
    """The JSON Schemas of one operation's payload and receipt, as `pwf schema` prints them.

    Raises:
        KeyError: the operation is not one of the 40.
    """
    types = OPERATION_TYPES[operation]
    unknown: dict[str, object] = {
        "description": f"{operation} is not implemented by this pwf version: any payload"
    }
    return {
        "operation": operation,
        "payload": unknown if types.payload is None else _schema(types.payload),
        "receipt": None if types.receipt is None else _schema(types.receipt),
    }


def _schema(cls: type[msgspec.Struct]) -> dict[str, object]:
    return msgspec.json.schema(cls, schema_hook=_any_json)


def _any_json(kind: type) -> dict[str, object]:
    """Any JSON value (``object`` in the types) has the empty schema."""
    if kind is object:
        return {}
    raise NotImplementedError(kind)
