"""The cause a batch records is taken from the client request or worker message it answers."""

from __future__ import annotations

from pwf.events import Cause
from pwf.host._context import cause_of
from pwf.protocol.client import ClientRequest
from pwf.protocol.worker import WorkerMessage

FINGERPRINT = "ab" * 32


def test_a_client_requests_cause_names_the_request() -> None:
    """Operation, request id, client id, idempotency key and fingerprint; nothing of a worker."""
    request = ClientRequest(
        request_id="r-1", client_id="c-1", operation="run.start", idempotency_key="k-1", payload={}
    )
    assert Cause(
        operation="run.start",
        request_id="r-1",
        client_id="c-1",
        idempotency_key="k-1",
        fingerprint=request.fingerprint,
    ) == cause_of(request)


def test_a_worker_messages_cause_names_the_message() -> None:
    """Operation, worker epoch, message id and fingerprint; nothing of a client request."""
    message = WorkerMessage(
        message_id="m-1",
        kind="request",
        operation="node.started",
        run_id="run-1",
        generation=1,
        worker_epoch="w-1",
        expected_revision=3,
        attempt_id="a-1",
        payload={"nodeId": "ask"},
        fingerprint=FINGERPRINT,
    )
    assert Cause(
        operation="node.started", worker_epoch="w-1", message_id="m-1", fingerprint=FINGERPRINT
    ) == cause_of(message)
