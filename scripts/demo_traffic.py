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
from pwf.host import Host
from pwf.protocol.client import ClientRequest
from pwf.protocol.worker import parse_worker_message


class Traffic:
    def __init__(self, db: str, seed: int) -> None:
        self.store = open_store(db)
        self.rng = random.Random(seed)
        self.epochs = itertools.count(1)
        self.host = Host(self.store, new_epoch=lambda: f"worker-{seed}-{next(self.epochs)}")
        self.now = 1_785_600_010_000
        self.ids = itertools.count(1)
        self.outcomes: dict[str, int] = {}

    def tick(self, low: int = 50, high: int = 5_000) -> int:
        self.now += self.rng.randint(low, high)
        return self.now

    def request(self, op: str, payload: object, run_id: str | None = None, rev: int | None = None,
                key: str | None = None, rid: str | None = None) -> object:
        n = next(self.ids)
        req = ClientRequest(request_id=rid or f"req-{n}", client_id=f"coordinator-{run_id}",
                            operation=op, idempotency_key=key or f"key-{n}", payload=payload,
                            run_id=run_id, expected_revision=rev)
        response = self.host.request(req, self.tick())
        self.outcomes[response.outcome] = self.outcomes.get(response.outcome, 0) + 1
        return response

    def worker(self, env: object, op: str, payload: object, rev: int, attempt: str | None = None):
        message = {"schema": "pi-workflows.worker-message.v1",
                   "launchSchema": "pi-workflows.worker-launch.v1",
                   "messageId": f"msg-{next(self.ids)}", "kind": "worker.progress",
                   "operation": op, "runId": env.run_id, "generation": env.generation,
                   "workerEpoch": env.worker_epoch, "expectedRevision": rev, "payload": payload}
        if attempt:
            message["attemptId"] = attempt
        return self.host.worker(parse_worker_message(canonical.encode(message)), self.tick())

    def run(self, index: int) -> None:
        run_id, session = f"run-{index}", f"session-{index % 7}"
        start = {"projectPath": "/srv/project", "workflowName": "release-notes",
                 "workflowSourceRef": "builtin:release-notes",
                 "workflowSource": {"id": "release-notes", "kind": "builtin", "revision": "2.0.0"},
                 "definitionDigest": "sha256:9f2c", "definitionSnapshot": {"nodes": ["draft"]},
                 "input": {"version": f"1.{index}.0"}, "originSessionId": session}
        self.request("run.start", start, run_id=run_id)
        env = self.host.launch(run_id, self.tick())
        r = self.worker(env, "worker.ready", {}, 0)
        attempt = f"attempt-{index}"
        r = self.worker(env, "node.started", {"nodeId": "draft", "timeoutMs": 600_000}, r.revision, attempt)
        r = self.worker(env, "interaction.request",
                        {"contract": {"prompt": f"Draft the notes for 1.{index}.0"}}, r.revision, attempt)
        request_id = f"interaction-{run_id}-{attempt}"
        for tries in itertools.count(1):
            ids = {"rid": f"status-{index}-{tries}", "key": f"status-{index}-{tries}"}
            status = self.request("run.status", None, run_id=run_id, **ids)
            self.request("run.status", None, run_id=run_id, **ids)  # a retried request is adopted
            revision = status.receipt["interactions"][0]["revision"]
            self.request("interaction.submit",
                         {"requestId": request_id, "attempt": attempt, "step": "draft",
                          "submissionId": f"sub-{index}-{tries}", "value": {"notes": "x" * tries}},
                         run_id=run_id, rev=revision)
            env = self.host.launch(run_id, self.tick())
            r = self.worker(env, "worker.ready", {}, 0)
            if tries < 3 and self.rng.random() < 0.25:
                self.worker(env, "interaction.reject", {"error": "Notes must mention every fix"}, r.revision)
                continue
            r = self.worker(env, "interaction.accept", {}, r.revision)
            break
        r = self.worker(env, "node.finished", {"output": {"notes": "done"}}, r.revision, attempt)
        status = "completed" if self.rng.random() < 0.8 else "failed"
        payload = {"status": status, "finalOutput": {"notes": "done"}} if status == "completed" else {
            "status": status, "error": "publishing failed"}
        self.worker(env, "run.finished", payload, r.revision)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    traffic = Traffic(args.db, args.seed)
    for index in range(1, args.runs + 1):
        traffic.run(index)
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
