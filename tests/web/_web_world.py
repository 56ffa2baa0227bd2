"""A realistic database for the web view, built by driving requests through the command path.

Finished runs (some with a rejected submission), queued runs in other
sessions, and one session whose run is parked on an agent step: the
coordinator attached, the step delivered, a turn ended without a submission,
the run paused and resumed, and a second turn open, so its interaction waits
with deadline shifts (DOMAIN §10) and a diagnosis.  Plain helpers: the
fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Final

from pwf import canonical
from pwf.cli._options import open_store
from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.protocol.worker import parse_worker_message

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.protocol.client import ClientResponse
    from pwf.protocol.worker import LaunchEnvelope, WorkerResponse

T0: Final = 1_785_700_000_000
WAITING_RUN: Final = "run-session"
SESSION: Final = "session-release"
ATTEMPT: Final = "attempt-release-1"
WAITING: Final = f"interaction-{WAITING_RUN}-{ATTEMPT}"
HOSTILE_RUN: Final = 'run-<script>alert("x")</script>\''
HOSTILE_TEXT: Final = "<script>alert('pwned')</script> \"quoted\" 'single' <b>&amp;</b>"
HOSTILE_REQUEST: Final = f"interaction-{HOSTILE_RUN}-attempt-<x>"
HOSTILE_FAILED: Final = "run-<b>failed</b>"
LONE_RUN: Final = "run-\udc80-lone"
LONE_TEXT: Final = "a\ud800b <script>alert(3)</script>"


def start_payload(session: str, value: object) -> dict[str, Any]:
    """A ``run.start`` payload for the builtin release-notes workflow."""
    return {
        "definitionDigest": "sha256:9f2c",
        "definitionSnapshot": {"nodes": ["draft"]},
        "input": value,
        "originSessionId": session,
        "projectPath": "/srv/project",
        "workflowName": "release-notes",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "workflowSourceRef": "builtin:release-notes",
    }


class World:
    """One database driven through :class:`pwf.host.Host`, with a scripted clock."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.store = open_store(str(db), create=True)
        self.epochs = itertools.count(1)
        self.host = Host(self.store, new_epoch=lambda: f"worker-{next(self.epochs)}")
        self.ids = itertools.count(1)
        self.coordinator = ""

    def close(self) -> None:
        self.store.close()

    def request(self, at: int, op: str, payload: object, **members: Any) -> ClientResponse:
        n = next(self.ids)
        request = ClientRequest(
            request_id=members.pop("rid", f"req-{n}"),
            client_id="coordinator-web",
            operation=op,
            idempotency_key=members.pop("key", f"key-{n}"),
            payload=payload,
            **members,
        )
        return self.host.request(request, T0 + at)

    def worker(
        self,
        at: int,
        env: LaunchEnvelope,
        op: str,
        payload: object,
        rev: int | None,
        **more: object,
    ) -> WorkerResponse:
        message = {
            "expectedRevision": rev,
            "generation": env.generation,
            "kind": "worker.progress",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": f"msg-{next(self.ids)}",
            "operation": op,
            "payload": payload,
            "runId": env.run_id,
            "schema": "pi-workflows.worker-message.v1",
            "workerEpoch": env.worker_epoch,
            **more,
        }
        response = self.host.worker(parse_worker_message(canonical.encode(message)), T0 + at)
        assert response.outcome == "accepted", response
        return response

    def finished_run(self, index: int, at: int, *, reject: bool = False) -> int:
        """A run that parks on its step, is answered, validated and finishes; the next free time."""
        run_id, attempt = f"run-{index}", f"attempt-{index}"
        self.request(
            at, "run.start", start_payload(f"session-{index % 3}", {"n": index}), run_id=run_id
        )
        env = self.host.launch(run_id, T0 + at + 10)
        r = self.worker(at + 20, env, "worker.ready", {}, 0)
        r = self.worker(
            at + 30,
            env,
            "node.started",
            {"nodeId": "draft", "timeoutMs": 600_000},
            r.revision,
            attemptId=attempt,
        )
        r = self.worker(
            at + 40,
            env,
            "interaction.request",
            {"contract": {"prompt": f"Draft {index}"}},
            r.revision,
            attemptId=attempt,
        )
        for tries in (1, 2) if reject else (1,):
            status = self.request(at + 50 * tries, "run.status", None, run_id=run_id)
            revision = status.receipt["interactions"][0]["revision"]  # type: ignore[index]
            submit = {
                "requestId": f"interaction-{run_id}-{attempt}",
                "attempt": attempt,
                "step": "draft",
                "submissionId": f"sub-{index}-{tries}",
                "value": {"notes": "x" * tries},
            }
            self.request(
                at + 60 * tries,
                "interaction.submit",
                submit,
                run_id=run_id,
                expected_revision=revision,
            )
            env = self.host.launch(run_id, T0 + at + 70 * tries)
            r = self.worker(at + 80 * tries, env, "worker.ready", {}, 0)
            verdict = "interaction.reject" if reject and tries == 1 else "interaction.accept"
            payload = (
                {"error": "Notes must mention every fix"} if verdict.endswith("reject") else {}
            )
            r = self.worker(at + 90 * tries, env, verdict, payload, r.revision)
        r = self.worker(
            at + 300,
            env,
            "node.finished",
            {"output": {"notes": "done"}},
            r.revision,
            attemptId=attempt,
        )
        self.worker(
            at + 310,
            env,
            "run.finished",
            {"finalOutput": {"notes": "done"}, "status": "completed"},
            r.revision,
        )
        return at + 1_000

    def session(self, **more: object) -> dict[str, object]:
        return {"coordinatorEpoch": self.coordinator, "targetSessionId": SESSION, **more}

    def waiting_session(self, at: int) -> None:
        """The session of DOMAIN §10's story: two turns, a pause, deadline shifts, one turn open."""
        self.request(
            at, "run.start", start_payload(SESSION, {"version": "2.1.0"}), run_id=WAITING_RUN
        )
        env = self.host.launch(WAITING_RUN, T0 + at + 1_000)
        r = self.worker(at + 1_500, env, "worker.ready", {}, 0)
        r = self.worker(
            at + 2_000,
            env,
            "node.started",
            {"nodeId": "draft", "timeoutMs": 600_000},
            r.revision,
            attemptId=ATTEMPT,
        )
        self.worker(
            at + 3_000,
            env,
            "interaction.request",
            {"contract": {"prompt": "Draft the release notes for 2.1.0"}},
            r.revision,
            attemptId=ATTEMPT,
        )
        watch = {"coordinator": True, "sessionId": SESSION, "subscriptionId": "web-watch"}
        watched = self.request(at + 4_000, "view.session.watch", watch)
        self.coordinator = str(watched.receipt["coordinatorEpoch"])  # type: ignore[index]
        self.request(
            at + 4_500,
            "workflowMessage.reportBranch",
            self.session(entries=[], hasPendingMessages=False, isIdle=False),
        )
        step = self._deliver(at + 5_000, "entry-1")
        self._turn(at + 7_000, step, "turn-1", "started")
        self._turn(
            at + 40_000,
            step,
            "turn-1",
            "ended",
            responseSessionEntryId="entry-2",
            stopReason="completed",
        )
        self.request(at + 50_000, "run.pause", None, run_id=WAITING_RUN)
        self.request(at + 80_000, "run.resume", None, run_id=WAITING_RUN)
        resumed = self._deliver(at + 81_000, "entry-3")
        self._turn(at + 83_000, resumed, "turn-2", "started")

    def _deliver(self, at: int, entry: str) -> str:
        view = self.host.session_view(SESSION, T0 + at, self.coordinator)
        message = str(view["nextMessage"]["workflowMessageId"])  # type: ignore[index]
        entries = [{"piSessionEntryId": entry, "workflowMessageId": message}]
        self.request(
            at + 500,
            "workflowMessage.reportBranch",
            self.session(entries=entries, hasPendingMessages=False, isIdle=False),
        )
        return message

    def _turn(self, at: int, message: str, turn: str, state: str, **end: object) -> None:
        payload = self.session(
            runId=WAITING_RUN, state=state, workflowMessageId=message, workflowTurnId=turn, **end
        )
        response = self.request(at, "workflowTurn.report", payload)
        assert response.outcome == "accepted", response


def build(db: Path) -> None:
    """The realistic database: finished runs, queued runs, and the waiting session."""
    world = World(db)
    try:
        at = 0
        for index in range(1, 6):
            at = world.finished_run(index, at, reject=index == 2)
        for index in range(6, 9):
            world.request(
                at,
                "run.start",
                start_payload(f"session-q{index}", {"n": index}),
                run_id=f"run-{index}",
            )
            at += 100
        world.waiting_session(at)
    finally:
        world.close()


def hostile(db: Path) -> None:
    """Ids, an input, a prompt, a submission and an error that hold markup, quotes and script.

    A third run's id, session and input hold lone surrogates.

    One run waits on its interaction with a submission being validated; another failed
    with a hostile error.
    """
    world = World(db)
    try:
        value = {"text": HOSTILE_TEXT, "<img src=x onerror=alert(1)>": "\"'><svg onload=alert(2)>"}
        response = world.request(
            0, "run.start", start_payload("session-<i>x</i>", value), run_id=HOSTILE_RUN
        )
        assert response.outcome == "accepted", response
        attempt = "attempt-<x>"
        env = world.host.launch(HOSTILE_RUN, T0 + 10)
        r = world.worker(20, env, "worker.ready", {}, 0)
        r = world.worker(
            30,
            env,
            "node.started",
            {"nodeId": "draft", "timeoutMs": 600_000},
            r.revision,
            attemptId=attempt,
        )
        world.worker(
            40,
            env,
            "interaction.request",
            {"contract": {"prompt": HOSTILE_TEXT}},
            r.revision,
            attemptId=attempt,
        )
        status = world.request(50, "run.status", None, run_id=HOSTILE_RUN)
        submit = {
            "requestId": HOSTILE_REQUEST,
            "attempt": attempt,
            "step": "draft",
            "submissionId": "sub-<script>",
            "value": {"notes": HOSTILE_TEXT},
        }
        revision = status.receipt["interactions"][0]["revision"]  # type: ignore[index]
        world.request(
            60, "interaction.submit", submit, run_id=HOSTILE_RUN, expected_revision=revision
        )
        _failed_run(world)
        lone = start_payload("session-\udc80", {"text": LONE_TEXT})
        response = world.request(200, "run.start", lone, run_id=LONE_RUN)
        assert response.outcome == "accepted", response
    finally:
        world.close()


def _failed_run(world: World) -> None:
    response = world.request(
        100, "run.start", start_payload("session-f", {}), run_id=HOSTILE_FAILED
    )
    assert response.outcome == "accepted", response
    env = world.host.launch(HOSTILE_FAILED, T0 + 110)
    r = world.worker(120, env, "worker.ready", {}, 0)
    world.worker(130, env, "run.finished", {"error": HOSTILE_TEXT, "status": "failed"}, r.revision)
