"""Play a session through a served host that supervises ``pwf worker run`` workers.

A coordinator watches its session and the run list on one connection; it
starts a ``builtin:ask`` run, whose supervised worker asks the session for
release notes; the coordinator sees the pending interaction arrive in its
session snapshot, answers once outside the contract (rejected by the
worker) and once inside it (accepted); the worker finishes the run.  An
echo run completes with no one answering anything.  Every push is printed
with its subscription's revision.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time

from pwf.client import HostClient, socket_path

SESSION = "session-served"
NUMBERS = itertools.count(1)


def _short(text: str, width: int = 80) -> str:
    """The receipt as compact JSON, cut to ``width`` characters."""
    return text if len(text) <= width else text[: width - 1] + "…"


def request(client: HostClient, op: str, payload: object, **members: object) -> dict:
    n = next(NUMBERS)
    message = {
        "clientId": "coordinator-served",
        "idempotencyKey": f"served-key-{n}",
        "operation": op,
        "payload": payload,
        "requestId": f"served-req-{n}",
        "schema": "pi-workflows.client.v1",
        "type": "request",
        **members,
    }
    response = client.request(message)
    shown = response.get("error") or _short(
        json.dumps(response.get("receipt"), separators=(",", ":"))
    )
    print(f"  client {op:<22} {response['outcome']:<10} {shown}")
    return response


def events(client: HostClient, seconds: float) -> list[dict]:
    seen = list(client.events(timeout=seconds))
    for event in seen:
        payload = event["payload"]
        if event["event"] == "runs":
            what = f"{payload['total']} runs: " + ", ".join(
                f"{item['runId']} {item['display']['status']}" for item in payload["items"]
            )
        else:
            run = payload["run"]
            shown = f"run {run['runId']} {run['display']['status']}" if run else "no run"
            active = "a coordinator is active" if payload["coordinatorActive"] else "no coordinator"
            what = f"{shown}, {payload['pendingInteractionTotal']} pending interaction(s), {active}"
        print(f"  push   {event['event']:<17} revision {event['revision']:<3} {what}")
    return seen


def start(client: HostClient, run_id: str, ref: str, given: object, project: str) -> None:
    name = ref.split(":")[1]
    payload = {
        "definitionDigest": "sha256:" + "0" * 64, "definitionSnapshot": {"nodes": [name]},
        "input": given, "originSessionId": SESSION if name == "ask" else "session-echo",
        "projectPath": project, "workflowName": name,
        "workflowSource": {"id": name, "kind": "builtin", "revision": "demo"},
        "workflowSourceRef": ref,
    }  # fmt: skip
    request(client, "run.start", payload, runId=run_id)


def wait_for(client: HostClient, run_id: str, status: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view = client.request({
            "clientId": "coordinator-served", "idempotencyKey": "-", "operation": "view.run.get",
            "payload": {}, "requestId": f"get-{next(NUMBERS)}", "runId": run_id,
            "schema": "pi-workflows.client.v1", "type": "request",
        })  # fmt: skip
        if view["receipt"]["display"]["status"] == status:
            print(f"  view   {run_id} is {status}")
            return
        time.sleep(0.1)
    sys.exit(f"{run_id} did not become {status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    db = parser.parse_args().db
    project = os.getcwd()
    with HostClient.connect(socket_path(db), timeout=30) as client:
        print("a coordinator watches its session and the run list")
        watch = {"coordinator": True, "sessionId": SESSION, "subscriptionId": "session"}
        epoch = request(client, "view.session.watch", watch)["receipt"]["coordinatorEpoch"]
        request(client, "view.runs.watch", {"subscriptionId": "runs"})
        events(client, 1.0)
        report = {"coordinatorEpoch": epoch, "entries": [], "hasPendingMessages": False,
                  "isIdle": False, "targetSessionId": SESSION}  # fmt: skip
        request(client, "workflowMessage.reportBranch", report)
        print("an echo run: the host starts pwf worker run for it, which finishes it")
        start(client, "run-echo", "builtin:echo", {"version": "2.2.0"}, project)
        wait_for(client, "run-echo", "completed")
        events(client, 1.0)
        print("an ask run: its worker asks the session for release notes and parks")
        ask = {"answer": {"required": ["notes"], "type": "object"}, "prompt": "Release notes?"}
        start(client, "run-ask", "builtin:ask", ask, project)
        wait_for(client, "run-ask", "waiting")
        events(client, 1.0)
        submit = {"attempt": "attempt-run-ask-ask", "requestId": "interaction-run-ask-attempt-run-ask-ask",
                  "step": "ask", "submissionId": "served-sub-1", "value": {"text": "no notes"}}  # fmt: skip
        print("an answer outside the contract: a worker is started to validate it and rejects it")
        request(client, "interaction.submit", submit, runId="run-ask", expectedRevision=1)
        print("an answer inside the contract: accepted, and the worker finishes the run with it")
        good = {**submit, "submissionId": "served-sub-2", "value": {"notes": "- Fixes the parser"}}
        request(client, "interaction.submit", good, runId="run-ask", expectedRevision=1)
        wait_for(client, "run-ask", "completed")
        events(client, 1.0)
        request(client, "host.status", {})


if __name__ == "__main__":
    main()
