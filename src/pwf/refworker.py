"""``pwf worker run``: the reference worker a host supervises (HOST §7).

Imports the worker protocol and canonical JSON only: it knows the host
through its two pipes and nothing else.  It reads its launch envelope from
``PI_WORKFLOWS_WORKER_LAUNCH`` (base64url of the canonical JSON), writes one
worker message at a time on stdout and reads each answer on stdin before it
sends the next, and runs pwf's built-in test workflows:

* ``builtin:echo`` finishes with its input as its output;
* ``builtin:ask`` asks its origin session for an answer and finishes with
  the accepted one.  The answer must satisfy the request's contract
  ``{prompt, answer}``, where ``answer`` is ``{type, required?}``: a JSON
  type (``object``, ``string``, ``number``, ``boolean``, ``array``) and, for
  an object, the members it must have.
"""

from __future__ import annotations

import itertools
from typing import IO, TYPE_CHECKING, Final

from pwf import canonical
from pwf.errors import PwfError
from pwf.protocol.worker import (
    LAUNCH_ENV,
    WORKER_LAUNCH_SCHEMA,
    WORKER_MESSAGE_SCHEMA,
    WorkerResponse,
    parse_launch_variable,
    parse_worker_response,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pwf.protocol.worker import LaunchEnvelope

__all__ = ["ENV", "WORKFLOWS", "Worker", "contract_error", "envelope_from_env", "run"]

ENV: Final = LAUNCH_ENV
WORKFLOWS: Final = ("builtin:echo", "builtin:ask")
ASK_NODE: Final = "ask"
ECHO_NODE: Final = "echo"
DEFAULT_ANSWER: Final = {"type": "string"}
_TYPES: Final[dict[str, type | tuple[type, ...]]] = {
    "array": list,
    "boolean": bool,
    "number": (int, float),
    "object": dict,
    "string": str,
}


class WorkerError(PwfError):
    """The host refused a message the worker cannot go on without."""


def envelope_from_env(environ: Mapping[str, str]) -> LaunchEnvelope:
    """The launch envelope in ``PI_WORKFLOWS_WORKER_LAUNCH``.

    Raises:
        ProtocolError: it is missing, not base64url, or not a valid envelope.
    """
    return parse_launch_variable(environ.get(ENV))


def contract_error(contract: object, value: object) -> str | None:
    """Why ``value`` does not satisfy the contract's ``answer``, or None when it does."""
    answer = contract.get("answer", DEFAULT_ANSWER) if isinstance(contract, dict) else None
    if not isinstance(answer, dict):
        return "The interaction contract has no valid answer shape"
    kind = answer.get("type", "string")
    expected = _TYPES.get(kind) if isinstance(kind, str) else None
    if expected is None:
        return f"The interaction contract names an unknown answer type: {kind}"
    if isinstance(value, bool) and kind == "number":
        return "The answer must be a number"
    if not isinstance(value, expected):
        article = "an" if kind in ("array", "object") else "a"
        return f"The answer must be {article} {kind}"
    required = answer.get("required", [])
    if isinstance(value, dict) and isinstance(required, list):
        missing = [name for name in required if name not in value]
        if missing:
            return "The answer is missing " + ", ".join(str(name) for name in missing)
    return None


class Worker:
    """One worker epoch: the envelope, the two pipes and the run revision it expects."""

    def __init__(self, envelope: LaunchEnvelope, out: IO[bytes], answers: IO[bytes]) -> None:
        """Bind the envelope and the pipes; nothing is sent yet."""
        self.envelope = envelope
        self.out = out
        self.answers = answers
        self.revision = 0
        self._numbers = itertools.count(1)

    def send(
        self,
        operation: str,
        payload: object,
        *,
        attempt: str | None = None,
        kind: str | None = None,
    ) -> WorkerResponse:
        """Send one message and wait for its answer (one at a time, HOST §7.4)."""
        envelope = self.envelope
        message: dict[str, object] = {
            "expectedRevision": self.revision,
            "generation": envelope.generation,
            "kind": kind or ("worker.ready" if operation == "worker.ready" else "worker.progress"),
            "launchSchema": WORKER_LAUNCH_SCHEMA,
            "messageId": f"{envelope.worker_epoch}-{next(self._numbers)}",
            "operation": operation,
            "payload": payload,
            "runId": envelope.run_id,
            "schema": WORKER_MESSAGE_SCHEMA,
            "workerEpoch": envelope.worker_epoch,
        }
        if attempt is not None:
            message["attemptId"] = attempt
        self.out.write(canonical.encode(message) + b"\n")
        self.out.flush()
        line = self.answers.readline()
        if not line.endswith(b"\n"):
            raise WorkerError(f"the host closed the worker's stdin before answering {operation}")
        response = parse_worker_response(line[:-1])
        if response.revision is not None:
            self.revision = response.revision
        return response

    def must(self, operation: str, payload: object, **more: str) -> WorkerResponse:
        """Send a message the workflow cannot go on without; it must be accepted or adopted."""
        response = self.send(operation, payload, **more)
        if response.outcome not in ("accepted", "adopted"):
            raise WorkerError(f"{operation} was {response.outcome}: {response.error}")
        return response

    def run(self) -> None:
        """Ready, then the workflow the run names."""
        ready = self.must("worker.ready", {})
        result = ready.result if isinstance(ready.result, dict) else {}
        view = self.must("store.readRun", None).result
        assert isinstance(view, dict)
        ref = view.get("workflowRef")
        if ref == "builtin:echo":
            self._echo(view)
        elif ref == "builtin:ask":
            self._ask(view, result.get("candidateInteraction"))
        else:
            reason = f"pwf worker run knows only {', '.join(WORKFLOWS)}, not {ref}"
            self.must("run.finished", {"error": reason, "status": "failed"})

    def _attempt(self, node: str) -> str:
        return f"attempt-{self.envelope.run_id}-{node}"

    def _echo(self, view: dict[str, object]) -> None:
        attempt = self._attempt(ECHO_NODE)
        self.must("node.started", {"nodeId": ECHO_NODE}, attempt=attempt)
        self.must("node.finished", {"output": view.get("input")}, attempt=attempt)
        self.must("run.finished", {"finalOutput": view.get("input"), "status": "completed"})

    def _ask(self, view: dict[str, object], candidate: object) -> None:
        if isinstance(candidate, dict):
            self._validate(candidate)
            return
        started = self.send("node.started", {"nodeId": ASK_NODE}, attempt=self._attempt(ASK_NODE))
        if started.outcome not in ("accepted", "adopted"):
            raise WorkerError(f"node.started was {started.outcome}: {started.error}")
        given = view.get("input")
        prompt = given.get("prompt") if isinstance(given, dict) else None
        answer = given.get("answer") if isinstance(given, dict) else None
        contract = {
            "answer": answer if isinstance(answer, dict) else DEFAULT_ANSWER,
            "prompt": prompt if isinstance(prompt, str) else "Answer the workflow's question",
        }
        self.must("interaction.request", {"contract": contract}, attempt=self._attempt(ASK_NODE))

    def _validate(self, candidate: dict[str, object]) -> None:
        error = contract_error(candidate.get("contract"), candidate.get("value"))
        submission = candidate.get("submissionId")
        if error is not None:
            self.must("interaction.reject", {"error": error, "submissionId": submission})
            return
        self.must("interaction.accept", {"submissionId": submission})
        attempt = str(candidate.get("attemptId"))
        value = candidate.get("value")
        self.must("node.finished", {"output": value}, attempt=attempt)
        self.must("run.finished", {"finalOutput": value, "status": "completed"})


def run(environ: Mapping[str, str], out: IO[bytes], answers: IO[bytes]) -> None:
    """Read the envelope, then serve the run; every host answer is read before the next message.

    Raises:
        ProtocolError: the envelope or an answer is not valid.
        WorkerError: the host refused a message the workflow needs.
    """
    Worker(envelope_from_env(environ), out, answers).run()
