"""Play one workflow session end to end through ``pwf request`` and ``pwf worker``.

A run parks on an agent step; the coordinator attaches and the step message
is delivered; a model turn ends without a submission (a reminder follows);
the run is paused and resumed; a submission is validated by a worker and
settles the step; the run finishes; the terminal result is shown, read in a
turn, and the run is restarted.  Every line goes through the command line
exactly as a coordinator or worker would send it, at a scripted time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from typing import Any

from pwf import canonical

RUN = "run-session"
SESSION = "session-release"
CLIENT = "coordinator-demo"
T0 = 1_785_700_000_000


def _short(text: str, width: int = 40) -> str:
    """Keep demo lines short: the receipt or error cut to ``width`` characters."""
    return text if len(text) <= width else text[: width - 1] + "…"


class Session:
    def __init__(self, db: str) -> None:
        self.db = db
        self.numbers = itertools.count(1)
        self.epoch = ""
        self.worker_epoch = ""
        self.generation = 0
        self.revision = 0

    def _pwf(self, args: list[str], line: bytes) -> dict[str, Any]:
        done = subprocess.run(
            ["pwf", *args, "--db", self.db], input=line + b"\n", capture_output=True, check=False
        )
        if done.returncode != 0:
            sys.exit(f"pwf {args[0]} failed: {done.stderr.decode().strip()}")
        return json.loads(done.stdout)

    def request(self, at: int, op: str, payload: object, **members: object) -> dict[str, Any]:
        n = next(self.numbers)
        message = {
            "clientId": CLIENT,
            "idempotencyKey": members.pop("key", f"session-key-{n}"),
            "operation": op,
            "payload": payload,
            "requestId": f"session-req-{n}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
            **members,
        }
        response = self._pwf(
            ["request", "--at", str(T0 + at), "--wait-ms", "0"], canonical.encode(message)
        )
        shown = response.get("error") or json.dumps(response.get("receipt"))
        print(f"  +{at / 1000:>5.1f}s client {op:<28} {response['outcome']:<11} {_short(shown)}")
        return response

    def worker(
        self, at: int, op: str, payload: object, attempt: str | None = None
    ) -> dict[str, Any]:
        message = {
            "expectedRevision": self.revision,
            "generation": self.generation,
            "kind": "worker.progress",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": f"msg-{next(self.numbers)}",
            "operation": op,
            "payload": payload,
            "runId": RUN,
            "schema": "pi-workflows.worker-message.v1",
            "workerEpoch": self.worker_epoch,
        }
        if attempt:
            message["attemptId"] = attempt
        response = self._pwf(["worker", "--at", str(T0 + at)], canonical.encode(message))
        self.revision = response.get("revision", self.revision)
        shown = response.get("error") or json.dumps(response.get("result"))[:90]
        print(f"  +{at / 1000:>5.1f}s worker {op:<28} {response['outcome']:<11} {_short(shown)}")
        return response

    def launch(self, at: int) -> None:
        done = subprocess.run(
            ["pwf", "worker", "launch", RUN, "--db", self.db, "--at", str(T0 + at)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"pwf worker launch failed: {done.stderr.decode().strip()}")
        envelope = json.loads(done.stdout)
        self.worker_epoch, self.generation = envelope["workerEpoch"], envelope["generation"]
        print(
            f"  +{at / 1000:>5.1f}s worker launch                      generation {self.generation}"
        )

    def session(self, **more: object) -> dict[str, object]:
        return {"coordinatorEpoch": self.epoch, "targetSessionId": SESSION, **more}

    def deliver(self, at: int, message_id: str, entry: str) -> None:
        entries = [{"piSessionEntryId": entry, "workflowMessageId": message_id}]
        payload = self.session(entries=entries, hasPendingMessages=False, isIdle=False)
        self.request(at, "workflowMessage.reportBranch", payload)

    def turn(self, at: int, message_id: str, turn_id: str, state: str, **end: object) -> None:
        payload = self.session(
            runId=RUN, state=state, workflowMessageId=message_id, workflowTurnId=turn_id, **end
        )
        self.request(at, "workflowTurn.report", payload)

    def next_message(self, at: int) -> str:
        done = subprocess.run(
            [
                "pwf",
                "session",
                "view",
                SESSION,
                "--epoch",
                self.epoch,
                "--db",
                self.db,
                "--at",
                str(T0 + at),
            ],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"pwf session view failed: {done.stderr.decode().strip()}")
        upcoming = json.loads(done.stdout)["nextMessage"]
        print(
            f"  +{at / 1000:>5.1f}s session view                       next {upcoming['kind']} message"
        )
        return str(upcoming["workflowMessageId"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    s = Session(parser.parse_args().db)
    start = {
        "definitionDigest": "sha256:9f2c",
        "definitionSnapshot": {"nodes": ["draft"]},
        "input": {"version": "2.1.0"},
        "originSessionId": SESSION,
        "projectPath": "/srv/project",
        "workflowName": "release-notes",
        "workflowSource": {"id": "release-notes", "kind": "builtin", "revision": "2.1.0"},
        "workflowSourceRef": "builtin:release-notes",
    }
    print("a run parks on an agent step")
    s.request(0, "run.start", start, runId=RUN)
    s.launch(1_000)
    s.worker(1_500, "worker.ready", {})
    s.worker(2_000, "node.started", {"nodeId": "draft", "timeoutMs": 600_000}, "attempt-release-1")
    s.worker(
        3_000,
        "interaction.request",
        {"contract": {"prompt": "Draft the release notes for 2.1.0"}},
        "attempt-release-1",
    )
    print(
        "the coordinator attaches; the step message is delivered; a turn ends without a submission"
    )
    watch = {"coordinator": True, "sessionId": SESSION, "subscriptionId": "session-release"}
    s.epoch = s.request(4_000, "view.session.watch", watch)["receipt"]["coordinatorEpoch"]
    s.request(
        4_500,
        "workflowMessage.reportBranch",
        s.session(entries=[], hasPendingMessages=False, isIdle=False),
    )
    step = s.next_message(5_000)
    s.deliver(6_000, step, "entry-1")
    s.turn(7_000, step, "turn-1", "started")
    s.turn(
        40_000, step, "turn-1", "ended", responseSessionEntryId="entry-2", stopReason="completed"
    )
    print("the run is paused and resumed: the step is presented again")
    s.request(50_000, "run.pause", None, runId=RUN)
    s.request(80_000, "run.resume", None, runId=RUN)
    resumed = s.next_message(81_000)
    s.deliver(82_000, resumed, "entry-3")
    s.turn(83_000, resumed, "turn-2", "started")
    print("a submission is validated by a worker and settles the step")
    status = s.request(90_500, "run.status", None, runId=RUN)["receipt"]["interactions"][0][
        "revision"
    ]
    submit = {
        "attempt": "attempt-release-1",
        "requestId": f"interaction-{RUN}-attempt-release-1",
        "step": "draft",
        "submissionId": "sub-1",
        "value": {"notes": "- Fixes the parser"},
    }
    s.request(
        91_000, "interaction.submit", submit, runId=RUN, expectedRevision=status, key="submit-1"
    )
    print("  (unavailable: no worker has validated it yet; a worker is launched, accepts it,")
    print("   and the same request retried with the same key is adopted with the verdict)")
    s.launch(92_000)
    s.worker(92_500, "worker.ready", {})
    s.worker(93_000, "interaction.accept", {})
    s.request(
        93_500, "interaction.submit", submit, runId=RUN, expectedRevision=status, key="submit-1"
    )
    s.turn(
        95_000, resumed, "turn-2", "ended", responseSessionEntryId="entry-4", stopReason="completed"
    )
    print("the run finishes and its terminal result is shown and read")
    s.worker(
        96_000, "node.finished", {"output": {"notes": "- Fixes the parser"}}, "attempt-release-1"
    )
    s.worker(
        97_000,
        "run.finished",
        {"finalOutput": {"notes": "- Fixes the parser"}, "status": "completed"},
    )
    terminal = s.next_message(98_000)
    s.deliver(99_000, terminal, "entry-5")
    s.turn(100_000, terminal, "turn-3", "started")
    s.turn(
        110_000,
        terminal,
        "turn-3",
        "ended",
        responseSessionEntryId="entry-6",
        stopReason="completed",
    )
    print("the run is restarted from its terminal result")
    s.request(120_000, "run.restart", s.session(workflowMessageId=terminal), runId=RUN)


if __name__ == "__main__":
    main()
