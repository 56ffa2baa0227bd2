"""Drive a realistic mix of client requests and worker messages through pwf's command path.

Each run is started by a session coordinator, claimed by a worker, parks on an
agent step, gets a submission that the worker validates (some are rejected
and answered again), finishes, and is looked at with retried ``run.status``
requests.  Ids and the clock come from a seed, so a given seed always writes
the same log.
"""

from __future__ import annotations

import argparse
import itertools
import random

from pwf import canonical
from pwf.cli._options import open_store
from pwf.commands.ids import restart_run_id
from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.protocol.worker import parse_worker_message


class Traffic:
    """Runs through the command path; ``sessions`` adds coordinators, deliveries and turns.

    With ``sessions`` each run's origin session has an attached coordinator
    that is shown the run's step message, reports its branch and a model
    turn over it, and reads the terminal message; every fifth run is restarted from it and
    every eleventh is cancelled while it waits.  ``group`` runs that many
    runs in one write transaction, each request in its own savepoint, as a
    served host groups requests (the log is the same, in fewer commits).
    """

    def __init__(self, db: str, seed: int, *, sessions: bool = False, group: int = 1) -> None:
        self.store = open_store(db)
        self.sessions = sessions
        self.group = group
        self.epochs_of: dict[str, str] = {}
        self.turns = itertools.count(1)
        self.rng = random.Random(seed)
        self.epochs = itertools.count(1)
        self.host = Host(self.store, new_epoch=lambda: f"worker-{seed}-{next(self.epochs)}")
        self.now = 1_785_600_010_000
        self.ids = itertools.count(1)
        self.outcomes: dict[str, int] = {}

    def tick(self, low: int = 50, high: int = 5_000) -> int:
        self.now += self.rng.randint(low, high)
        return self.now

    def request(
        self,
        op: str,
        payload: object,
        run_id: str | None = None,
        rev: int | None = None,
        key: str | None = None,
        rid: str | None = None,
    ) -> object:
        n = next(self.ids)
        req = ClientRequest(
            request_id=rid or f"req-{n}",
            client_id=f"coordinator-{run_id}",
            operation=op,
            idempotency_key=key or f"key-{n}",
            payload=payload,
            run_id=run_id,
            expected_revision=rev,
        )
        response = self._one(lambda: self.host.request(req, self.tick()))
        self.outcomes[response.outcome] = self.outcomes.get(response.outcome, 0) + 1
        return response

    def worker(self, env: object, op: str, payload: object, rev: int, attempt: str | None = None):
        message = {
            "schema": "pi-workflows.worker-message.v1",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": f"msg-{next(self.ids)}",
            "kind": "worker.progress",
            "operation": op,
            "runId": env.run_id,
            "generation": env.generation,
            "workerEpoch": env.worker_epoch,
            "expectedRevision": rev,
            "payload": payload,
        }
        if attempt:
            message["attemptId"] = attempt
        parsed = parse_worker_message(canonical.encode(message))
        return self._one(lambda: self.host.worker(parsed, self.tick()))

    def _one(self, work):
        """One decision: in its own savepoint when runs share a transaction."""
        shared = self.host.shared
        if shared is None:
            return work()
        with shared.savepoint():
            return work()

    def batch(self, indexes) -> None:
        """Run the runs of ``indexes`` in write transactions of ``group`` runs each."""
        indexes = list(indexes)
        for first in range(0, len(indexes), self.group):
            if self.group == 1:
                self.run(indexes[first])
                continue
            with self.store.transaction() as tx:
                self.host.shared = tx
                try:
                    for index in indexes[first : first + self.group]:
                        self.run(index)
                finally:
                    self.host.shared = None

    def coordinator(self, session: str) -> str:
        """The epoch of the coordinator attached to ``session`` (attached on first use)."""
        if session not in self.epochs_of:
            watch = {
                "coordinator": True,
                "sessionId": session,
                "subscriptionId": f"watch-{session}",
            }
            receipt = self.request("view.session.watch", watch).receipt
            self.epochs_of[session] = receipt["coordinatorEpoch"]
            self.request(
                "workflowMessage.reportBranch",
                {
                    "coordinatorEpoch": receipt["coordinatorEpoch"],
                    "targetSessionId": session,
                    "entries": [],
                    "hasPendingMessages": False,
                    "isIdle": False,
                },
            )
        return self.epochs_of[session]

    def drain(self, session: str, run_id: str, *, until: str = "step") -> str | None:
        """Show the coordinator the pending messages of ``session`` up to one of kind ``until``.

        Each is delivered and read in one model turn that ends without a
        submission (a step message is then presented again, so one turn per
        step is shown); returns the id of the last message shown.
        """
        epoch = self.coordinator(session)
        last = None
        for _ in range(4):
            upcoming = self._one(lambda: self.host.session_view(session, self.tick(), epoch))
            shown = upcoming.get("nextMessage")
            if not shown:
                break
            last = message_id = shown["workflowMessageId"]
            base = {"coordinatorEpoch": epoch, "targetSessionId": session}
            entry = f"entry-{next(self.turns)}"
            self.request(
                "workflowMessage.reportBranch",
                {
                    **base,
                    "entries": [{"piSessionEntryId": entry, "workflowMessageId": message_id}],
                    "hasPendingMessages": False,
                    "isIdle": False,
                },
            )
            turn = {
                **base,
                "runId": shown.get("runId") or run_id,
                "workflowMessageId": message_id,
                "workflowTurnId": f"turn-{next(self.turns)}",
            }
            self.request("workflowTurn.report", {**turn, "state": "started"})
            ended = {
                "responseSessionEntryId": f"entry-{next(self.turns)}",
                "stopReason": "completed",
            }
            self.request("workflowTurn.report", {**turn, "state": "ended", **ended})
            if shown["kind"] == until:
                break
        return last

    def run(self, index: int) -> None:
        run_id, session = f"run-{index}", f"session-{index % 7}"
        start = {
            "projectPath": "/srv/project",
            "workflowName": "release-notes",
            "workflowSourceRef": "builtin:release-notes",
            "workflowSource": {"id": "release-notes", "kind": "builtin", "revision": "2.0.0"},
            "definitionDigest": "sha256:9f2c",
            "definitionSnapshot": {"nodes": ["draft"]},
            "input": {"version": f"1.{index}.0"},
            "originSessionId": session,
        }
        self.request("run.start", start, run_id=run_id)
        env = self.host.launch(run_id, self.tick())
        r = self.worker(env, "worker.ready", {}, 0)
        attempt = f"attempt-{index}"
        r = self.worker(
            env, "node.started", {"nodeId": "draft", "timeoutMs": 600_000}, r.revision, attempt
        )
        r = self.worker(
            env,
            "interaction.request",
            {"contract": {"prompt": f"Draft the notes for 1.{index}.0"}},
            r.revision,
            attempt,
        )
        request_id = f"interaction-{run_id}-{attempt}"
        if self.sessions:
            self.drain(session, run_id)
            if index % 11 == 0:
                self.request("run.cancel", None, run_id=run_id)
                self.drain(session, run_id)
                return
        for tries in itertools.count(1):
            ids = {"rid": f"status-{index}-{tries}", "key": f"status-{index}-{tries}"}
            status = self.request("run.status", None, run_id=run_id, **ids)
            self.request("run.status", None, run_id=run_id, **ids)  # a retried request is adopted
            revision = status.receipt["interactions"][0]["revision"]
            self.request(
                "interaction.submit",
                {
                    "requestId": request_id,
                    "attempt": attempt,
                    "step": "draft",
                    "submissionId": f"sub-{index}-{tries}",
                    "value": {"notes": "x" * tries},
                },
                run_id=run_id,
                rev=revision,
            )
            env = self.host.launch(run_id, self.tick())
            r = self.worker(env, "worker.ready", {}, 0)
            if tries < 3 and self.rng.random() < 0.25:
                self.worker(
                    env, "interaction.reject", {"error": "Notes must mention every fix"}, r.revision
                )
                continue
            r = self.worker(env, "interaction.accept", {}, r.revision)
            break
        r = self.worker(env, "node.finished", {"output": {"notes": "done"}}, r.revision, attempt)
        status = "completed" if self.rng.random() < 0.8 else "failed"
        payload = (
            {"status": status, "finalOutput": {"notes": "done"}}
            if status == "completed"
            else {"status": status, "error": "publishing failed"}
        )
        self.worker(env, "run.finished", payload, r.revision)
        if self.sessions:
            terminal = self.drain(session, run_id, until="terminal")
            if terminal is not None and index % 5 == 0:
                restart = {
                    "coordinatorEpoch": self.coordinator(session),
                    "targetSessionId": session,
                    "workflowMessageId": terminal,
                }
                self.request("run.restart", restart, run_id=run_id)
                # The restarted run would hold the session: cancel it, as a user changing their mind.
                restarted = restart_run_id(terminal)
                self.request("run.cancel", None, run_id=restarted)
                self.drain(session, restarted, until="terminal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--sessions", action="store_true", help="coordinators, deliveries and turns"
    )
    parser.add_argument("--group", type=int, default=1, help="runs per write transaction")
    args = parser.parse_args()
    traffic = Traffic(args.db, args.seed, sessions=args.sessions, group=args.group)
    traffic.batch(range(1, args.runs + 1))
    head = traffic.store.head()
    summary = ", ".join(f"{k} {v}" for k, v in sorted(traffic.outcomes.items()))
    print(f"{args.runs} runs, {head.seq} events in {head.batch} batches")
    print(f"responses: {summary}")
    if traffic.outcomes.get("unavailable"):
        print(
            "(unavailable: a submission is validated by the run's worker; without a worker's"
            "\n verdict yet the answer is unavailable, and the retry with the same idempotency"
            "\n key, once the worker decided, is adopted with the verdict)"
        )


if __name__ == "__main__":
    main()
