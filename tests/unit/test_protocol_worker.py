"""The worker protocol: DOMAIN §14 and SCENARIOS 62."""

from __future__ import annotations

import base64
import hashlib

import pytest

from pwf import canonical
from pwf.errors import NonCanonicalLineError, ProtocolError
from pwf.protocol.client import MAX_PROTOCOL_MESSAGE_BYTES
from pwf.protocol.worker import (
    KINDS,
    WORKER_LAUNCH_SCHEMA,
    WORKER_MESSAGE_SCHEMA,
    LaunchEnvelope,
    WorkerMessage,
    WorkerResponse,
    encode_launch,
    encode_worker_response,
    launch_variable,
    parse_launch_variable,
    parse_worker_message,
    parse_worker_response,
)

MAX = MAX_PROTOCOL_MESSAGE_BYTES
ASTRAL = "\U0001f600"
TEXT_RULE = "must be nonempty bounded text"


def message(**changes: object) -> dict[str, object]:
    """Message m-1 of scenario 62, with members replaced (a None value removes one)."""
    base: dict[str, object] = {
        "schema": WORKER_MESSAGE_SCHEMA,
        "launchSchema": WORKER_LAUNCH_SCHEMA,
        "messageId": "m-1",
        "kind": "worker.progress",
        "operation": "store.readRun",
        "runId": "run-1",
        "generation": 1,
        "workerEpoch": "w-2",
        "expectedRevision": 5,
        "payload": {"runId": "run-1"},
    }
    merged = base | changes
    return {key: value for key, value in merged.items() if value is not None}


def line(members: dict[str, object]) -> bytes:
    """The canonical line (without newline) of some members."""
    return canonical.encode(members)


def refusal(members: dict[str, object]) -> str:
    """The message parse_worker_message refuses some members with."""
    with pytest.raises(ProtocolError) as caught:
        parse_worker_message(line(members))
    return str(caught.value)


def fingerprint(members: dict[str, object]) -> str:
    """The fingerprint of a parsed message."""
    return parse_worker_message(line(members)).fingerprint


class TestParseWorkerMessage:
    def test_parses_fields(self):
        """A canonical message becomes a WorkerMessage; its fingerprint hashes the line."""
        data = line(message(attemptId="attempt-1"))
        expected = WorkerMessage(
            message_id="m-1",
            kind="worker.progress",
            operation="store.readRun",
            run_id="run-1",
            generation=1,
            worker_epoch="w-2",
            expected_revision=5,
            attempt_id="attempt-1",
            payload={"runId": "run-1"},
            fingerprint=hashlib.sha256(data).hexdigest(),
        )
        assert expected == parse_worker_message(data)

    def test_fingerprint_is_canonical_whole_message(self):
        """The fingerprint equals the canonical digest of every member, messageId included."""
        members = message(note="extra")
        assert canonical.hex_digest(members) == fingerprint(members)

    def test_extras_accepted_and_fingerprinted(self):
        """Extra members parse and change the fingerprint."""
        digests = {
            fingerprint(members)
            for members in (
                message(),
                message(note="a"),
                message(note="b"),
                message(messageId="m-2"),
            )
        }
        assert 4 == len(digests)

    def test_j62_same_message_same_fingerprint_other_payload_differs(self):
        """Scenario 62: a re-sent m-1 matches, m-1 with another payload does not."""
        assert (True, False) == (
            fingerprint(message()) == fingerprint(message()),
            fingerprint(message()) == fingerprint(message(payload={"runId": "run-2"})),
        )

    @pytest.mark.parametrize("kind", sorted(KINDS))
    def test_every_kind_parses(self, kind):
        """All 16 kinds are accepted."""
        assert kind == parse_worker_message(line(message(kind=kind))).kind

    def test_null_payload_allowed(self):
        """The payload must be present but may be null."""
        assert None is parse_worker_message(line(message(payload=None) | {"payload": None})).payload

    @pytest.mark.parametrize(
        ("text", "accepted"),
        [
            ("a" * 256, True),
            ("a" * 257, False),
            (ASTRAL * 128, True),
            (ASTRAL * 129, False),
            ("é" * 256, True),
        ],
    )
    def test_text_limit_counts_utf16_units(self, text, accepted):
        """Ids are limited to 256 UTF-16 code units, not bytes: an astral character counts 2."""
        members = message(messageId=text)
        if accepted:
            assert text == parse_worker_message(line(members)).message_id
        else:
            assert f"Worker messageId {TEXT_RULE}" == refusal(members)

    @pytest.mark.parametrize(
        ("members", "expected"),
        [
            (message(kind="node.cancelled"), "Invalid worker message kind"),
            (
                message(launchSchema="pi-workflows.worker-launch.v2"),
                "Invalid worker message schema",
            ),
            (message(launchSchema=None), "Invalid worker message schema"),
            (message(schema="pi-workflows.worker-response.v1"), "Invalid worker message schema"),
            (message(generation=0), "Worker generation must be positive"),
            (message(generation=True), "Worker generation must be positive"),
            (message(generation=2**53), "Worker generation must be positive"),
            (message(expectedRevision=-1), "Worker expectedRevision must be non-negative"),
            (message(expectedRevision=0.5), "Worker expectedRevision must be non-negative"),
            (message(payload=None), "Worker payload is required"),
            (message(runId=""), f"Worker runId {TEXT_RULE}"),
            (message(workerEpoch=7), f"Worker workerEpoch {TEXT_RULE}"),
            (message(operation=""), f"Worker operation {TEXT_RULE}"),
            (message(attemptId=""), f"Worker attemptId {TEXT_RULE}"),
            (message() | {"attemptId": None}, f"Worker attemptId {TEXT_RULE}"),
        ],
    )
    def test_bad_messages_refused(self, members, expected):
        """Each bad field is refused with one line naming it."""
        assert expected == refusal(members)

    def test_unknown_operation_text_parses(self):
        """Operations are only checked to be bounded text when parsing."""
        assert (
            "store.unheardOf"
            == parse_worker_message(line(message(operation="store.unheardOf"))).operation
        )

    def test_non_canonical_refused(self):
        """A message with whitespace is refused as not canonical."""
        data = line(message()).replace(b'"kind":', b'"kind": ')
        with pytest.raises(ProtocolError) as caught:
            parse_worker_message(data)
        assert NonCanonicalLineError is type(caught.value.__cause__)

    def test_non_object_refused(self):
        """A message must be an object."""
        with pytest.raises(ProtocolError, match="must be a canonical JSON object"):
            parse_worker_message(b"[]")

    def test_refusals_are_worded_as_the_worker_protocol(self):
        """Too deep, not canonical, not an object, no canonical form: each names the worker."""
        deep = b'{"payload":' + b"[" * 128 + b"]" * 128 + b"}"
        with pytest.raises(ProtocolError) as caught:
            parse_worker_message(deep)
        assert "Worker protocol message nests deeper than 128 levels" == str(caught.value)
        with pytest.raises(ProtocolError) as caught:
            parse_worker_message(b"{ }")
        assert str(caught.value).startswith(
            "Worker protocol message must be a canonical JSON object: "
        )
        with pytest.raises(ProtocolError) as caught:
            parse_worker_message(b"[]")
        assert "Worker protocol message must be a canonical JSON object" == str(caught.value)
        with pytest.raises(ProtocolError) as caught:
            encode_worker_response(
                WorkerResponse(message_id="m", outcome="accepted", result=float("nan"))
            )
        assert str(caught.value).startswith("Worker protocol message has no canonical JSON form: ")

    def test_line_limit_counts_the_newline(self):
        """A message of 1 MiB - 1 bytes parses; one of exactly 1 MiB does not."""
        empty = len(line(message(payload={"pad": ""})))
        fits = line(message(payload={"pad": "x" * (MAX - 1 - empty)}))
        over = line(message(payload={"pad": "x" * (MAX - empty)}))
        assert MAX - 1 == len(fits)
        assert "m-1" == parse_worker_message(fits).message_id
        with pytest.raises(ProtocolError, match="Worker protocol message exceeds 1 MiB"):
            parse_worker_message(over)


class TestWorkerResponse:
    def test_encoding_is_canonical(self):
        """Members are sorted, nested keys too, absent ones omitted."""
        resp = WorkerResponse(
            message_id="m-1", outcome="accepted", revision=5, result={"b": 1, "a": 2}
        )
        expected = (
            b'{"messageId":"m-1","outcome":"accepted","result":{"a":2,"b":1},'
            b'"revision":5,"schema":"pi-workflows.worker-response.v1"}'
        )
        assert expected == encode_worker_response(resp)

    def test_null_result_kept(self):
        """A result of None is JSON null; no result means no member."""
        with_null = encode_worker_response(
            WorkerResponse(message_id="m", outcome="adopted", result=None)
        )
        without = encode_worker_response(WorkerResponse(message_id="m", outcome="adopted"))
        assert (True, False) == (b'"result":null' in with_null, b"result" in without)

    def test_round_trip(self):
        """Parsing an encoded response gives the same response."""
        resp = WorkerResponse(
            message_id="m-2",
            outcome="rejected",
            revision=5,
            error="Workflow run revision conflict: expected 4, got 5",
        )
        assert resp == parse_worker_response(encode_worker_response(resp))

    @pytest.mark.parametrize(
        ("resp", "expected"),
        [
            (WorkerResponse(message_id="m", outcome="conflict"), "Invalid worker response outcome"),
            (WorkerResponse(message_id="", outcome="accepted"), f"Worker messageId {TEXT_RULE}"),
            (
                WorkerResponse(message_id="m", outcome="accepted", revision=-1),
                "Worker response revision must be non-negative",
            ),
            (
                WorkerResponse(schema="x", message_id="m", outcome="accepted"),
                "Invalid worker response schema",
            ),
        ],
    )
    def test_invalid_responses_not_encoded(self, resp, expected):
        """Encoding checks the same rules as parsing."""
        with pytest.raises(ProtocolError) as caught:
            encode_worker_response(resp)
        assert expected == str(caught.value)

    def test_result_without_json_form_refused(self):
        """A result canonical JSON cannot write is a protocol error."""
        resp = WorkerResponse(message_id="m", outcome="accepted", result=float("inf"))
        with pytest.raises(ProtocolError, match="no canonical JSON form"):
            encode_worker_response(resp)

    def test_line_limit_counts_the_newline(self):
        """A response whose line would pass 1 MiB is refused; one byte less encodes."""
        empty = len(
            encode_worker_response(WorkerResponse(message_id="m", outcome="accepted", result=""))
        )
        fits = WorkerResponse(message_id="m", outcome="accepted", result="x" * (MAX - 1 - empty))
        over = WorkerResponse(message_id="m", outcome="accepted", result="x" * (MAX - empty))
        assert MAX - 1 == len(encode_worker_response(fits))
        with pytest.raises(ProtocolError, match="Worker protocol message exceeds 1 MiB"):
            encode_worker_response(over)

    def test_parse_ignores_extras_and_checks_error(self):
        """Extra members are allowed; a non-text error is not."""
        base = {
            "schema": "pi-workflows.worker-response.v1",
            "messageId": "m",
            "outcome": "claimLost",
        }
        assert "claimLost" == parse_worker_response(line(base | {"note": 1})).outcome
        with pytest.raises(ProtocolError, match="Worker response error must be text"):
            parse_worker_response(line(base | {"error": None}))


SOURCE = {"id": "echo", "kind": "builtin", "revision": "test"}
SOURCE_RULE = "Worker launch workflowSource must be a {root, mounted} object"


class TestLaunch:
    @staticmethod
    def _envelope(**changes: object) -> LaunchEnvelope:
        fields: dict[str, object] = {
            "run_id": "run-1",
            "generation": 1,
            "worker_epoch": "epoch-1",
            "project_path": "/p",
            "workflow_source": {"mounted": [], "root": SOURCE},
            "definition_digest": "d" * 64,
            "input_hash": "i" * 64,
        }
        return LaunchEnvelope(**(fields | changes))  # type: ignore[arg-type]

    def test_encoding_is_canonical(self):
        """The envelope comes out camelCase and sorted, with protocolVersion 1."""
        expected = (
            '{"definitionDigest":"' + "d" * 64 + '","generation":1,"inputHash":"' + "i" * 64 + '",'
            '"projectPath":"/p","protocolVersion":1,"runId":"run-1",'
            '"schema":"pi-workflows.worker-launch.v1","workerEpoch":"epoch-1",'
            '"workflowSource":{"mounted":[],"root":{"id":"echo","kind":"builtin","revision":"test"}}}'
        ).encode()
        assert expected == encode_launch(self._envelope())

    @pytest.mark.parametrize(
        ("changes", "expected"),
        [
            ({"generation": 0}, "Worker generation must be positive"),
            ({"run_id": ""}, f"Worker runId {TEXT_RULE}"),
            ({"protocol_version": 2}, "Worker launch protocolVersion must be 1"),
            ({"protocol_version": True}, "Worker launch protocolVersion must be 1"),
            ({"input_hash": None}, "Worker launch inputHash must be text"),
            ({"schema": "x"}, "Invalid worker launch schema"),
            # HOST.md §7.2: the source travels as the {root, mounted} object, never as text.
            ({"workflow_source": "builtin"}, SOURCE_RULE),
            ({"workflow_source": SOURCE}, SOURCE_RULE),
        ],
    )
    def test_invalid_envelopes_refused(self, changes, expected):
        """Launch fields are checked before encoding."""
        with pytest.raises(ProtocolError) as caught:
            encode_launch(self._envelope(**changes))
        assert expected == str(caught.value)

    def test_the_launch_variable_is_unpadded_base64url_and_reads_back(self):
        """The host writes the variable and the worker reads it with one rule (HOST §7.2)."""
        envelope = self._envelope(project_path="/p/ü?")
        data = encode_launch(envelope)
        value = launch_variable(data)
        assert "=" not in value
        assert value == base64.urlsafe_b64encode(data).decode().rstrip("=")
        assert parse_launch_variable(value) == envelope

    @pytest.mark.parametrize(
        ("value", "error"),
        [
            (None, "PI_WORKFLOWS_WORKER_LAUNCH is not set"),
            ("", "PI_WORKFLOWS_WORKER_LAUNCH is not set"),
            ("a", "PI_WORKFLOWS_WORKER_LAUNCH is not base64url"),
        ],
    )
    def test_a_bad_launch_variable_is_refused(self, value: str | None, error: str):
        with pytest.raises(ProtocolError, match=error):
            parse_launch_variable(value)
