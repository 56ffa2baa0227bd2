"""Random client commands and worker messages: live projections equal a rebuild from the log.

A Hypothesis state machine drives :class:`pwf.host.Host` on a fresh SQLite
store with random runs, clients, idempotency keys and worker messages,
including retries of earlier requests and worker messages with the same and
with changed payloads (DOMAIN §7, §8, §14).  After every step it checks that
folding the whole log into an empty database gives exactly the live rows,
that no request id and no (clientId, idempotencyKey) was executed twice, and
that the hash chain verifies.  Time is an input: ``now`` only moves forward,
by a drawn amount per step, so leases expire too.

Sessions take part as well (DOMAIN §5.6-§5.9, §9.6, §10-§12): coordinators
attach, are replaced and detach; branch reports send messages and prove turns
lost; model turns start and end on the open message or others; expiry passes
run every 2 s of clock, and the host restarts after downtime.  After every step
there is at most one started turn per message, order numbers count up per
session as messages are created, deadlines only move later, every deadline
shift adds exactly its idle time, and the idle time a turn start credits is the
one the machine computes from its own fold of the log (DOMAIN §10.2).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import event as note_outcome
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from pwf import canonical
from pwf._sqlite import dump
from pwf.cli._options import open_store
from pwf.commands import supervision
from pwf.commands.catalogue import CLIENT_OPERATIONS, Route
from pwf.commands.prune import iso_utc
from pwf.errors import CommandError
from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    CommandRecorded,
    DeadlineShifted,
    Entry,
    InteractionRequested,
    MessageCreated,
    TurnEnded,
    TurnStarted,
    WorkerMessageRecorded,
)
from pwf.events import InteractionTimeoutStarted as TimeoutStarted
from pwf.fold.bulk import rebuild_into
from pwf.host import Host
from pwf.protocol.client import OUTCOMES, ClientRequest, ClientResponse
from pwf.protocol.worker import WORKER_OUTCOMES, WorkerResponse, parse_worker_message

if TYPE_CHECKING:
    from tests._depth import examples
    from tests.integration._pruning import assert_pruned
else:
    from _pruning import assert_pruned

    from _depth import examples

if TYPE_CHECKING:
    from tests._dbfile import assert_rows_as_viewed, checkpoint, opened, projections
else:
    from _dbfile import assert_rows_as_viewed, checkpoint, opened, projections

AT: Final = 1_764_403_200_000
"""The first clock reading (ms since the epoch)."""

RUNS: Final = ("run-1", "run-2", "run-3")
FINISHED: Final = (
    "SELECT finished_at FROM runs WHERE status IN ('completed', 'failed', 'timed_out', 'cancelled')"
)
HELD: Final = (
    "SELECT run_id, owner_worker_epoch, lease_expires_at FROM run_queue"
    " WHERE owner_worker_epoch IS NOT NULL ORDER BY run_id"
)
"""The run claims a worker holds, with their leases."""
LEASE_MS: Final = 30_000
SESSIONS: Final = ("s-1", "s-2")
CLIENTS: Final = ("cli-A", "cli-B")
SHARED_KEYS: Final = ("k-1", "k-2", "k-3")
NODES: Final = ("n-1", "n-2")
VALUES: Final[tuple[object, ...]] = ({}, {"answer": 1}, "yes", ["a", "\u00e9"], None)

ATTEMPT_ENDS: Final = frozenset({"completed", "failed", "timed_out", "cancelled"})
POLL_MS: Final = 2_000
"""How often the server looks for expired interaction deadlines."""

TICKS = st.sampled_from([0, 1, 1, 1, 50, 1_000])
"""How far the clock moves in one step (``leases_expire`` jumps past the 30 s lease)."""

DRIFT = st.sampled_from([0, 0, 0, 0, 0, 0, 0, -1])
"""Added to the expected revision: mostly current, sometimes stale."""

KEYS = st.sampled_from((None, None, None, None, *SHARED_KEYS))
"""A shared key (so keys get reused across requests) or None for a fresh one."""

WHO = st.tuples(st.sampled_from(CLIENTS), KEYS)

CONNECTIONS: Final = ("conn-1", "conn-2")
STOPS = st.sampled_from(["completed", "completed", "aborted", "error", "lost"])
BUDGETS = st.sampled_from([1_000, 60_000])
"""A node's model-turn budget (ms): one that a clock jump passes, one that it may not."""
JUMPS = st.sampled_from([0, 2_000, 61_000, 200_000])
"""How far the clock jumps before an expiry pass (past the 1 s and 60 s node budgets)."""

SESSION_DIRECT: Final = frozenset(
    {"workflowMessage.reportBranch", "workflowTurn.report", "view.session.watch"}
)
REPLACED: Final = "Workflow session coordinator was replaced"
UNREPORTED_CONTROL: Final = "Workflow session branch must be reported before session control"
UNREPORTED_TURNS: Final = "Workflow branch must be reported before model turns"
PAUSED_TURN: Final = "A paused workflow cannot start a model turn"
NOT_OPEN: Final = "Workflow turn start does not match the open workflow message"
BUSY: Final = "Workflow message already has a started turn: "

REQUEST_ID_REUSED: Final = "Request ID was reused with another payload"
KEY_REUSED: Final = "Idempotency key was reused with another payload"
MESSAGE_REUSED: Final = "Worker message ID was reused with another payload"
STALE_EPOCH: Final = "Worker epoch is stale"
MISSED_RULE: Final = "Workflow state constraint failed"
"""The host's safety net when a projection constraint fires: a rule some decider missed."""

KIND_OF: Final = {
    "worker.ready": "worker.ready",
    "worker.exiting": "worker.exiting",
    "node.started": "node.started",
    "node.finished": "node.finished",
    "node.failed": "node.failed",
    "interaction.request": "interaction.requested",
    "interaction.accept": "interaction.accepted",
    "interaction.reject": "interaction.rejected",
    "run.park": "run.parked",
    "run.finished": "run.finished",
}
"""The message kind each worker operation is sent with (others go as ``worker.progress``)."""


def _start_payload(session: str | None, value: object, *, headless: bool) -> dict[str, object]:
    payload: dict[str, object] = {
        "projectPath": "/p",
        "workflowName": "echo",
        "workflowSourceRef": "builtin:echo",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "definitionDigest": "d1",
        "definitionSnapshot": {},
        "input": value,
    }
    if session is not None:
        payload["originSessionId"] = session
    if headless:
        payload["executionMode"] = "headless"
    return payload


@dataclasses.dataclass
class Worker:
    """What the test knows of the worker it launched last for a run."""

    epoch: str
    generation: int
    revision: int
    attempt: str | None


@dataclasses.dataclass
class Timing:
    """The model's own fold of what DOMAIN §10.2 reads to credit idle time at a turn start."""

    started_at: dict[str, int | None] = dataclasses.field(default_factory=dict)
    """Per attempt: its start, moved by every shift."""
    attempt_of: dict[str, str] = dataclasses.field(default_factory=dict)
    """Per interactive request: its attempt."""
    created_at: dict[str, int] = dataclasses.field(default_factory=dict)
    """Per interactive request: when it was first requested."""
    step_source: dict[str, str] = dataclasses.field(default_factory=dict)
    """Per step message: the request it asks about."""
    ended_at: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    """Per request: when each turn on one of its step messages ended."""
    shifted: set[tuple[int, str]] = dataclasses.field(default_factory=set)
    """(batch, attempt) pairs that got a ``turn.start`` shift."""

    def idle_before_turn(self, request_id: str, now: int) -> int:
        """§10.2: ``now`` minus the latest ended step turn, else the attempt start or creation."""
        ended = self.ended_at.get(request_id)
        if ended:
            base = max(ended)
        else:
            started = self.started_at[self.attempt_of[request_id]]
            base = started if started is not None else self.created_at[request_id]
        return max(0, now - base)

    def request_of(self, attempt_id: str) -> str:
        """The request an attempt waits on (one per attempt, DOMAIN §5.4)."""
        return next(req for req, attempt in self.attempt_of.items() if attempt == attempt_id)


@dataclasses.dataclass(frozen=True)
class Sent:
    """A worker message as sent, and the response it got."""

    message: dict[str, Any]
    response: WorkerResponse


@dataclasses.dataclass(frozen=True)
class Stored:
    """A recorded command response, as the model expects it to be replayed."""

    fingerprint: str
    outcome: str
    revision: int | None
    receipt: bytes | None
    error: str | None


def _answer(
    response: ClientResponse | WorkerResponse,
) -> tuple[str, int | None, bytes | None, str | None]:
    """The members a replay must repeat (receipts compared as canonical bytes)."""
    body = response.receipt if isinstance(response, ClientResponse) else response.result
    receipt = None if body is canonical.MISSING else canonical.encode(body)
    return (response.outcome, response.revision, receipt, response.error)


class CommandPathMachine(RuleBasedStateMachine):
    """Drives the host with random requests and worker messages and checks the log after each."""

    requests = Bundle("requests")
    messages = Bundle("messages")

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="pwf-sm-"))
        self.store = open_store(str(self.directory / "state.db"), create=True)
        # The file as another program reads it (ADR 0059), one connection for every step: a
        # new one per step parsed the schema again, a tenth of the step's rebuild check.
        self.live = sqlite3.connect(self.directory / "state.db", isolation_level=None)
        epochs = itertools.count(1)
        self.host = Host(self.store, new_epoch=lambda: f"w-{next(epochs)}")
        self.now = AT
        self.ids = itertools.count(1)
        self.polled_at = AT
        self.workers: dict[str, Worker] = {}
        self.by_request: dict[str, Stored] = {}
        self.by_key: dict[tuple[str, str], Stored] = {}
        self.log: list[Entry] = []
        self.epochs: dict[str, list[str]] = {session: [] for session in SESSIONS}
        self.deadlines: dict[str, int] = {}
        self.ended: dict[str, str] = {}
        self.folded = 0
        self.folded_deadlines: dict[str, int | None] = {}
        self.timing = Timing()
        self.orders: dict[str, list[int]] = {}

    def teardown(self) -> None:
        self.live.close()
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def _tick(self, dt: int, *, poll: bool = True) -> None:
        """Move the clock; like the server, run an expiry pass every 2 s of it."""
        self.now += dt
        if poll and self.now - self.polled_at >= POLL_MS:
            self._expire()

    def _expire(self) -> None:
        """``Host.expire`` now: each started timeout cancels its request; none appends nothing."""
        self.polled_at = self.now
        before = self._head()
        started = self.host.expire(self.now)
        note_outcome(
            f"host.expire: {min(len(started), 2)}{'+' if len(started) > 1 else ''} started"
        )
        appended = self._new_entries(before)
        assert len(set(started)) == len(started)
        if not started:
            assert [] == appended
            return
        timeouts = [entry.event for entry in appended if isinstance(entry.event, TimeoutStarted)]
        assert [run for run, _ in started] == [event.run_id for event in timeouts]
        for event in timeouts:
            assert [("cancelled",)] == self._rows(
                "SELECT status FROM interactive_requests WHERE request_id = ?", event.request_id
            )

    def _fresh(self, prefix: str) -> str:
        return f"{prefix}-{next(self.ids)}"

    def _head(self) -> int:
        return self.store.head().seq

    def _new_entries(self, after: int) -> list[Entry]:
        return list(self.store.entries(after + 1))

    def _log(self) -> list[Entry]:
        """Every event so far; the log only grows, so earlier entries are kept, not re-read."""
        self.log.extend(self.store.entries(len(self.log) + 1))
        return self.log

    def _rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        return self.store.reader().table(sql, params)[1]

    def _known_runs(self) -> list[str]:
        stored = [row[0] for row in self._rows("SELECT run_id FROM runs")]
        return sorted(set(RUNS) | set(stored))

    def _request(
        self,
        operation: str,
        who: tuple[str, str | None],
        payload: object,
        *,
        run_id: str | None = None,
        expected_revision: int | None = None,
    ) -> ClientRequest:
        client, key = who
        return ClientRequest(
            request_id=self._fresh("r"),
            client_id=client,
            operation=operation,
            idempotency_key=key if key is not None else self._fresh("key"),
            payload=payload,
            run_id=run_id,
            expected_revision=expected_revision,
        )

    def _expected(self, request: ClientRequest) -> tuple[str, Stored | None] | None:
        """What §7.2 predicts for an executed command: a conflict text or a replay, else None."""
        stored = self.by_request.get(request.request_id)
        if stored is not None:
            if stored.fingerprint != request.fingerprint:
                return REQUEST_ID_REUSED, None
            return "replay", stored
        stored = self.by_key.get((request.client_id, request.idempotency_key))
        if stored is not None:
            if stored.fingerprint != request.fingerprint:
                return KEY_REUSED, None
            return "replay", stored
        return None

    def send(self, request: ClientRequest) -> ClientResponse:
        """Send one client request and check its response and what it appended."""
        route = CLIENT_OPERATIONS[request.operation].route
        executed = route in (Route.EXECUTED, Route.MAINTENANCE)
        expected = self._expected(request) if executed else None
        before = self._head()
        response = self.host.request(request, self.now)
        appended = self._new_entries(before)
        recorded = [entry.event for entry in appended if entry.type == "command.recorded"]
        assert response.outcome in OUTCOMES
        assert request.request_id == response.request_id
        note_outcome(f"{request.operation}: {response.outcome}")
        assert MISSED_RULE not in (response.error or "")
        if not executed:
            assert [] == recorded
            if request.operation in SESSION_DIRECT and response.outcome != "accepted":
                # Session reports and views refuse by raising: the batch is dropped.
                assert response.error
                assert [] == appended
            return response
        if expected is not None and expected[1] is None:
            assert ("conflict", expected[0]) == (response.outcome, response.error)
            assert [] == appended
            return response
        if expected is not None:
            stored = expected[1]
            assert stored is not None
            outcome = "adopted" if stored.outcome in ("accepted", "adopted") else stored.outcome
            replayed = (outcome, stored.revision, stored.receipt, stored.error)
            assert replayed == _answer(response)
            assert [] == appended
            return response
        if not appended:
            # The handler raised: refused with its message and nothing recorded (§7.3).
            assert response.outcome not in ("accepted", "adopted")
            assert response.error
            return response
        assert len(recorded) == 1
        event = appended[-1].event
        assert isinstance(event, CommandRecorded)
        assert (request.request_id, request.client_id, request.idempotency_key) == (
            event.request_id,
            event.client_id,
            event.idempotency_key,
        )
        assert (request.fingerprint, response.outcome) == (event.fingerprint, event.outcome)
        _, revision, receipt, error = _answer(response)
        stored = Stored(request.fingerprint, response.outcome, revision, receipt, error)
        self.by_request[request.request_id] = stored
        self.by_key[request.client_id, request.idempotency_key] = stored
        return response

    def _active(self, epoch: str, run_id: str, generation: int) -> bool:
        rows = self._rows(
            "SELECT run_id, generation FROM run_workers WHERE worker_epoch = ?"
            " AND status IN ('starting', 'running')",
            epoch,
        )
        return [(run_id, generation)] == rows

    def post(self, message: dict[str, Any]) -> WorkerResponse:
        """Send one worker message and check its response and what it appended."""
        active = self._active(message["workerEpoch"], message["runId"], message["generation"])
        answered = self._rows(
            "SELECT 1 FROM worker_messages WHERE worker_epoch = ? AND message_id = ?",
            message["workerEpoch"],
            message["messageId"],
        )
        before = self._head()
        response = self.host.worker(parse_worker_message(canonical.encode(message)), self.now)
        appended = self._new_entries(before)
        assert response.outcome in WORKER_OUTCOMES
        assert message["messageId"] == response.message_id
        note_outcome(f"worker {message['operation']}: {response.outcome}")
        assert MISSED_RULE not in (response.error or "")
        if not active:
            assert ("claimLost", STALE_EPOCH) == (response.outcome, response.error)
            assert [] == appended
            return response
        if answered:
            # A message id this epoch already answered gets its stored answer (or a refusal).
            assert [] == appended
        else:
            recorded = [entry for entry in appended if entry.type == "worker.message_recorded"]
            assert [appended[-1]] == recorded
            event = recorded[0].event
            assert isinstance(event, WorkerMessageRecorded)
            assert (message["workerEpoch"], message["messageId"], response.outcome) == (
                event.worker_epoch,
                event.message_id,
                event.outcome,
            )
        worker = self.workers.get(message["runId"])
        same_worker = worker is not None and worker.epoch == message["workerEpoch"]
        if same_worker and response.revision is not None:
            assert worker is not None
            worker.revision = response.revision
        return response

    def _message(
        self, run_id: str, operation: str, payload: object, drift: int = 0
    ) -> dict[str, Any]:
        worker = self.workers[run_id]
        message: dict[str, Any] = {
            "schema": "pi-workflows.worker-message.v1",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": self._fresh("m"),
            "kind": KIND_OF.get(operation, "worker.progress"),
            "operation": operation,
            "runId": run_id,
            "generation": worker.generation,
            "workerEpoch": worker.epoch,
            "expectedRevision": max(0, worker.revision + drift),
            "payload": payload,
        }
        if worker.attempt is not None:
            message["attemptId"] = worker.attempt
        return message

    def _worker_run(self, data: st.DataObject) -> str:
        """A run whose latest worker is still active, else any run the test launched."""
        live = [
            run
            for run, worker in sorted(self.workers.items())
            if self._active(worker.epoch, run, worker.generation)
        ]
        return data.draw(st.sampled_from(live or sorted(self.workers)), label="worker of run")

    def _pending(self, data: st.DataObject, decisions: bool = False) -> tuple[Any, ...]:
        """An interactive request (id, run, attempt, revision, node), or one that does not exist."""
        rows = self._rows(
            "SELECT r.request_id, r.run_id, r.attempt_id, r.revision, a.node_id"
            " FROM interactive_requests r LEFT JOIN node_attempts a ON a.attempt_id = r.attempt_id"
            " WHERE (r.kind = 'decision') = ? ORDER BY r.request_id",
            decisions,
        )
        if not decisions:
            rows += self._rows(
                "SELECT request_id, run_id, attempt_id, revision, NULL FROM interactive_requests"
                " WHERE kind = 'decision' ORDER BY request_id"
            )
        missing = ("decision-x" if decisions else "interaction-x", "run-1", "a-x", 1, "n-1")
        row: tuple[Any, ...] = data.draw(
            st.sampled_from([*rows, missing]), label="interactive request"
        )
        return row

    def _has_requests(self, decisions: bool = False) -> bool:
        kinds = "= 'decision'" if decisions else "IS NOT NULL"
        return bool(self._rows(f"SELECT 1 FROM interactive_requests WHERE kind {kinds} LIMIT 1"))  # noqa: S608 - fixed fragments

    # ------------------------------------------------------------------ client commands

    @rule(
        target=requests,
        run=st.sampled_from(RUNS),
        session=st.sampled_from((*SESSIONS, None)),
        value=st.sampled_from(VALUES),
        headless=st.booleans(),
        who=WHO,
        dt=TICKS,
    )
    def start_run(self, *, run, session, value, headless, who, dt):  # noqa: PLR0913 - drawn inputs
        """``run.start`` from small pools of runs, sessions and inputs: new, adopted or refused."""
        self._tick(dt)
        payload = _start_payload(session, value, headless=headless)
        request = self._request("run.start", who, payload, run_id=run)
        self.send(request)
        return request

    @rule(
        target=requests,
        data=st.data(),
        operation=st.sampled_from(
            ["run.status", "run.pause", "run.resume", "run.cancel", "run.list", "host.status"]
        ),
        who=WHO,
        dt=TICKS,
    )
    def run_command(self, data, operation, who, dt):
        """A read or control command (status, list, pause, resume, cancel, host status)."""
        self._tick(dt)
        if operation in ("run.list", "host.status"):
            limit = data.draw(st.sampled_from([None, 1, 2]), label="limit")
            payload = {} if limit is None else {"limit": limit}
            request = self._request(operation, who, payload)
        else:
            run = data.draw(st.sampled_from(self._known_runs()), label="run")
            request = self._request(operation, who, {}, run_id=run)
        self.send(request)
        return request

    @rule(target=requests, who=WHO, dt=TICKS)
    def host_stop(self, who, dt):
        """``host.stop``: recorded, and answered again from the record on retry."""
        self._tick(dt)
        request = self._request("host.stop", who, {})
        self.send(request)
        return request

    @precondition(lambda self: self._has_requests())
    @rule(
        target=requests,
        data=st.data(),
        value=st.sampled_from(VALUES),
        pooled=st.booleans(),
        drift=st.sampled_from([0, 0, 0, -1]),
        who=WHO,
        dt=TICKS,
    )
    def interaction_submit(self, *, data, value, pooled, drift, who, dt):  # noqa: PLR0913 - drawn inputs
        """``interaction.submit`` against a request (or a missing one); direct, never recorded."""
        self._tick(dt)
        request_id, run_id, attempt, revision, node = self._pending(data)
        payload = {
            "requestId": request_id,
            "attempt": attempt,
            "step": node,
            "submissionId": "sub-shared" if pooled else self._fresh("sub"),
            "value": value,
        }
        request = self._request(
            "interaction.submit", who, payload, run_id=run_id, expected_revision=revision + drift
        )
        self.send(request)
        return request

    @precondition(lambda self: self._has_requests())
    @rule(
        target=requests,
        data=st.data(),
        update=st.sampled_from(VALUES),
        drift=st.sampled_from([0, 0, 0, 1]),
        who=WHO,
        dt=TICKS,
    )
    def interaction_update(self, data, update, drift, who, dt):
        """``interaction.update`` with the request revision, sometimes a stale one."""
        self._tick(dt)
        request_id, run_id, attempt, revision, node = self._pending(data)
        payload = {
            "requestId": request_id,
            "attempt": attempt,
            "step": node,
            "value": {"update": update},
        }
        request = self._request(
            "interaction.update", who, payload, run_id=run_id, expected_revision=revision + drift
        )
        self.send(request)
        return request

    @precondition(lambda self: self._has_requests(decisions=True))
    @rule(
        target=requests,
        data=st.data(),
        answer=st.sampled_from(VALUES),
        pooled=st.booleans(),
        drift=st.sampled_from([0, 0, 0, -1]),
        who=WHO,
        dt=TICKS,
    )
    def decision_answer(self, *, data, answer, pooled, drift, who, dt):  # noqa: PLR0913 - drawn inputs
        """``decision.answer`` for a decision request (or a missing one)."""
        self._tick(dt)
        request_id, _, _, revision, _ = self._pending(data, decisions=True)
        payload = {
            "requestId": request_id,
            "response": answer,
            "submissionId": "sub-shared" if pooled else self._fresh("sub"),
        }
        request = self._request(
            "decision.answer", who, payload, expected_revision=max(0, revision + drift)
        )
        self.send(request)
        return request

    @rule(
        target=requests,
        data=st.data(),
        value=st.sampled_from(VALUES),
        pooled=st.booleans(),
        who=WHO,
        dt=TICKS,
    )
    def checkpoint_answer(self, data, value, pooled, who, dt):
        """``checkpoint.answer`` for a run parked at a checkpoint, or one that is not."""
        self._tick(dt)
        parked = [
            row[0] for row in self._rows("SELECT run_id FROM run_checkpoints ORDER BY run_id")
        ]
        run = data.draw(st.sampled_from([*parked, *RUNS]), label="parent run")
        child = "cont-shared" if pooled else self._fresh("cont")
        payload = {"continuationRunId": child, "input": value}
        request = self._request("checkpoint.answer", who, payload, run_id=run)
        self.send(request)
        return request

    # ------------------------------------------------------------------ client retries

    @rule(request=requests, dt=TICKS)
    def retry_identical(self, request, dt):
        """The same request again: a recorded one is replayed, never executed twice."""
        self._tick(dt)
        self.send(request)

    @rule(target=requests, request=requests, dt=TICKS)
    def retry_with_new_request_id(self, request, dt):
        """Same client, key and payload under a new request id: adopted or the stored outcome."""
        self._tick(dt)
        again = msgspec.structs.replace(request, request_id=self._fresh("r"))
        self.send(again)
        return again

    @rule(request=requests, dt=TICKS)
    def retry_same_id_other_payload(self, request, dt):
        """A recorded request id with another payload is a conflict that appends nothing."""
        self._tick(dt)
        changed = msgspec.structs.replace(
            request, payload={**request.payload, "retry": next(self.ids)}
        )
        self.send(changed)

    @rule(request=requests, dt=TICKS)
    def retry_same_key_other_payload(self, request, dt):
        """A recorded key with another payload under a new request id is a conflict."""
        self._tick(dt)
        changed = msgspec.structs.replace(
            request,
            request_id=self._fresh("r"),
            payload={**request.payload, "retry": next(self.ids)},
        )
        self.send(changed)

    # ------------------------------------------------------------------ workers

    def _launch(self, run: str) -> Sent | None:
        """Claim a run for a new worker and send worker.ready; None when it cannot be claimed."""
        before = self._head()
        refusal: str | None = None
        try:
            envelope = self.host.launch(run, self.now)
        except CommandError as error:
            refusal = str(error)
        if refusal is not None:
            # A run that cannot be claimed is refused without touching the log.
            assert MISSED_RULE not in refusal
            assert before == self._head()
            return None
        active = self._rows(
            "SELECT attempt_id FROM node_attempts WHERE run_id = ?"
            " AND status IN ('pending', 'running', 'waiting', 'interrupted')",
            run,
        )
        self.workers[run] = Worker(
            envelope.worker_epoch, envelope.generation, 0, active[0][0] if active else None
        )
        message = self._message(run, "worker.ready", {})
        return Sent(message, self.post(message))

    @initialize(
        target=requests,
        session=st.sampled_from(SESSIONS),
        stage=st.sampled_from(["queued", "asking", "attached", "turning", "finished"]),
        timeout=BUDGETS,
    )
    def first_run(self, session, stage, timeout):
        """Every example starts with one interactive run, so workers have work early.

        Past ``queued``, a worker takes it to its first interaction (on a node with
        ``timeout`` as budget), or for ``finished`` to its end; then ``attached``
        adds a coordinator whose branch holds the step message, and ``turning``
        and ``finished`` a model turn started on the open message.
        """
        request = self._request(
            "run.start", ("cli-A", None), _start_payload(session, {}, headless=False)
        )
        request = msgspec.structs.replace(request, run_id="run-1")
        self.send(request)
        if stage == "queued" or self._launch("run-1") is None:
            return request
        if stage == "finished":
            payload = {"status": "completed", "finalOutput": {"done": True}}
            assert self.post(self._message("run-1", "run.finished", payload)).outcome == "accepted"
        else:
            payload = {"nodeId": "n-1", "timeoutMs": timeout}
            message = self._message("run-1", "node.started", payload)
            message["attemptId"] = self.workers["run-1"].attempt = self._fresh("a")
            assert self.post(message).outcome == "accepted"
            payload = {"contract": {"prompt": "Hi?"}}
            message = self._message("run-1", "interaction.request", payload)
            assert self.post(message).outcome == "accepted"
        if stage == "asking":
            return request
        self._tick(1)
        epoch = self._attach(session, CONNECTIONS[0], ("cli-B", None))
        (message_id, *_) = self._session_messages(session, "pending")[-1]
        self._report(session, epoch, {message_id: "pi-entry-0"}, idle=False, pending=False)
        if stage != "attached":
            self._tick(1)
            self._start(session, epoch, message_id, "t-0", opened=self._open(session))
        return request

    @rule(
        target=messages,
        data=st.data(),
        decision=st.booleans(),
        node=st.sampled_from(NODES),
        dt=TICKS,
    )
    def run_to_interaction(self, data, decision, node, dt):
        """Launch, ready, start a node and ask for input: four steps in one, each checked."""
        self._tick(dt)
        run = data.draw(st.sampled_from(self._known_runs()), label="run")
        ready = self._launch(run)
        if ready is None:
            return multiple()
        sent = [ready]
        if self.workers[run].attempt is None:
            attempt = self._fresh("a")
            payload = {"nodeId": node, "timeoutMs": data.draw(BUDGETS, label="budget")}
            message = self._message(run, "node.started", payload)
            message["attemptId"] = attempt
            response = self.post(message)
            sent.append(Sent(message, response))
            if response.outcome == "accepted":
                self.workers[run].attempt = attempt
        if decision:
            payload = {"decisionId": f"decision-{self._fresh('d')}", "contract": {"prompt": "Go?"}}
            message = self._message(run, "store.createHumanDecisionRequest", payload)
        else:
            message = self._message(run, "interaction.request", {"contract": {"prompt": "Name?"}})
        sent.append(Sent(message, self.post(message)))
        return multiple(*sent)

    @precondition(lambda self: self._has_requests())
    @rule(target=messages, data=st.data(), accept=st.booleans(), who=WHO, dt=TICKS)
    def answer_and_validate(self, data, accept, who, dt):
        """Submit an answer, launch a worker to validate it and send its verdict, each checked."""
        self._tick(dt)
        request_id, run_id, attempt, revision, node = self._pending(data)
        payload = {
            "requestId": request_id,
            "attempt": attempt,
            "step": node,
            "submissionId": self._fresh("sub"),
            "value": "yes",
        }
        self.send(
            self._request(
                "interaction.submit", who, payload, run_id=run_id, expected_revision=revision
            )
        )
        ready = self._launch(run_id)
        if ready is None:
            return multiple()
        if accept:
            message = self._message(run_id, "interaction.accept", {})
        else:
            message = self._message(run_id, "interaction.reject", {"error": "bad answer"})
        return multiple(ready, Sent(message, self.post(message)))

    @rule(target=messages, data=st.data(), dt=TICKS)
    def launch(self, data, dt):
        """Claim a run for a new worker (refusal is a valid outcome) and send worker.ready."""
        self._tick(dt)
        run = data.draw(st.sampled_from(self._known_runs()), label="run")
        sent = self._launch(run)
        return multiple() if sent is None else sent

    def _say(self, data: st.DataObject, operation: str, payload: object, drift: int) -> Sent:
        run = self._worker_run(data)
        message = self._message(run, operation, payload, drift)
        return Sent(message, self.post(message))

    @precondition(lambda self: self.workers)
    @rule(
        target=messages,
        data=st.data(),
        node=st.sampled_from(NODES),
        timeout=st.sampled_from([None, 1_000, 60_000]),
        drift=DRIFT,
        dt=TICKS,
    )
    def node_started(self, data, node, timeout, drift, dt):
        """``node.started`` with a fresh attempt id; the model follows the accepted attempt."""
        self._tick(dt)
        run = self._worker_run(data)
        attempt = self._fresh("a")
        payload: dict[str, object] = {"nodeId": node}
        if timeout is not None:
            payload["timeoutMs"] = timeout
        message = self._message(run, "node.started", payload, drift)
        message["attemptId"] = attempt
        response = self.post(message)
        if response.outcome == "accepted":
            self.workers[run].attempt = attempt
        return Sent(message, response)

    @precondition(lambda self: self.workers)
    @rule(
        target=messages,
        data=st.data(),
        prompt=st.sampled_from(["Name?", "Age?"]),
        assistant=st.booleans(),
        drift=DRIFT,
        dt=TICKS,
    )
    def interaction_request(self, data, prompt, assistant, drift, dt):
        """``interaction.request`` on the worker's attempt: parks the run and ends the worker."""
        self._tick(dt)
        payload: dict[str, object] = {"contract": {"prompt": prompt}}
        if assistant:
            payload["kind"] = "assistant"
        return self._say(data, "interaction.request", payload, drift)

    @precondition(lambda self: self.workers)
    @rule(
        target=messages,
        data=st.data(),
        decision=st.sampled_from(["decision-1", "decision-2"]),
        drift=DRIFT,
        dt=TICKS,
    )
    def decision_request(self, data, decision, drift, dt):
        """``store.createHumanDecisionRequest`` with one of a few decision ids."""
        self._tick(dt)
        payload = {"decisionId": decision, "contract": {"prompt": "Go?"}}
        return self._say(data, "store.createHumanDecisionRequest", payload, drift)

    @precondition(lambda self: self.workers)
    @rule(target=messages, data=st.data(), accept=st.booleans(), drift=DRIFT, dt=TICKS)
    def validate(self, data, accept, drift, dt):
        """The worker's verdict on a validating submission."""
        self._tick(dt)
        if accept:
            return self._say(data, "interaction.accept", {}, drift)
        return self._say(data, "interaction.reject", {"error": "bad answer"}, drift)

    @precondition(lambda self: self.workers)
    @rule(
        target=messages,
        data=st.data(),
        output=st.sampled_from(VALUES),
        failed=st.sampled_from([None, None, False, True]),
        drift=DRIFT,
        dt=TICKS,
    )
    def node_ended(self, data, output, failed, drift, dt):
        """``node.finished`` with an output, or ``node.failed`` (timed out or not)."""
        self._tick(dt)
        if failed is None:
            return self._say(data, "node.finished", {"output": output}, drift)
        return self._say(data, "node.failed", {"timedOut": failed}, drift)

    @precondition(lambda self: self.workers)
    @rule(
        target=messages,
        data=st.data(),
        status=st.sampled_from(["completed", "failed", "timed_out", "cancelled"]),
        drift=DRIFT,
        dt=TICKS,
    )
    def run_finished(self, data, status, drift, dt):
        """``run.finished`` with a terminal status."""
        self._tick(dt)
        payload: dict[str, object] = {"status": status, "finalOutput": {"done": True}}
        if status != "completed":
            payload["error"] = {"message": status}
        return self._say(data, "run.finished", payload, drift)

    @precondition(lambda self: self.workers)
    @rule(
        target=messages,
        data=st.data(),
        operation=st.sampled_from(["run.park", "worker.exiting", "store.readRun"]),
        checkpoint=st.sampled_from(NODES),
        drift=DRIFT,
        dt=TICKS,
    )
    def worker_leaves(self, data, operation, checkpoint, drift, dt):
        """Park at a checkpoint, exit, or just read the run."""
        self._tick(dt)
        payload: dict[str, object] = {}
        if operation == "run.park":
            payload = {"checkpoint": checkpoint}
        elif operation == "worker.exiting":
            payload = {"exitCode": 0}
        return self._say(data, operation, payload, drift)

    @rule()
    def leases_expire(self):
        """The clock jumps past every worker lease."""
        self._tick(31_000)

    @rule(sent=messages, dt=TICKS)
    def worker_retry_identical(self, sent, dt):
        """The same worker message again: the stored response, nothing appended."""
        self._tick(dt)
        before = self._head()
        response = self.post(sent.message)
        assert before == self._head()
        if response.error != STALE_EPOCH:
            assert _answer(sent.response) == _answer(response)

    @rule(sent=messages, dt=TICKS)
    def worker_retry_other_payload(self, sent, dt):
        """A worker message id reused with another payload is rejected and appends nothing."""
        self._tick(dt)
        changed = {**sent.message, "payload": {**sent.message["payload"], "retry": next(self.ids)}}
        before = self._head()
        response = self.post(changed)
        assert before == self._head()
        if response.error != STALE_EPOCH:
            assert ("rejected", MESSAGE_REUSED) == (response.outcome, response.error)

    # ------------------------------------------------------------------ sessions

    def _coordinator(self, session: str) -> tuple[str, str, int] | None:
        """The session's live (epoch, connection, branch reported), as the store has it."""
        rows = self._rows(
            "SELECT coordinator_epoch, connection_id, branch_reported FROM session_coordinators"
            " WHERE target_session_id = ?",
            session,
        )
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def _session(self, data: st.DataObject) -> str:
        """A session, those with a live coordinator three times as likely."""
        attached = [session for session in SESSIONS if self._coordinator(session) is not None]
        session: str = data.draw(st.sampled_from([*SESSIONS, *attached * 3]), label="session")
        return session

    def _epoch(self, data: st.DataObject, session: str) -> str:
        """The session's live coordinator epoch mostly, else a replaced or unknown one."""
        live = self._coordinator(session)
        if live is not None and data.draw(st.sampled_from([True] * 5 + [False]), label="live"):
            return live[0]
        stale = [epoch for epoch in self.epochs[session] if live is None or epoch != live[0]]
        epoch: str = data.draw(st.sampled_from([*stale, "session-epoch-x"]), label="stale epoch")
        return epoch

    def _fenced(self, session: str, epoch: str) -> str | None:
        """The refusal session control must give for this epoch, if any (DOMAIN §5.13)."""
        live = self._coordinator(session)
        if live is None or live[0] != epoch:
            return REPLACED
        return None if live[2] else UNREPORTED_CONTROL

    def _interrupted(self, session: str, *, expected: bool = True) -> None:
        """Unfinished attempts of pending requests with an open step turn are interrupted.

        With ``expected=False``: none of them is (the session's coordinator is back).
        """
        statuses = self._rows(
            "SELECT DISTINCT a.status FROM node_attempts a"
            " JOIN interactive_requests r ON r.attempt_id = a.attempt_id"
            " JOIN workflow_messages m ON m.source_id = r.request_id AND m.kind = 'step'"
            " JOIN workflow_turns t ON t.workflow_message_id = m.workflow_message_id"
            " WHERE r.target_session_id = ? AND r.status = 'pending' AND t.state = 'started'"
            " AND a.status IN ('pending', 'running', 'waiting', 'interrupted')",
            session,
        )
        found = {row[0] for row in statuses}
        assert found <= {"interrupted"} if expected else "interrupted" not in found

    def _session_messages(self, session: str, *statuses: str) -> list[tuple[Any, ...]]:
        marks = ", ".join("?" * len(statuses))
        return self._rows(
            "SELECT workflow_message_id, run_id, kind, status, pi_session_entry_id"  # noqa: S608 - placeholders only
            f" FROM workflow_messages WHERE target_session_id = ? AND status IN ({marks})"
            " ORDER BY order_number",
            session,
            *statuses,
        )

    def _note(self, request: ClientRequest, response: ClientResponse) -> None:
        """Record which refusal a session operation met, for the run's statistics."""
        if response.error:
            note_outcome(f"{request.operation}: {response.outcome}: {response.error[:60]}")

    def _attach(self, session: str, connection: str, who: tuple[str, str | None]) -> str:
        """Attach a coordinator through ``view.session.watch`` and check the fencing."""
        previous = self._coordinator(session)
        payload = {
            "subscriptionId": f"session:{session}",
            "sessionId": session,
            "coordinator": True,
            "connectionId": connection,
        }
        response = self.send(self._request("view.session.watch", who, payload))
        assert response.outcome == "accepted"
        assert isinstance(response.receipt, dict)
        epoch = response.receipt["coordinatorEpoch"]
        assert isinstance(epoch, str)
        assert (epoch, connection, 0) == self._coordinator(session)
        assert epoch not in self.epochs[session]
        self.epochs[session].append(epoch)
        replaced = previous is not None and previous[1] != connection
        note_outcome(f"coordinator attach: {'replaced' if replaced else 'fresh or same'}")
        if replaced:
            self._interrupted(session)
        return epoch

    def _report(
        self,
        session: str,
        epoch: str,
        entries: dict[str, str],
        *,
        idle: bool,
        pending: bool,
    ) -> ClientRequest:
        """Send ``workflowMessage.reportBranch`` and check what an accepted report changed."""
        payload = {
            "targetSessionId": session,
            "coordinatorEpoch": epoch,
            "entries": [
                {"workflowMessageId": key, "piSessionEntryId": value}
                for key, value in entries.items()
            ],
            "isIdle": idle,
            "hasPendingMessages": pending,
        }
        live = self._coordinator(session)
        request = self._request("workflowMessage.reportBranch", ("cli-A", None), payload)
        response = self.send(request)
        self._note(request, response)
        if live is None or live[0] != epoch:
            assert ("rejected", REPLACED) == (response.outcome, response.error)
            return request
        if response.outcome != "accepted":
            return request
        note_outcome(f"reportBranch accepted: idle={idle and not pending}, {len(entries)} listed")
        assert (epoch, live[1], 1) == self._coordinator(session)
        for message_id, entry in entries.items():
            assert [("sent", entry)] == self._rows(
                "SELECT status, pi_session_entry_id FROM workflow_messages"
                " WHERE workflow_message_id = ?",
                message_id,
            )
        if idle and not pending:
            assert not self._rows(
                "SELECT 1 FROM workflow_turns WHERE target_session_id = ? AND state = 'started'",
                session,
            )
        if not live[2]:
            # The first report of an epoch credits the time away and resumes the attempts.
            self._interrupted(session, expected=False)
        return request

    def _open(self, session: str) -> str | None:
        """The session's open message, as ``view.session`` names it."""
        opened = self.host.session_view(session, self.now)["openMessageId"]
        assert opened is None or isinstance(opened, str)
        return opened

    def _start(
        self,
        session: str,
        epoch: str,
        message_id: str,
        turn_id: str,
        *,
        opened: str | None,
    ) -> ClientRequest:
        """Report a turn started on a message and check the refusal or the turn it opened."""
        rows = self._session_messages(session, "pending", "sent", "cancelled")
        run_id, kind = next((row[1], row[2]) for row in rows if row[0] == message_id)
        existing = bool(
            self._rows("SELECT 1 FROM workflow_turns WHERE workflow_turn_id = ?", turn_id)
        )
        expected = self._fenced(session, epoch)
        if expected == UNREPORTED_CONTROL:
            expected = UNREPORTED_TURNS
        paused = self._rows("SELECT paused FROM runs WHERE run_id = ?", run_id)[0][0]
        if expected is None and not existing and paused:
            expected = PAUSED_TURN
        if expected is None and message_id != opened:
            expected = NOT_OPEN
        if expected is None and not existing and self._started_turn(message_id) is not None:
            expected = f"{BUSY}{message_id}"
        payload = {
            "targetSessionId": session,
            "coordinatorEpoch": epoch,
            "workflowMessageId": message_id,
            "workflowTurnId": turn_id,
            "runId": run_id,
            "state": "started",
        }
        request = self._request("workflowTurn.report", ("cli-A", None), payload)
        response = self.send(request)
        self._note(request, response)
        if expected is not None:
            assert ("rejected", expected) == (response.outcome, response.error)
            return request
        if response.outcome != "accepted":
            return request
        assert isinstance(response.receipt, dict)
        row = self._rows(
            "SELECT workflow_message_id, run_id, target_session_id, state FROM workflow_turns"
            " WHERE workflow_turn_id = ?",
            turn_id,
        )
        assert [(message_id, run_id, session, response.receipt["state"])] == row
        note_outcome(f"turn started: {kind} {'again' if existing else 'new'}")
        if kind == "step" and not existing:
            assert response.receipt["state"] == "started"
            assert not self._rows(
                "SELECT 1 FROM workflow_messages m JOIN workflow_messages o"
                " ON o.source_id = m.source_id AND o.kind = 'step'"
                " WHERE m.workflow_message_id = ? AND o.status = 'pending'",
                message_id,
            )
        return request

    def _end(
        self,
        session: str,
        epoch: str,
        turn: tuple[Any, ...],
        stop: str,
        response_entry: str | None,
    ) -> ClientRequest:
        """Report a turn ended and check the saved end and the §9.6 consequences."""
        turn_id, message_id, run_id, state, kind, source = turn
        expected = self._fenced(session, epoch)
        if expected == UNREPORTED_CONTROL:
            expected = UNREPORTED_TURNS
        payload = {
            "targetSessionId": session,
            "coordinatorEpoch": epoch,
            "workflowMessageId": message_id,
            "workflowTurnId": turn_id,
            "runId": run_id,
            "state": "ended",
            "stopReason": stop,
            "responseSessionEntryId": response_entry,
        }
        step_pending = kind == "step" and bool(
            self._rows(
                "SELECT 1 FROM interactive_requests WHERE request_id = ? AND status = 'pending'",
                source,
            )
        )
        request = self._request("workflowTurn.report", ("cli-A", None), payload)
        response = self.send(request)
        self._note(request, response)
        if expected is not None:
            assert ("rejected", expected) == (response.outcome, response.error)
            return request
        if response.outcome != "accepted":
            return request
        note_outcome(f"turn ended: {kind} {state} -> {stop}")
        row = self._rows(
            "SELECT state, stop_reason, response_session_entry_id FROM workflow_turns"
            " WHERE workflow_turn_id = ?",
            turn_id,
        )
        assert [("ended", stop, response_entry)] == row
        if state == "started" and step_pending and stop == "aborted":
            # §9.6 step 3: the parked run is paused and its pending steps cancelled.
            assert [(1,)] == self._rows("SELECT paused FROM runs WHERE run_id = ?", run_id)
            assert not self._rows(
                "SELECT 1 FROM workflow_messages WHERE source_id = ? AND kind = 'step'"
                " AND status = 'pending'",
                source,
            )
        return request

    def _started_turn(self, message_id: str) -> str | None:
        """The message's started turn, if any."""
        rows = self._rows(
            "SELECT workflow_turn_id FROM workflow_turns"
            " WHERE workflow_message_id = ? AND state = 'started'",
            message_id,
        )
        return rows[0][0] if rows else None

    def _turns(self, session: str) -> list[tuple[Any, ...]]:
        """The session's turns (id, message, run, state, message kind, source), started first."""
        return self._rows(
            "SELECT t.workflow_turn_id, t.workflow_message_id, t.run_id, t.state, m.kind,"
            " m.source_id FROM workflow_turns t JOIN workflow_messages m"
            " ON m.workflow_message_id = t.workflow_message_id"
            " WHERE t.target_session_id = ? ORDER BY t.state DESC, t.workflow_turn_id",
            session,
        )

    @rule(
        session=st.sampled_from(SESSIONS),
        connection=st.sampled_from(CONNECTIONS),
        who=WHO,
        dt=TICKS,
    )
    def coordinator_attach(self, session, connection, who, dt):
        """``view.session.watch`` as coordinator: a new epoch, fencing (and idling) the old one."""
        self._tick(dt)
        self._attach(session, connection, who)

    @rule(session=st.sampled_from(SESSIONS), who=WHO, data=st.data(), dt=TICKS)
    def view_session(self, session, who, data, dt):
        """A watch without attaching only subscribes; the snapshot names the live epoch."""
        self._tick(dt)
        payload: dict[str, object] = {"subscriptionId": f"view:{session}", "sessionId": session}
        if data.draw(st.booleans(), label="explicit false"):
            payload["coordinator"] = False
        response = self.send(self._request("view.session.watch", who, payload))
        assert ("accepted", {"subscribed": True}) == (response.outcome, response.receipt)
        epoch = self._epoch(data, session) if data.draw(st.booleans(), label="as epoch") else None
        view = self.host.session_view(session, self.now, epoch)
        live = self._coordinator(session)
        assert view["coordinatorEpoch"] == (None if live is None else live[0])
        opened = view["openMessageId"]
        if opened is not None:
            assert [(session, "sent")] == self._rows(
                "SELECT target_session_id, status FROM workflow_messages"
                " WHERE workflow_message_id = ?",
                opened,
            )

    @rule(
        session=st.sampled_from(SESSIONS),
        which=st.sampled_from(["none", "live", "live", "stale"]),
        data=st.data(),
        dt=TICKS,
    )
    def detach(self, session, which, data, dt):
        """``Host.detach``: the live coordinator goes, its turns inactive; else nothing changes."""
        self._tick(dt)
        live = self._coordinator(session)
        epoch = None
        if which == "live" and live is not None:
            epoch = live[0]
        elif which == "stale":
            epoch = data.draw(
                st.sampled_from([*self.epochs[session], "session-epoch-x"]), label="epoch"
            )
        before = self._head()
        detached = self.host.detach(session, self.now, epoch)
        note_outcome(f"host.detach: {detached}")
        assert detached == (live is not None and epoch in (None, live[0]))
        if not detached:
            assert before == self._head()
            return
        assert self._coordinator(session) is None
        assert self._new_entries(before)[-1].type == "session.coordinator_detached"
        self._interrupted(session)

    @rule(
        target=requests,
        data=st.data(),
        idle=st.booleans(),
        pending=st.booleans(),
        dt=TICKS,
    )
    def report_branch(self, *, data, idle, pending, dt):
        """``workflowMessage.reportBranch`` listing some of the session's messages as evidence."""
        self._tick(dt)
        session = self._session(data)
        epoch = self._epoch(data, session)
        rows = self._session_messages(session, "pending", "sent", "cancelled")
        listed = (
            data.draw(st.lists(st.sampled_from(rows), max_size=3), label="listed") if rows else []
        )
        entries: dict[str, str] = {}
        for message_id, _, _, status, entry in listed:
            conflicting = data.draw(st.sampled_from([False] * 9 + [True]), label="conflict")
            keep = status == "sent" and not conflicting
            entries.setdefault(message_id, entry if keep else self._fresh("pi-entry"))
        stray = data.draw(st.sampled_from([None] * 12 + ["wm-x"]), label="stray message")
        if stray is not None:
            entries[stray] = self._fresh("pi-entry")
        return self._report(session, epoch, entries, idle=idle, pending=pending)

    @rule(
        target=requests,
        data=st.data(),
        which=st.sampled_from(["open", "open", "open", "any"]),
        reuse=st.sampled_from([False, False, False, True]),
        dt=TICKS,
    )
    def turn_started(self, *, data, which, reuse, dt):
        """``workflowTurn.report`` started on the open message (read from the view) or another."""
        self._tick(dt)
        session = self._session(data)
        opened = self._open(session)
        choices = [
            row[0] for row in self._session_messages(session, "pending", "sent", "cancelled")
        ]
        if which == "open" and opened is not None:
            message_id = opened
        elif choices:
            message_id = data.draw(st.sampled_from(choices), label="message")
        else:
            return multiple()
        turns = [
            row[0]
            for row in self._rows(
                "SELECT workflow_turn_id FROM workflow_turns WHERE workflow_message_id = ?"
                " ORDER BY workflow_turn_id",
                message_id,
            )
        ]
        if reuse and turns:
            turn_id = data.draw(st.sampled_from(turns), label="turn")
        else:
            turn_id = self._fresh("t")
        epoch = self._epoch(data, session)
        return self._start(session, epoch, message_id, turn_id, opened=opened)

    @rule(
        target=requests,
        data=st.data(),
        stop=STOPS,
        answered=st.booleans(),
        dt=TICKS,
    )
    def turn_ended(self, *, data, stop, answered, dt):
        """``workflowTurn.report`` ended for a started turn (or an ended one, or a missing one)."""
        self._tick(dt)
        session = self._session(data)
        turns = self._turns(session)
        started = [row for row in turns if row[3] == "started"]
        missing = ("turn-x", "wm-x", "run-1", "started", "step", "x")
        pool = started * 3 + [row for row in turns if row[3] == "ended"] + [missing]
        turn = data.draw(st.sampled_from(pool), label="turn")
        epoch = self._epoch(data, session)
        response_entry = self._fresh("pi-response") if answered else None
        return self._end(session, epoch, turn, stop, response_entry)

    @rule(
        target=requests,
        data=st.data(),
        session=st.sampled_from(SESSIONS),
        connection=st.sampled_from(CONNECTIONS),
        stop=st.sampled_from([None, None, "completed", "aborted", "error"]),
        idle=st.sampled_from([False, False, False, True]),
        dt=TICKS,
    )
    def coordinator_takes_a_turn(self, *, data, session, connection, stop, idle, dt):  # noqa: PLR0913 - drawn inputs
        """Attach if needed, report every message as on the branch, start a turn, maybe end it."""
        self._tick(dt)
        live = self._coordinator(session)
        if live is None or data.draw(st.sampled_from([False] * 4 + [True]), label="reattach"):
            epoch = self._attach(session, connection, ("cli-A", None))
            self._tick(data.draw(TICKS, label="dt"))
        else:
            epoch = live[0]
        entries = {
            row[0]: row[4] if row[3] == "sent" else self._fresh("pi-entry")
            for row in self._session_messages(session, "pending", "sent")
        }
        sent = [self._report(session, epoch, entries, idle=idle, pending=False)]
        self._tick(data.draw(TICKS, label="dt"))
        opened = self._open(session)
        if opened is None:
            return multiple(*sent)
        busy = self._started_turn(opened)
        turn_id = (
            busy
            if busy is not None and data.draw(st.booleans(), label="again")
            else self._fresh("t")
        )
        sent.append(self._start(session, epoch, opened, turn_id, opened=opened))
        if stop is None:
            return multiple(*sent)
        self._tick(data.draw(TICKS, label="dt"))
        turn = next((row for row in self._turns(session) if row[0] == turn_id), None)
        if turn is not None:
            sent.append(self._end(session, epoch, turn, stop, self._fresh("pi-response")))
        return multiple(*sent)

    @precondition(lambda self: self._rows("SELECT 1 FROM workflow_turns LIMIT 1"))
    @rule(
        target=requests,
        data=st.data(),
        operation=st.sampled_from(["run.pause", "run.resume"]),
        who=WHO,
        dt=TICKS,
    )
    def pause_or_resume_turning(self, data, operation, who, dt):
        """``run.pause`` / ``run.resume`` of a run that has model turns (open or ended)."""
        self._tick(dt)
        runs = [row[0] for row in self._rows("SELECT DISTINCT run_id FROM workflow_turns")]
        run = data.draw(st.sampled_from(sorted(runs)), label="run with turns")
        request = self._request(operation, who, {}, run_id=run)
        response = self.send(request)
        if response.outcome == "accepted":
            open_turns = self._rows(
                "SELECT 1 FROM workflow_turns WHERE run_id = ? AND state = 'started'", run
            )
            note_outcome(f"{operation} accepted with {'open' if open_turns else 'ended'} turns")
        return request

    @precondition(lambda self: self._rows(FINISHED))
    @rule(share=st.sampled_from([0.0, 0.5, 1.0, None]))
    def prune_a_copy(self, share):
        """``state.prune --apply`` on a copy: old projections minus the trees, and it proves.

        The cutoff follows a finished run (``share`` of the way along them),
        or is now, which takes every finished run.
        The copy keeps the machine's own database and model untouched.
        """
        finished = sorted(row[0] for row in self._rows(FINISHED))
        cutoff = self.now + 1 if share is None else finished[int(share * (len(finished) - 1))] + 1
        checkpoint(self.directory / "state.db")
        number = next(self.ids)
        old = self.directory / f"old-{number}.db"
        copy = self.directory / f"copy-{number}.db"
        backup = self.directory / f"backup-{number}.sqlite"
        shutil.copy(self.directory / "state.db", old)
        shutil.copy(old, copy)
        request = ClientRequest(
            request_id=f"prune-{number}",
            client_id="pwf-cli",
            operation="state.prune",
            idempotency_key=f"prune-{number}",
            payload={"apply": True, "backupPath": str(backup), "before": iso_utc(cutoff)},
        )
        with open_store(str(copy)) as pruned:
            answer = Host(pruned).request(request, self.now)
            assert answer.outcome == "accepted", answer
            report: Any = answer.receipt
            selected = report["selectedRuns"]
            note_outcome(f"prune: {min(selected, 3)}{'+' if selected > 3 else ''} runs")
            if selected:
                assert_pruned(pruned, old, backup, request.request_id)
            rebuilt = sqlite3.connect(":memory:")
            try:
                rebuild_into(rebuilt, pruned.entries())
                assert dump(rebuilt) == projections(copy)
            finally:
                rebuilt.close()
        with opened(copy) as connection:
            assert_rows_as_viewed(connection)

    @precondition(lambda self: self._rows(HELD))
    @rule(dt=TICKS, beats=st.sampled_from([1, 2, 3]))
    def heartbeat(self, dt, beats):
        """A served host's heartbeats: every held run claim renewed in one batch (ADR 0118).

        A claim whose lease has ended is refused and left as it was; the
        renewals go through every fold, prune and rebuild the machine checks.
        """
        for _ in range(beats):
            self._tick(dt)
            held = self._rows(HELD)
            claims = [(run, epoch) for run, epoch, _lease in held]
            renew = functools.partial(supervision.renew_claims, held=claims, lease_ms=LEASE_MS)
            refused = self.host.supervise("worker.renew", self.now, renew)
            assert refused == [run for run, _epoch, lease in held if lease <= self.now]
            note_outcome(f"heartbeat: {'some' if refused else 'none'} refused")
            for run, epoch, lease in self._rows(HELD):
                if run not in refused and (run, epoch) in claims:
                    assert lease == self.now + LEASE_MS

    @rule(jump=JUMPS)
    def expire(self, jump):
        """A time jump, then an expiry pass (the clock may not have moved a whole poll)."""
        self._tick(jump, poll=False)
        self._expire()

    @rule(downtime=st.sampled_from([1_000, 31_000, 120_000]), lag=st.sampled_from([None, 0, 500]))
    def host_restarts(self, downtime, lag):
        """``Host.recover`` after downtime, with the old host's heartbeat in the past (or none)."""
        heartbeat = None if lag is None else self.now - lag
        self._tick(downtime, poll=False)
        before = self._head()
        recovered = self.host.recover(self.now, heartbeat)
        note_outcome(f"host.recover: {min(recovered, 2)}{'+' if recovered > 1 else ''} attempts")
        appended = self._new_entries(before)
        changed = [entry.event for entry in appended if isinstance(entry.event, AttemptChanged)]
        assert recovered == len(changed)
        assert all(event.status == "interrupted" for event in changed)
        for entry in appended:
            if isinstance(entry.event, DeadlineShifted):
                assert entry.event.cause == "host.recovery"
        # Every attempt with an open step turn now waits for its session to come back.
        assert not self._rows(
            "SELECT 1 FROM node_attempts a"
            " JOIN interactive_requests r ON r.attempt_id = a.attempt_id"
            " JOIN workflow_messages m ON m.source_id = r.request_id AND m.kind = 'step'"
            " JOIN workflow_turns t ON t.workflow_message_id = m.workflow_message_id"
            " WHERE r.status = 'pending' AND t.state = 'started'"
            " AND a.status IN ('pending', 'running', 'waiting')"
        )
        self._expire()

    @rule(
        target=requests,
        data=st.data(),
        prompt=st.sampled_from(["Next?", "  ", "And then?"]),
        who=WHO,
        dt=TICKS,
    )
    def follow_up_queue(self, *, data, prompt, who, dt):
        """``followUp.queue`` for a run of the session (or another run)."""
        self._tick(dt)
        session = self._session(data)
        own = [
            row[0]
            for row in self._rows(
                "SELECT run_id FROM runs WHERE origin_session_id = ? ORDER BY run_id", session
            )
        ]
        run = data.draw(st.sampled_from([*own, *own, *self._known_runs()]), label="run")
        epoch = self._epoch(data, session)
        payload = {"targetSessionId": session, "coordinatorEpoch": epoch, "prompt": prompt}
        fenced = self._fenced(session, epoch)
        request = self._request("followUp.queue", who, payload, run_id=run)
        response = self.send(request)
        self._note(request, response)
        if fenced is not None and self._expected(request) is None:
            assert response.error in (fenced, REQUEST_ID_REUSED, KEY_REUSED)
        return request

    @rule(
        target=requests,
        data=st.data(),
        who=WHO,
        dt=TICKS,
    )
    def follow_up_remove(self, data, who, dt):
        """``followUp.remove`` of one of the session's follow-ups (or a missing one)."""
        self._tick(dt)
        session = self._session(data)
        rows = self._rows(
            "SELECT follow_up_id, run_id FROM workflow_follow_ups ORDER BY follow_up_id"
        )
        follow_up, run = data.draw(
            st.sampled_from([*rows, ("follow_up-x", "run-1")]), label="follow-up"
        )
        epoch = self._epoch(data, session)
        payload = {"targetSessionId": session, "coordinatorEpoch": epoch, "followUpId": follow_up}
        request = self._request("followUp.remove", who, payload, run_id=run)
        self._note(request, self.send(request))
        return request

    @rule(target=requests, data=st.data(), who=WHO, dt=TICKS)
    def clear_terminal(self, data, who, dt):
        """``sessionView.clearTerminal``, with or without the run it expects to clear."""
        self._tick(dt)
        session = self._session(data)
        runs = [row[1] for row in self._session_messages(session, "pending", "sent", "cancelled")]
        run = data.draw(st.sampled_from([None, None, *runs]), label="run")
        epoch = self._epoch(data, session)
        payload = {"targetSessionId": session, "coordinatorEpoch": epoch}
        request = self._request("sessionView.clearTerminal", who, payload, run_id=run)
        self._note(request, self.send(request))
        return request

    @rule(target=requests, data=st.data(), who=WHO, dt=TICKS)
    def run_restart(self, data, who, dt):
        """``run.restart`` for a terminal message of the session (sent or not, current or not)."""
        self._tick(dt)
        session = self._session(data)
        terminals = [
            row
            for row in self._session_messages(session, "pending", "sent", "cancelled")
            if row[2] == "terminal"
        ]
        message_id, run, *_ = data.draw(
            st.sampled_from([*terminals, *terminals, ("wm-x", "run-1", "terminal", "", None)]),
            label="terminal message",
        )
        turns = [
            row[0]
            for row in self._rows(
                "SELECT workflow_turn_id FROM workflow_turns WHERE workflow_message_id = ?"
                " ORDER BY started_at DESC, workflow_turn_id DESC",
                message_id,
            )
        ]
        turn = data.draw(st.sampled_from([None, *turns[:1], *turns[:1], "t-x"]), label="turn")
        payload = {
            "targetSessionId": session,
            "coordinatorEpoch": self._epoch(data, session),
            "workflowMessageId": message_id,
        }
        if turn is not None:
            payload["workflowTurnId"] = turn
        request = self._request("run.restart", who, payload, run_id=run)
        response = self.send(request)
        self._note(request, response)
        if response.outcome == "accepted":
            assert isinstance(response.receipt, dict)
            child = response.receipt["runId"]
            assert [(run, "restart", session)] == self._rows(
                "SELECT parent_run_id, lineage_kind, origin_session_id FROM runs WHERE run_id = ?",
                child,
            )
        return request

    # ------------------------------------------------------------------ invariants

    @invariant()
    def rebuild_equals_live(self):
        """Folding the whole log into an empty database gives exactly the live rows."""
        rebuilt = sqlite3.connect(":memory:")
        try:
            rebuild_into(rebuilt, self._log())
            assert dump(rebuilt) == dump(self.live)  # what is committed: no transaction is open
        finally:
            rebuilt.close()

    @invariant()
    def executed_at_most_once(self):
        """No request id or (client, key) was executed twice; each execution left one record."""
        by_request: Counter[str] = Counter()
        by_key: Counter[tuple[str, str]] = Counter()
        by_message: Counter[tuple[str, str]] = Counter()
        for entry in self._log():
            event = entry.event
            if isinstance(event, CommandRecorded):
                by_request[event.request_id] += 1
                by_key[event.client_id, event.idempotency_key] += 1
            elif isinstance(event, WorkerMessageRecorded):
                by_message[event.worker_epoch, event.message_id] += 1
        assert all(count == 1 for count in by_request.values())
        assert all(count == 1 for count in by_key.values())
        assert all(count == 1 for count in by_message.values())
        assert set(self.by_request) == set(by_request)
        assert set(self.by_key) == set(by_key)

    @invariant()
    def one_started_turn_per_message(self):
        """A message has at most one started model turn (DOMAIN §5.7)."""
        assert [] == self._rows(
            "SELECT workflow_message_id, count(*) FROM workflow_turns WHERE state = 'started'"
            " GROUP BY 1 HAVING count(*) > 1"
        )

    @invariant()
    def attempts_only_move_forward(self):
        """A deadline, once set, never moves earlier; an ended attempt stays ended."""
        for attempt, deadline, status in self._rows(
            "SELECT attempt_id, deadline_at, status FROM node_attempts"
        ):
            seen = self.deadlines.get(attempt)
            if seen is not None:
                assert deadline is not None
                assert deadline >= seen
            if deadline is not None:
                self.deadlines[attempt] = deadline
            if attempt in self.ended:
                # Only "stays ended": a later node.finished / node.failed of the same
                # worker still moves an ended attempt to another end status.
                assert status in ATTEMPT_ENDS, (attempt, self.ended[attempt], status)
            elif status in ATTEMPT_ENDS:
                self.ended[attempt] = status

    @invariant()
    def orders_and_shifts_follow_the_log(self):
        """Order numbers count 1, 2, ... per session as created; a shift adds its idle time."""
        log = self._log()
        for entry in log[self.folded :]:
            event = entry.event
            if isinstance(event, MessageCreated):
                orders = self.orders.setdefault(event.target_session_id, [])
                assert event.order_number == len(orders) + 1
                orders.append(event.order_number)
            elif isinstance(event, AttemptStarted):
                self.folded_deadlines[event.attempt_id] = event.deadline_at
            elif isinstance(event, DeadlineShifted):
                note_outcome(f"deadline shifted: {event.cause}")
                assert event.idle_ms > 0
                assert event.to_deadline == event.from_deadline + event.idle_ms
                assert event.from_deadline == self.folded_deadlines[event.attempt_id]
                if event.from_started_at is None:
                    assert event.to_started_at is None
                else:
                    assert event.to_started_at == event.from_started_at + event.idle_ms
                self.folded_deadlines[event.attempt_id] = event.to_deadline
            self._fold_timing(entry)
        self.folded = len(log)
        live: dict[str, list[int]] = {}
        for session, order in self._rows(
            "SELECT target_session_id, order_number FROM workflow_messages"
            " ORDER BY target_session_id, order_number"
        ):
            live.setdefault(session, []).append(order)
        assert live == self.orders

    def _fold_timing(self, entry: Entry) -> None:
        """Check each turn start's credited idle time against the model's own §10.2 arithmetic."""
        event, timing = entry.event, self.timing
        if isinstance(event, AttemptStarted):
            timing.started_at[event.attempt_id] = entry.at
        elif isinstance(event, InteractionRequested) and not event.reopened:
            timing.attempt_of[event.request_id] = event.attempt_id
            timing.created_at.setdefault(event.request_id, entry.at)
        elif isinstance(event, MessageCreated) and event.kind == "step":
            timing.step_source[event.workflow_message_id] = event.source_id
        elif isinstance(event, TurnEnded) and event.workflow_message_id in timing.step_source:
            request = timing.step_source[event.workflow_message_id]
            timing.ended_at.setdefault(request, []).append(entry.at)
        elif isinstance(event, DeadlineShifted):
            assert event.from_started_at == timing.started_at[event.attempt_id]
            if event.cause == "turn.start":
                request = timing.request_of(event.attempt_id)
                expected = timing.idle_before_turn(request, entry.at)
                assert expected == event.idle_ms, (request, expected, event)
                timing.shifted.add((entry.batch, event.attempt_id))
            timing.started_at[event.attempt_id] = event.to_started_at
        elif isinstance(event, TurnStarted) and event.workflow_message_id in timing.step_source:
            # A new step turn with no shift in its batch must have had nothing to credit.
            request = timing.step_source[event.workflow_message_id]
            attempt = timing.attempt_of[request]
            if (entry.batch, attempt) not in timing.shifted:
                idle = timing.idle_before_turn(request, entry.at)
                assert idle == 0 or self.folded_deadlines[attempt] is None, (request, idle)

    @invariant()
    def chain_verifies(self):
        """The hash chain holds from the first event to the head."""
        report = self.store.verify()
        assert report.ok, report
        assert self._head() == report.events


CommandPathMachine.TestCase.settings = settings(
    # 15 runs of 60 steps, each step checked against a rebuild of the whole log;
    # make test-deep runs the 60 this test had before (ADR 0049).
    max_examples=examples(quick=15, deep=60),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
TestLiveEqualsRebuild = pytest.mark.slow(CommandPathMachine.TestCase)
