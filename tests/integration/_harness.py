"""Fixture F of the conformance scenarios, built through the public command path.

A :class:`Fixture` owns one SQLite store with the read model attached and a
:class:`pwf.host.Host` over it.  It drives client requests and worker
messages the way a client and a run worker would, and reads projection rows
back by table and column.  Worker epochs are ``w-1``, ``w-2``, ... in launch
order; worker message ids are ``m-1``, ``m-2``, ... unless a test names one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import itertools
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from pwf import canonical
from pwf._sqlite import dump, exact_text
from pwf.cli._options import open_store
from pwf.fold.bulk import rebuild_into
from pwf.host import Host
from pwf.protocol.client import ClientRequest, ClientResponse
from pwf.protocol.worker import LaunchEnvelope, WorkerResponse, parse_worker_message

if TYPE_CHECKING:
    from pwf.server.supervision import Supervisor
    from pwf.store import EventStore

if TYPE_CHECKING:
    from tests._dbfile import projections
    from tests._tamper import editable
else:
    from _dbfile import projections
    from _tamper import editable

__all__ = [
    "ATTEMPT",
    "CLIENT",
    "M1",
    "REQUEST",
    "RUN",
    "SESSION",
    "START",
    "Fixture",
    "idle",
    "race_run_start",
]

RUN: Final = "run-1"
SESSION: Final = "s-1"
CLIENT: Final = "cli-A"
ATTEMPT: Final = "attempt-1"
NODE: Final = "ask"
REQUEST: Final = "interaction-run-1-attempt-1"
CONTRACT: Final = {"prompt": "Say hi"}
M1: Final = "workflow-message-ef38de41cf51c92267369039a7055ee78bd9045683835c11b94831c4844bdffa"
"""The step message of the request at revision 1 (key ``1:initial``)."""

START: Final = {
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSourceRef": "builtin:echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "definitionDigest": "d1",
    "definitionSnapshot": {},
    "input": {},
    "originSessionId": SESSION,
}
"""The ``run.start`` payload of ``run-1``: ``builtin:echo``, input ``{}``, origin ``s-1``."""


class Fixture:
    """One store and host, plus helpers to drive and inspect them."""

    def __init__(self, db: Path, *, run_id: str = RUN) -> None:
        """Open a fresh store at ``db``; nothing is started yet."""
        self.store: EventStore = open_store(str(db), create=True)
        numbers = itertools.count(1)
        self.host = Host(self.store, new_epoch=lambda: f"w-{next(numbers)}")
        self.run_id = run_id
        self.now = 1000
        self.epoch: str | None = None
        self.generation = 0
        self._message_ids = itertools.count(1)
        self._request_ids = itertools.count(1)

    # ------------------------------------------------------------------ building F

    @classmethod
    def f(cls, db: Path) -> Fixture:
        """Fixture F: ``run-1`` waiting on ``interaction-run-1-attempt-1`` at revision 1 with M1."""
        fixture = cls.running(db)
        fixture.request_interaction(at=1000)
        return fixture

    @classmethod
    def running(cls, db: Path) -> Fixture:
        """``run-1`` held by worker ``w-1``, ``attempt-1`` running since 1 000 (60 s budget)."""
        fixture = cls(db)
        fixture.start(at=1000)
        fixture.launch(at=1000)
        fixture.ready()
        fixture.ok("node.started", {"nodeId": NODE, "timeoutMs": 60000}, attempt=ATTEMPT)
        return fixture

    def start(self, *, at: int | None = None) -> ClientResponse:
        """``run.start`` of the fixture's run (accepted)."""
        response = self.request(
            "run.start", START, run_id=self.run_id, key="start-1", rid="start-1", at=at
        )
        assert response.outcome == "accepted", response
        return response

    def ready(self, *, at: int | None = None) -> WorkerResponse:
        """``worker.ready`` from the current worker (accepted)."""
        return self.ok("worker.ready", {}, rev=0, at=at)

    def request_interaction(
        self, *, at: int | None = None, contract: object = CONTRACT
    ) -> WorkerResponse:
        """``interaction.request`` for ``attempt-1`` from the current worker."""
        return self.worker("interaction.request", {"contract": contract}, attempt=ATTEMPT, at=at)

    def submit(  # noqa: PLR0913 - one keyword per submission member a scenario pins
        self,
        value: object,
        *,
        key: str = "tool-1",
        submission: str = "sub-1",
        rev: int | None = 1,
        attempt: str = ATTEMPT,
        rid: str | None = None,
        at: int | None = None,
        wait_ms: int = 0,
    ) -> ClientResponse:
        """``interaction.submit`` of ``value`` to the fixture's request."""
        payload = {
            "requestId": REQUEST,
            "attempt": attempt,
            "step": NODE,
            "submissionId": submission,
            "value": value,
        }
        return self.request(
            "interaction.submit",
            payload,
            run_id=self.run_id,
            key=key,
            rid=rid,
            rev=rev,
            at=at,
            wait_ms=wait_ms,
        )

    def validate(self, *, at: int | None = None) -> WorkerResponse:
        """Launch a worker for the validating submission and report it ready."""
        self.launch(at=at)
        return self.ready(at=at)

    # ------------------------------------------------------------------ driving

    def request(  # noqa: PLR0913 - one keyword per request member a scenario pins
        self,
        op: str,
        payload: object = None,
        run_id: str | None = None,
        *,
        key: str | None = None,
        rid: str | None = None,
        rev: int | None = None,
        client: str = CLIENT,
        at: int | None = None,
        wait_ms: int = 0,
    ) -> ClientResponse:
        """Send one client request; ids and keys default to fresh ``r-N`` / ``k-N``."""
        number = next(self._request_ids)
        request = ClientRequest(
            request_id=rid if rid is not None else f"r-{number}",
            client_id=client,
            operation=op,
            idempotency_key=key if key is not None else f"k-{number}",
            payload={} if payload is None else payload,
            run_id=run_id,
            expected_revision=rev,
        )
        return self.host.request(request, self._at(at), wait_ms=wait_ms)

    def launch(self, *, at: int | None = None, run_id: str | None = None) -> LaunchEnvelope:
        """Claim the run for a new worker epoch, which becomes the current worker."""
        envelope = self.host.launch(run_id or self.run_id, self._at(at))
        self.epoch = envelope.worker_epoch
        self.generation = envelope.generation
        return envelope

    def message(  # noqa: PLR0913 - one keyword per message member a scenario pins
        self,
        op: str,
        payload: object = None,
        *,
        attempt: str | None = None,
        epoch: str | None = None,
        gen: int | None = None,
        rev: int | None = None,
        message_id: str | None = None,
        run_id: str | None = None,
        extra: dict[str, object] | None = None,
    ) -> bytes:
        """The canonical line of a worker message; unset members follow the current worker."""
        members: dict[str, object] = {
            "schema": "pi-workflows.worker-message.v1",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": message_id or f"m-{next(self._message_ids)}",
            "kind": "worker.progress",
            "operation": op,
            "runId": run_id or self.run_id,
            "generation": gen if gen is not None else self.generation,
            "workerEpoch": epoch or self.epoch,
            "expectedRevision": rev if rev is not None else self.revision(run_id),
            "payload": {} if payload is None else payload,
        }
        if attempt is not None:
            members["attemptId"] = attempt
        members.update(extra or {})
        return canonical.encode(members)

    def worker(  # noqa: PLR0913 - one keyword per message member a scenario pins
        self,
        op: str,
        payload: object = None,
        *,
        attempt: str | None = None,
        epoch: str | None = None,
        gen: int | None = None,
        rev: int | None = None,
        message_id: str | None = None,
        at: int | None = None,
    ) -> WorkerResponse:
        """Send one worker message; the expected revision defaults to the run's current one."""
        line = self.message(
            op,
            payload,
            attempt=attempt,
            epoch=epoch,
            gen=gen,
            rev=rev,
            message_id=message_id,
        )
        return self.send(line, at=at)

    def send(self, line: bytes, *, at: int | None = None) -> WorkerResponse:
        """Send an already encoded worker message line."""
        return self.host.worker(parse_worker_message(line), self._at(at))

    def ok(self, op: str, payload: object = None, **members: Any) -> WorkerResponse:
        """Send a worker message that must be accepted."""
        response = self.worker(op, payload, **members)
        assert response.outcome == "accepted", response
        return response

    def _at(self, at: int | None) -> int:
        if at is not None:
            self.now = at
        return self.now

    # ------------------------------------------------------------------ reading

    def row(self, table: str, **where: object) -> dict[str, Any] | None:
        """The single row of ``table`` matching ``where`` (column = value), as a dict, or None."""
        rows = self.rows(table, **where)
        assert len(rows) <= 1, rows
        return rows[0] if rows else None

    def existing(self, table: str, **where: object) -> dict[str, Any]:
        """The single row of ``table`` matching ``where``; fails when there is none."""
        row = self.row(table, **where)
        assert row is not None, (table, where)
        return row

    def rows(self, table: str, **where: object) -> list[dict[str, Any]]:
        """Every row of ``table`` matching ``where``, as dicts."""
        condition = " AND ".join(f"{column} = ?" for column in where) or "1"
        names, found = self.store.reader().table(
            f"SELECT * FROM {table} WHERE {condition}",  # noqa: S608 - test-chosen names
            tuple(where.values()),
        )
        return [dict(zip(names, values, strict=True)) for values in found]

    def count(self, table: str, **where: object) -> int:
        """How many rows of ``table`` match ``where``."""
        return len(self.rows(table, **where))

    def revision(self, run_id: str | None = None) -> int:
        """The run's current revision (0 before it exists)."""
        found = self.row("runs", run_id=run_id or self.run_id)
        return 0 if found is None else int(found["revision"])

    def blob(self, blob_hash: bytes | None) -> Any:
        """The decoded JSON blob with this hash, or None."""
        if blob_hash is None:
            return None
        found = self.row("blobs", blob_hash=blob_hash)
        assert found is not None
        return msgspec.json.decode(bytes(found["content"]))

    def events(self, event_type: str | None = None) -> int:
        """How many events the log holds (of one type when given)."""
        return sum(
            1 for entry in self.store.entries() if event_type is None or entry.type == event_type
        )

    def event_types(self) -> list[str]:
        """The type of every event in the log, in order."""
        return [entry.type for entry in self.store.entries()]

    def assert_rebuild_equals_live(self) -> None:
        """Folding the whole log into fresh tables reproduces every live projection row."""
        fresh = exact_text(sqlite3.connect(":memory:"))
        try:
            rebuild_into(fresh, self.store.entries())
            assert projections(self.store.projections_file.path) == dump(fresh)
        finally:
            fresh.close()

    def close(self) -> None:
        """Close the store."""
        self.store.close()


def edit(path: Path, *statements: str) -> None:
    """Change a database by hand, the way a careless operator or a disk would.

    ``events`` takes a change as format v1's table did (:mod:`tests._tamper`).
    """
    connection = editable(sqlite3.connect(path))
    try:
        for statement in statements:
            connection.execute(statement)
        connection.commit()
    finally:
        connection.close()


def race_run_start(db: str, request_id: str, barrier: Any, results: Any) -> None:
    """In a child process: open the store, wait at the barrier, send ``run.start``; report."""
    store = open_store(db, create=False)
    try:
        host = Host(store)
        request = ClientRequest(
            request_id=request_id,
            client_id=CLIENT,
            operation="run.start",
            idempotency_key="start-race",
            payload=START,
            run_id=RUN,
        )
        barrier.wait(timeout=60)
        results.put(host.request(request, 1000).outcome)
    finally:
        store.close()


# ---------------------------------------------------------------------- sessions and extra runs


def watch(
    fx: Fixture, *, session: str = SESSION, connection: str = "C1", at: int | None = None
) -> str:
    """``view.session.watch`` as the session's coordinator on ``connection``; its epoch."""
    response = fx.request(
        "view.session.watch",
        {
            "subscriptionId": f"session:{session}",
            "sessionId": session,
            "coordinator": True,
            "connectionId": connection,
        },
        at=at,
    )
    assert response.outcome == "accepted", response
    assert isinstance(response.receipt, dict)
    return str(response.receipt["coordinatorEpoch"])


def branch(  # noqa: PLR0913 - one keyword per report member a scenario pins
    fx: Fixture,
    epoch: str,
    entries: dict[str, str] | None = None,
    *,
    idle: bool = False,
    pending: bool = False,
    session: str = SESSION,
    at: int | None = None,
) -> ClientResponse:
    """``workflowMessage.reportBranch`` listing ``entries`` (message id -> Pi entry id)."""
    listed = [
        {"workflowMessageId": message, "piSessionEntryId": entry}
        for message, entry in (entries or {}).items()
    ]
    payload = {
        "targetSessionId": session,
        "coordinatorEpoch": epoch,
        "entries": listed,
        "isIdle": idle,
        "hasPendingMessages": pending,
    }
    return fx.request("workflowMessage.reportBranch", payload, at=at)


def coordinate(
    fx: Fixture,
    entries: dict[str, str] | None = None,
    *,
    session: str = SESSION,
    connection: str = "C1",
    at: int | None = None,
) -> str:
    """Attach a coordinator and report its (non-idle) branch; its epoch."""
    epoch = watch(fx, session=session, connection=connection, at=at)
    reported = branch(fx, epoch, entries, session=session, at=at)
    assert reported.outcome == "accepted", reported
    return epoch


def turn(  # noqa: PLR0913 - one keyword per report member a scenario pins
    fx: Fixture,
    epoch: str,
    message: str,
    turn_id: str,
    *,
    stop: str | None = None,
    response: object = None,
    run_id: str = RUN,
    session: str = SESSION,
    at: int | None = None,
) -> ClientResponse:
    """``workflowTurn.report``: ``started`` without ``stop``, else ``ended`` with that reason."""
    payload: dict[str, object] = {
        "targetSessionId": session,
        "coordinatorEpoch": epoch,
        "workflowMessageId": message,
        "workflowTurnId": turn_id,
        "runId": run_id,
        "state": "started" if stop is None else "ended",
    }
    if stop is not None:
        payload["stopReason"] = stop
        payload["responseSessionEntryId"] = response
    return fx.request("workflowTurn.report", payload, at=at)


def run_worker(  # noqa: PLR0913 - one keyword per message member a scenario pins
    fx: Fixture,
    run_id: str,
    op: str,
    payload: object = None,
    *,
    attempt: str | None = None,
    rev: int | None = None,
    at: int | None = None,
) -> WorkerResponse:
    """An accepted worker message of ``run_id`` from the current worker."""
    line = fx.message(op, payload, attempt=attempt, rev=rev, run_id=run_id)
    response = fx.send(line, at=at)
    assert response.outcome == "accepted", response
    return response


def start_run(
    fx: Fixture, run_id: str, *, session: str = SESSION, at: int | None = None
) -> ClientResponse:
    """``run.start`` of another ``builtin:echo`` run with origin ``session``."""
    response = fx.request("run.start", {**START, "originSessionId": session}, run_id=run_id, at=at)
    assert response.outcome == "accepted", response
    return response


def interactive_run(
    fx: Fixture,
    run_id: str,
    *,
    session: str = SESSION,
    timeout_ms: int | None = 60000,
    at: int | None = None,
) -> str:
    """Start, launch and park ``run_id`` on an agent request; its pending step message id."""
    start_run(fx, run_id, session=session, at=at)
    fx.launch(run_id=run_id, at=at)
    run_worker(fx, run_id, "worker.ready", {}, rev=0)
    attempt = f"attempt-{run_id}"
    started: dict[str, object] = {"nodeId": NODE}
    if timeout_ms is not None:
        started["timeoutMs"] = timeout_ms
    run_worker(fx, run_id, "node.started", started, attempt=attempt)
    run_worker(fx, run_id, "interaction.request", {"contract": CONTRACT}, attempt=attempt)
    return step_message(fx, run_id)


def step_message(fx: Fixture, run_id: str = RUN) -> str:
    """The id of the run's only pending step message."""
    rows = fx.rows("workflow_messages", run_id=run_id, kind="step", status="pending")
    assert len(rows) == 1, rows
    return str(rows[0]["workflow_message_id"])


def terminal_message(fx: Fixture, run_id: str = RUN) -> str:
    """The id of the run's newest terminal message."""
    rows = fx.rows("workflow_messages", run_id=run_id, kind="terminal")
    assert rows, run_id
    newest = max(rows, key=lambda row: row["order_number"])
    return str(newest["workflow_message_id"])


def finish_fixture_run(
    fx: Fixture, status: str = "failed", *, at: int | None = None, **facts: object
) -> None:
    """Settle fixture F's request and finish ``run-1`` with ``status`` (error ``boom`` by default).

    The submission is accepted, the node finished, then ``run.finished`` ends the
    run, which posts its terminal message (§12.1).
    """
    fx.submit({"reply": "x"}, at=at)
    fx.validate(at=at)
    fx.ok("interaction.accept", {})
    fx.ok("node.finished", {"output": {"reply": "x"}}, attempt=ATTEMPT)
    finished = {"status": status, **(facts or {"error": "boom"})}
    fx.ok("run.finished", finished)


def text_blob(fx: Fixture, blob_hash: bytes | None) -> str | None:
    """The UTF-8 text blob with this hash, or None."""
    if blob_hash is None:
        return None
    found = fx.row("blobs", blob_hash=blob_hash)
    assert found is not None
    return bytes(found["content"]).decode()


def fixture_with_budget(db: Path, timeout_ms: int | None) -> Fixture:
    """Fixture F with another node budget (``None``: no timeout, so no deadline)."""
    fixture = Fixture(db)
    fixture.start(at=1000)
    fixture.launch(at=1000)
    fixture.ready()
    started: dict[str, object] = {"nodeId": NODE}
    if timeout_ms is not None:
        started["timeoutMs"] = timeout_ms
    fixture.ok("node.started", started, attempt=ATTEMPT)
    fixture.request_interaction(at=1000)
    return fixture


@functools.cache
def traffic_module() -> Any:
    """``scripts/demo_traffic.py``, the demo's traffic generator, loaded once per process."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "demo_traffic.py"
    spec = importlib.util.spec_from_file_location("demo_traffic", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def session_history(db: Path) -> tuple[Fixture, int]:
    """run-1 completed, its terminal read in a turn and cleared; run-2 still waiting.

    The cutoff returned falls after run-1 finished and before run-2 started.
    """
    fx = Fixture.f(db)
    epoch = coordinate(fx, at=2000)
    finish_fixture_run(fx, "completed", at=3000, finalOutput={"reply": "x"})
    terminal = terminal_message(fx)
    assert branch(fx, epoch, {terminal: "e-t"}, at=4000).outcome == "accepted"
    assert turn(fx, epoch, terminal, "t-1", at=90000).outcome == "accepted"
    turn(fx, epoch, terminal, "t-1", stop="completed", response="e-r", at=100000)
    payload = {"targetSessionId": "s-1", "coordinatorEpoch": epoch}
    cleared = fx.request("sessionView.clearTerminal", payload, key="clear-1", at=130000)
    assert cleared.receipt == {"cleared": True, "runId": "run-1"}
    interactive_run(fx, "run-2", session="s-2", at=140000)
    return fx, 120_000


async def idle(supervisor: Supervisor) -> None:
    """Wait until no worker of ``supervisor`` runs."""
    while supervisor.tasks:
        with contextlib.suppress(Exception):
            await asyncio.gather(*list(supervisor.tasks), return_exceptions=True)
