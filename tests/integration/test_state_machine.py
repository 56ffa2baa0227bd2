"""Random client commands and worker messages: live projections equal a rebuild from the log.

A Hypothesis state machine drives :class:`pwf.host.Host` on a fresh SQLite
store with random runs, clients, idempotency keys and worker messages,
including retries of earlier requests and worker messages with the same and
with changed payloads (DOMAIN §7, §8, §14).  After every step it checks that
folding the whole log into an empty database gives exactly the live rows,
that no request id and no (clientId, idempotencyKey) was executed twice, and
that the hash chain verifies.  Time is an input: ``now`` only moves forward,
by a drawn amount per step, so leases expire too.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Final

import msgspec
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
from pwf.cli._options import open_store
from pwf.commands.catalogue import CLIENT_OPERATIONS, Route
from pwf.errors import CommandError
from pwf.events import CommandRecorded, Entry, WorkerMessageRecorded
from pwf.host import Host
from pwf.protocol.client import OUTCOMES, ClientRequest, ClientResponse
from pwf.protocol.worker import WORKER_OUTCOMES, WorkerResponse, parse_worker_message
from pwf.readmodel import dump, rebuild_into

AT: Final = 1_764_403_200_000
"""The first clock reading (ms since the epoch)."""

RUNS: Final = ("run-1", "run-2", "run-3")
SESSIONS: Final = ("s-1", "s-2")
CLIENTS: Final = ("cli-A", "cli-B")
SHARED_KEYS: Final = ("k-1", "k-2", "k-3")
NODES: Final = ("n-1", "n-2")
VALUES: Final[tuple[object, ...]] = ({}, {"answer": 1}, "yes", ["a", "\u00e9"], None)

TICKS = st.sampled_from([0, 1, 1, 1, 50, 1_000])
"""How far the clock moves in one step (``leases_expire`` jumps past the 30 s lease)."""

DRIFT = st.sampled_from([0, 0, 0, 0, 0, 0, 0, -1])
"""Added to the expected revision: mostly current, sometimes stale."""

KEYS = st.sampled_from((None, None, None, None, *SHARED_KEYS))
"""A shared key (so keys get reused across requests) or None for a fresh one."""

WHO = st.tuples(st.sampled_from(CLIENTS), KEYS)

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
        "workflowSource": "builtin",
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
        epochs = itertools.count(1)
        self.host = Host(self.store, new_epoch=lambda: f"w-{next(epochs)}")
        self.now = AT
        self.ids = itertools.count(1)
        self.workers: dict[str, Worker] = {}
        self.by_request: dict[str, Stored] = {}
        self.by_key: dict[tuple[str, str], Stored] = {}
        self.log: list[Entry] = []

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def _tick(self, dt: int) -> None:
        self.now += dt

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
        return self.store.connection.execute(sql, params).fetchall()

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
        expected = self._expected(request) if route is not Route.DIRECT else None
        before = self._head()
        response = self.host.request(request, self.now)
        appended = self._new_entries(before)
        recorded = [entry.event for entry in appended if entry.type == "command.recorded"]
        assert response.outcome in OUTCOMES
        assert request.request_id == response.request_id
        note_outcome(f"{request.operation}: {response.outcome}")
        assert MISSED_RULE not in (response.error or "")
        if route is Route.DIRECT:
            assert [] == recorded
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

    @initialize(target=requests, session=st.sampled_from(SESSIONS))
    def first_run(self, session):
        """Every example starts with one interactive run, so workers have work early."""
        request = self._request(
            "run.start", ("cli-A", None), _start_payload(session, {}, headless=False)
        )
        request = msgspec.structs.replace(request, run_id="run-1")
        self.send(request)
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
            message = self._message(run, "node.started", {"nodeId": node, "timeoutMs": 60_000})
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

    # ------------------------------------------------------------------ invariants

    @invariant()
    def rebuild_equals_live(self):
        """Folding the whole log into an empty database gives exactly the live rows."""
        rebuilt = sqlite3.connect(":memory:")
        try:
            rebuild_into(rebuilt, self._log())
            assert dump(rebuilt) == dump(self.store.connection)
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
    def chain_verifies(self):
        """The hash chain holds from the first event to the head."""
        report = self.store.verify()
        assert report.ok, report
        assert self._head() == report.events


CommandPathMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
TestLiveEqualsRebuild = CommandPathMachine.TestCase
