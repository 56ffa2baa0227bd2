"""A writer process for the reliability suite: realistic load through the real command path.

Run as ``python _writer.py DB PREFIX STEPS GATE CLOCK``.  It opens the database the
way ``pwf request`` does and prints ``ready``.  ``GATE`` says what happens next:
``0`` writes at once; ``1`` waits for one line on stdin first, so several
writers can be released together; ``step`` waits for a stdin line before each
answer (``next``: one more; ``free``: no more waiting; end of input: stop), so
a parent can interleave it with another writer exactly.  Then it
drives runs through their lives: ``run.start``, a worker launch,
``worker.ready``, ``node.started``, ``run.status``, ``interaction.request``,
then either a submission validated by a second worker and a finished run, or
``run.pause``, ``run.resume`` and ``run.cancel``, and a retried request with
its idempotency key.  Requests and worker messages are canonical lines parsed
by the protocol parsers, exactly as ``pwf request`` and ``pwf worker`` do.

Each acknowledged answer (its transaction committed) is one flushed stdout
line, so a parent that kills this process knows what must have survived::

    request REQUEST_ID CLIENT_ID IDEMPOTENCY_KEY OUTCOME
    worker MESSAGE_ID RUN_ID OUTCOME
    launch WORKER_EPOCH RUN_ID claimed

Every outcome is checked against the one the flow expects; a unexpected is one
line on stderr and exit 1, so a writer that died early is never mistaken for
one that was killed.  ``STEPS`` of 0 writes until killed.
"""

from __future__ import annotations

import itertools
import sys
from typing import TYPE_CHECKING, Final

from pwf import canonical
from pwf.cli._options import open_store
from pwf.host import Host
from pwf.protocol.client import encode_response, parse_request
from pwf.protocol.worker import encode_worker_response, parse_worker_message

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.store import EventStore

NODE: Final = "ask"
START: Final = {
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSourceRef": "builtin:echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "definitionDigest": "d1",
    "definitionSnapshot": {},
    "input": {"prompt": "h\u00e9llo \U0001f600", "temperature": 0.7},
}


class UnexpectedAnswerError(Exception):
    """An answer the flow did not expect: the load itself is broken, not pwf's durability."""


class StopWritingError(Exception):
    """The parent closed stdin while stepping: stop writing, cleanly."""


class Writer:
    """Drives runs through one store and prints what was acknowledged."""

    def __init__(self, store: EventStore, prefix: str, clock: int, *, stepping: bool) -> None:
        """Ids start with ``PREFIX`` so writers never collide; time starts at ``clock``."""
        self.stepping = stepping
        self.store = store
        self.prefix = prefix
        self.client = f"{prefix}-client"
        epochs = itertools.count(1)
        self.host = Host(store, new_epoch=lambda: f"{prefix}-w-{next(epochs)}")
        self.numbers = itertools.count(1)
        self.ticks = itertools.count(clock, 10)
        self.steps = 0
        self.run = ""
        self.epoch = ""
        self.generation = 0

    def now(self) -> int:
        """A clock that moves 10 ms per answer: time is an input, so a log replays the same."""
        return next(self.ticks)

    def _gate(self) -> None:
        """While stepping, wait for the parent's go-ahead before each answer."""
        if not self.stepping:
            return
        command = sys.stdin.readline().strip()
        if not command:
            raise StopWritingError
        self.stepping = command != "free"

    def _ack(self, *words: object) -> None:
        """One line per committed answer, flushed before the next step starts."""
        self.steps += 1
        sys.stdout.write(" ".join(str(word) for word in words) + "\n")
        sys.stdout.flush()

    def request(
        self,
        operation: str,
        payload: object,
        expect: str,
        *,
        key: str | None = None,
        rev: int | None = None,
    ) -> str:
        """Send one client request line; returns its idempotency key."""
        self._gate()
        number = next(self.numbers)
        rid, key = f"{self.prefix}-r-{number}", key or f"{self.prefix}-k-{number}"
        members: dict[str, object] = {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": rid,
            "clientId": self.client,
            "operation": operation,
            "idempotencyKey": key,
            "payload": payload,
            "runId": self.run,
        }
        if rev is not None:
            members["expectedRevision"] = rev
        response = self.host.request(parse_request(canonical.encode(members)), self.now())
        encode_response(response)  # the line `pwf request` would print must encode
        _expect(response.outcome, expect, f"{operation} {rid}: {response.error}")
        self._ack("request", rid, self.client, key, response.outcome)
        return key

    def worker(self, operation: str, payload: object, *, attempt: bool = False) -> None:
        """Send one worker message line from the current worker at the run's revision."""
        self._gate()
        message_id = f"{self.prefix}-m-{next(self.numbers)}"
        members: dict[str, object] = {
            "schema": "pi-workflows.worker-message.v1",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": message_id,
            "kind": "worker.progress",
            "operation": operation,
            "runId": self.run,
            "generation": self.generation,
            "workerEpoch": self.epoch,
            "expectedRevision": self._value("SELECT revision FROM runs WHERE run_id = ?"),
            "payload": payload,
        }
        if attempt:
            members["attemptId"] = f"{self.run}-attempt"
        response = self.host.worker(parse_worker_message(canonical.encode(members)), self.now())
        encode_worker_response(response)  # the line `pwf worker` would print must encode
        _expect(response.outcome, "accepted", f"{operation} {message_id}: {response.error}")
        self._ack("worker", message_id, self.run, response.outcome)

    def launch(self) -> None:
        """Claim the run for a new worker, which becomes the current one."""
        self._gate()
        envelope = self.host.launch(self.run, self.now())
        self.epoch, self.generation = envelope.worker_epoch, envelope.generation
        self._ack("launch", self.epoch, self.run, "claimed")

    def _value(self, sql: str) -> int:
        _names, rows = self.store.reader().table(sql, (self.run,))
        return int(rows[0][0]) if rows else 0

    def park(self, number: int) -> None:
        """Start a run, launch its worker and park it on an agent interaction."""
        self.run = f"{self.prefix}-run-{number}"
        self.request(
            "run.start", {**START, "originSessionId": f"{self.prefix}-s-{number}"}, "accepted"
        )
        self.launch()
        self.worker("worker.ready", {})
        self.worker("node.started", {"nodeId": NODE, "timeoutMs": 60_000}, attempt=True)
        self.request("run.status", {}, "accepted")
        self.worker("interaction.request", {"contract": {"prompt": "Say hi"}}, attempt=True)

    def finish(self) -> None:
        """Submit, validate with a second worker, finish the run; a retried start is adopted."""
        _names, [row] = self.store.reader().table(
            "SELECT request_id, revision FROM interactive_requests WHERE run_id = ?", (self.run,)
        )
        submission = {
            "requestId": row[0],
            "attempt": f"{self.run}-attempt",
            "step": NODE,
            "submissionId": f"{self.run}-submission",
            "value": {"reply": "x"},
        }
        self.request("interaction.submit", submission, "unavailable", rev=int(row[1]))
        self.launch()
        self.worker("worker.ready", {})
        self.worker("interaction.accept", {})
        self.worker("node.finished", {"output": {"reply": "x"}}, attempt=True)
        self.worker("run.finished", {"status": "completed", "finalOutput": {}})
        self.request("run.status", {}, "accepted")

    def pause_resume_cancel(self) -> None:
        """Pause the held run, resume it, cancel it; a retried cancel is adopted."""
        self.request("run.pause", {}, "accepted")
        self.request("run.resume", {}, "accepted")
        self.request("run.status", {}, "accepted")
        key = self.request("run.cancel", {}, "accepted")
        self.request("run.cancel", {}, "adopted", key=key)


def _expect(outcome: str, expected: str, what: str) -> None:
    """The flow is deterministic: any other outcome means the load is broken, not the store."""
    if outcome != expected:
        raise UnexpectedAnswerError(f"{what}: expected {expected}, got {outcome}")


def drive(writer: Writer, steps: int) -> None:
    """Alternate the two run lives until ``steps`` answers were acknowledged (0: forever)."""
    flows: tuple[Callable[[], None], ...] = (writer.finish, writer.pause_resume_cancel)
    for number in itertools.count(1):
        writer.park(number)
        flows[number % 2]()
        if steps and writer.steps >= steps:
            return


def main(argv: list[str]) -> int:
    """Open the store as ``pwf request`` does, say ready, optionally wait, then write."""
    db, prefix, steps, gate, clock = argv[1], argv[2], int(argv[3]), argv[4], int(argv[5])
    with open_store(db) as store:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        if gate == "1":
            sys.stdin.readline()
        try:
            drive(Writer(store, prefix, clock, stepping=gate == "step"), steps)
        except StopWritingError:
            return 0
        except UnexpectedAnswerError as unexpected:
            sys.stderr.write(f"{unexpected}\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
