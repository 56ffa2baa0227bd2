"""The client protocol: DOMAIN §6, §7.1 and SCENARIOS 4, 5, 6 and 7."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pwf import canonical
from pwf.errors import InputError, NonCanonicalLineError, ProtocolError
from pwf.protocol.client import (
    CLIENT_SCHEMA,
    EVENT_NAMES,
    MAX_PROTOCOL_MESSAGE_BYTES,
    OPERATIONS,
    OUTCOMES,
    VIEW_OPERATIONS,
    ClientEvent,
    ClientHello,
    ClientRequest,
    ClientResponse,
    collapse_error,
    encode_event,
    encode_hello,
    encode_line,
    encode_request,
    encode_response,
    is_safe_integer,
    js_length,
    parse_event,
    parse_hello,
    parse_message,
    parse_request,
    parse_response,
    request_fingerprint,
)

MAX = MAX_PROTOCOL_MESSAGE_BYTES
STATUS_DIGEST = "c5b58e1545e811b2c08997cf42f88cf7cc8ae4a6e82c47d97fadb29fa3731493"
CHANGED_DIGEST = "618c2f6cb9ee3dacbd5fb45c6eb074a70125a928107dfb823359517fc1b83925"
TOO_LARGE = "Client protocol message exceeds 1 MiB"
ID_RULE = "must be nonempty text of at most 256 bytes"


def request(**changes: object) -> dict[str, object]:
    """The request of scenario 7, with members replaced (a None value removes one)."""
    base: dict[str, object] = {
        "clientId": "client-1",
        "idempotencyKey": "status-1",
        "operation": "host.status",
        "payload": {},
        "requestId": "request-1",
        "schema": CLIENT_SCHEMA,
        "type": "request",
    }
    merged = base | changes
    return {key: value for key, value in merged.items() if value is not None}


def response(**changes: object) -> dict[str, object]:
    """An accepted response with a receipt, with members replaced."""
    base: dict[str, object] = {
        "outcome": "accepted",
        "receipt": {"live": True},
        "requestId": "request-1",
        "revision": 3,
        "schema": CLIENT_SCHEMA,
        "type": "response",
    }
    return base | changes


def line(members: dict[str, object]) -> bytes:
    """The canonical line (without newline) of some members."""
    return canonical.encode(members)


def padded(members: dict[str, object], slot: str, size: int) -> dict[str, object]:
    """Members whose canonical encoding is exactly ``size`` bytes, padding ``slot``."""
    empty = len(line(members | {slot: {"pad": ""}}))
    return members | {slot: {"pad": "x" * (size - empty)}}


def refusal(data: bytes) -> str:
    """The message parse_request refuses a line with."""
    with pytest.raises(ProtocolError) as caught:
        parse_request(data)
    return str(caught.value)


class TestConstants:
    def test_operation_sets(self):
        """29 recorded operations, 11 answered without host_commands, no overlap: 40 in all."""
        assert (29, 11, set(), 40) == (
            len(OPERATIONS),
            len(VIEW_OPERATIONS),
            set(OPERATIONS & VIEW_OPERATIONS),
            len(OPERATIONS | VIEW_OPERATIONS),
        )

    def test_view_operations_are_spelled_as_the_original(self):
        """HOST.md §2 names the 11 operations answered without host_commands."""
        assert {
            "view.runs.watch",
            "view.runs.page",
            "view.run.get",
            "view.run.watch",
            "view.run.unwatch",
            "view.page",
            "view.content",
            "view.session.watch",
            "state.status",
            "state.verify",
            "channel.status",
        } == VIEW_OPERATIONS

    @pytest.mark.parametrize("operation", ["view.runs", "view.run", "view.session"])
    def test_names_the_original_never_had_are_unknown(self, operation):
        """``view.runs``, ``view.run`` and ``view.session`` are not 0.16 operations."""
        assert f"Unknown client operation: {operation}" == refusal(
            line(request(operation=operation))
        )

    def test_outcomes_and_events(self):
        """Seven outcomes and six event names, as DOMAIN §6 lists them."""
        assert (7, 6) == (len(OUTCOMES), len(EVENT_NAMES))

    def test_protocol_error_is_input_error(self):
        """A refused message is bad input: exit code 2."""
        assert (True, 2) == (issubclass(ProtocolError, InputError), ProtocolError.exit_code)


class TestJavaScriptNumbersAndText:
    """The two JavaScript rules both protocols check values by."""

    @pytest.mark.parametrize(
        ("value", "minimum", "accepted"),
        [
            (0, 0, True),
            (2**53 - 1, 0, True),
            (2**53, 0, False),
            (-1, 0, False),
            (0, 1, False),
            (1, 1, True),
            (True, 0, False),
            (1.0, 0, False),
            ("1", 0, False),
        ],
    )
    def test_a_safe_integer_is_an_int_from_the_minimum_to_2_53_less_1(
        self, value, minimum, accepted
    ):
        """Bools and floats are not integers here, whatever their value."""
        assert accepted is is_safe_integer(value, minimum)

    @pytest.mark.parametrize(
        ("text", "units"), [("", 0), ("ab", 2), ("é€", 2), ("😀", 2), ("a😀b", 4)]
    )
    def test_length_counts_utf16_code_units(self, text, units):
        """A character outside the BMP is a surrogate pair: two units, as JavaScript counts."""
        assert units == js_length(text)


class TestParseRequest:
    def test_parses_fields(self):
        """A canonical request becomes a ClientRequest with snake_case fields."""
        members = request(runId="run-1", expectedRevision=4, payload={"n": 1})
        expected = ClientRequest(
            request_id="request-1",
            client_id="client-1",
            operation="host.status",
            idempotency_key="status-1",
            payload={"n": 1},
            run_id="run-1",
            expected_revision=4,
        )
        assert expected == parse_request(line(members))

    def test_null_payload_is_allowed(self):
        """The payload must be present but may be null."""
        assert None is parse_request(line(request(payload=None) | {"payload": None})).payload

    @pytest.mark.parametrize("operation", sorted(OPERATIONS | VIEW_OPERATIONS))
    def test_every_known_operation_parses(self, operation):
        """Recorded and view operations both parse."""
        assert operation == parse_request(line(request(operation=operation))).operation

    @pytest.mark.parametrize(
        ("revision", "accepted"),
        [(0, True), (2**53 - 1, True), (2**53, False), (True, False), (False, False)],
    )
    def test_expected_revision_is_a_safe_non_negative_integer(self, revision, accepted):
        """Only ints in 0..2**53-1 pass; bools are not integers here."""
        data = line(request(expectedRevision=revision))
        if accepted:
            assert revision == parse_request(data).expected_revision
        else:
            assert "request expectedRevision must be a non-negative integer" == refusal(data)

    @pytest.mark.parametrize(
        ("members", "expected"),
        [
            pytest.param(request(extra=1), "Unknown client protocol field: extra", id="a"),
            pytest.param(request(clientId="a" * 257), f"clientId {ID_RULE}", id="b"),
            pytest.param(request(clientId="é" * 129), f"clientId {ID_RULE}", id="c"),
            pytest.param(request(requestId=""), f"requestId {ID_RULE}", id="d"),
            pytest.param(
                request(expectedRevision=-1),
                "request expectedRevision must be a non-negative integer",
                id="e",
            ),
            pytest.param(
                request(expectedRevision=1.5),
                "request expectedRevision must be a non-negative integer",
                id="f",
            ),
            pytest.param(request(operation="unknown"), "Unknown client operation: unknown", id="g"),
            pytest.param(
                {k: v for k, v in request().items() if k != "payload"},
                "Client request payload is required",
                id="h",
            ),
            pytest.param(
                request(schema="pi-workflows.client.v2"), "Invalid client protocol schema", id="i"
            ),
        ],
    )
    def test_a5_field_validation(self, members, expected):
        """Each bad field of scenario 5 is refused with a message naming it."""
        assert expected == refusal(line(members))

    def test_a5_clientid_of_256_bytes_accepted(self):
        """128 times "é" is 256 UTF-8 bytes: the limit itself is allowed."""
        assert "é" * 128 == parse_request(line(request(clientId="é" * 128))).client_id

    @pytest.mark.parametrize(
        ("members", "expected"),
        [
            (request(idempotencyKey=7), f"idempotencyKey {ID_RULE}"),
            (request(runId=""), f"runId {ID_RULE}"),
            (request(runId=None) | {"runId": None}, f"runId {ID_RULE}"),
            (request(operation=5), "operation must be nonempty text"),
            (request(type="response"), "Expected client request"),
            (request(type="other"), "Invalid client protocol message type"),
            (request(schema=None), "Invalid client protocol schema"),
            (request(**{"a\nb": 1}), "Unknown client protocol field: a b"),
            (request(operation="x" * 300), f"Unknown client operation: {'x' * 97}..."),
        ],
    )
    def test_other_bad_fields(self, members, expected):
        """Other refusals keep to one short line that names the field."""
        assert expected == refusal(line(members))

    def test_first_unknown_member_in_canonical_order_is_named(self):
        """Several unknown members: the first in canonical order is reported."""
        assert "Unknown client protocol field: b" == refusal(line(request(z=1, b=2)))

    @pytest.mark.parametrize("data", [b"[1]", b'"request"', b"null"])
    def test_non_objects_refused(self, data):
        """A message must be a JSON object."""
        assert "Client protocol message must be an object" == refusal(data)

    @pytest.mark.parametrize("data", [b"{", b"\xff", b"\xef\xbb\xbf{}"])
    def test_not_json_refused(self, data):
        """Bytes that are not JSON text are refused as not canonical."""
        assert refusal(data).startswith("Client protocol message must use canonical JSON")


class TestNonCanonical:
    @staticmethod
    def _variants() -> dict[str, str]:
        text = line(request(payload={"n": 1})).decode()
        insertion = json.dumps(
            {"schema": CLIENT_SCHEMA, **request(payload={"n": 1})},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return {
            "space after colon": text.replace('"clientId":', '"clientId": '),
            "insertion order": insertion,
            "float one": text.replace('{"n":1}', '{"n":1.0}'),
            "duplicate key": text.replace('{"n":1}', '{"a":1,"a":2}'),
        }

    @pytest.mark.parametrize(
        "name", ["space after colon", "insertion order", "float one", "duplicate key"]
    )
    def test_a4_non_canonical_request_lines_rejected(self, name):
        """Each variant of scenario 4 is refused as not canonical."""
        with pytest.raises(ProtocolError) as caught:
            parse_request(self._variants()[name].encode())
        assert NonCanonicalLineError is type(caught.value.__cause__)

    def test_a4_receipt_exponent_rejected_and_digits_accepted(self):
        """A receipt with 1e+20 is refused; the same number written out is accepted."""
        good = b'{"outcome":"accepted","receipt":{"large":100000000000000000000},'
        good += b'"requestId":"r","schema":"pi-workflows.client.v1","type":"response"}'
        with pytest.raises(ProtocolError) as caught:
            parse_response(good.replace(b"100000000000000000000", b"1e+20"))
        assert NonCanonicalLineError is type(caught.value.__cause__)
        assert {"large": 10**20} == parse_response(good).receipt


class TestRefusalWords:
    def test_refusals_are_worded_as_the_client_protocol(self):
        """Too deep, not canonical, not an object, no canonical form: each names the client."""
        deep = b'{"payload":' + b"[" * 128 + b"]" * 128 + b"}"
        assert "Client protocol message nests deeper than 128 levels" == refusal(deep)
        assert refusal(b"{ }").startswith("Client protocol message must use canonical JSON: ")
        assert "Client protocol message must be an object" == refusal(b"[]")
        bad = ClientRequest(
            request_id="r",
            client_id="c",
            operation="host.status",
            idempotency_key="k",
            payload={"n": float("nan")},
        )
        with pytest.raises(ProtocolError) as caught:
            encode_request(bad)
        assert str(caught.value).startswith("Client protocol message has no canonical JSON form: ")


class TestFingerprint:
    def test_a7_fingerprint_ignores_request_id_only(self):
        """Scenario 7: requestId does not count, the payload does."""
        actual = [
            parse_request(line(request(requestId="request-1"))).fingerprint,
            parse_request(line(request(requestId="request-2"))).fingerprint,
            parse_request(line(request(payload={"changed": True}))).fingerprint,
        ]
        assert [STATUS_DIGEST, STATUS_DIGEST, CHANGED_DIGEST] == actual

    def test_fingerprint_of_members(self):
        """request_fingerprint drops requestId and hashes the rest canonically."""
        assert STATUS_DIGEST == request_fingerprint(request(requestId="other"))

    def test_built_and_parsed_requests_agree(self):
        """A request built in Python fingerprints like the same request parsed."""
        built = ClientRequest(
            request_id="x",
            client_id="client-1",
            operation="host.status",
            idempotency_key="status-1",
            payload={},
        )
        assert STATUS_DIGEST == built.fingerprint

    def test_optional_members_count_when_present(self):
        """runId and expectedRevision are part of the fingerprint when present."""
        digests = {
            parse_request(line(members)).fingerprint
            for members in (request(), request(runId="r"), request(expectedRevision=0))
        }
        assert 3 == len(digests)


class TestEncodeRequest:
    def test_round_trip(self):
        """Encoding a parsed request gives back its line."""
        data = line(request(runId="run-1", expectedRevision=2, payload={"b": [1.5, None]}))
        assert data == encode_request(parse_request(data))

    def test_invalid_request_refused(self):
        """Encoding checks the same rules as parsing."""
        bad = ClientRequest(
            request_id="", client_id="c", operation="host.status", idempotency_key="k", payload={}
        )
        with pytest.raises(ProtocolError, match="requestId must be nonempty"):
            encode_request(bad)

    def test_payload_without_json_form_refused(self):
        """A payload canonical JSON cannot write is a protocol error."""
        bad = ClientRequest(
            request_id="r",
            client_id="c",
            operation="host.status",
            idempotency_key="k",
            payload={"n": float("nan")},
        )
        with pytest.raises(ProtocolError, match="no canonical JSON form"):
            encode_request(bad)


class TestSizeLimit:
    def test_a6_message_of_exactly_1_mib_encodes_but_its_line_fails(self):
        """A 1 048 576-byte request is a valid message but too long as a line."""
        members = padded(request(), "payload", MAX)
        message = encode_request(parse_request(line(members)))
        with pytest.raises(ProtocolError) as caught:
            encode_line(message)
        assert (MAX, TOO_LARGE) == (len(message), str(caught.value))

    def test_a6_one_byte_under_frames_as_a_line(self):
        """A 1 048 575-byte message makes a line of exactly 1 MiB."""
        message = line(padded(request(), "payload", MAX - 1))
        assert MAX == len(encode_line(message))

    def test_a6_response_of_exactly_1_mib_encodes(self):
        """The response limit is the same: exactly 1 MiB encodes as a message."""
        members = padded(response(), "receipt", MAX)
        assert MAX == len(encode_response(parse_response(line(members))))

    def test_a6_over_1_mib_refused_when_encoding(self):
        """One byte over the limit cannot be encoded."""
        members = padded(response(), "receipt", MAX + 1)
        resp = ClientResponse(
            request_id="request-1", outcome="accepted", revision=3, receipt=members["receipt"]
        )
        assert MAX + 1 == len(line(members))
        with pytest.raises(ProtocolError, match="exceeds 1 MiB"):
            encode_response(resp)

    def test_a6_over_1_mib_refused_when_parsing(self):
        """Parsing refuses a message longer than 1 MiB before reading it."""
        assert TOO_LARGE == refusal(line(padded(request(), "payload", MAX + 1)))

    def test_line_may_not_hold_a_newline(self):
        """A framed message must not contain a newline of its own."""
        with pytest.raises(ProtocolError, match="newline"):
            encode_line(b"{}\n{}")


class TestResponses:
    def test_encoding_is_canonical(self):
        """Members come out camelCase, sorted, absent ones omitted."""
        resp = ClientResponse(request_id="r-1", outcome="adopted", receipt={"b": 1, "a": 2})
        expected = (
            b'{"outcome":"adopted","receipt":{"a":2,"b":1},"requestId":"r-1",'
            b'"schema":"pi-workflows.client.v1","type":"response"}'
        )
        assert expected == encode_response(resp)

    def test_null_receipt_is_kept_and_absent_receipt_omitted(self):
        """A receipt of None is JSON null; the default MISSING is no member."""
        with_null = encode_response(
            ClientResponse(request_id="r", outcome="accepted", receipt=None)
        )
        without = encode_response(ClientResponse(request_id="r", outcome="accepted"))
        assert (True, False) == (b'"receipt":null' in with_null, b"receipt" in without)

    def test_round_trip_with_every_member(self):
        """Parsing an encoded response gives the same response."""
        resp = ClientResponse(
            request_id="r", outcome="rejected", revision=9, receipt=[1], error="Run is gone"
        )
        assert resp == parse_response(encode_response(resp))

    def test_absent_receipt_parses_as_missing(self):
        """A response without receipt reads back with receipt MISSING."""
        members = {k: v for k, v in response().items() if k != "receipt"}
        assert canonical.MISSING is parse_response(line(members)).receipt

    @pytest.mark.parametrize(
        ("changes", "expected"),
        [
            ({"outcome": "done"}, "Invalid client response outcome"),
            ({"error": ""}, "response error must be nonempty text"),
            ({"revision": -1}, "response revision must be a non-negative integer"),
            ({"revision": True}, "response revision must be a non-negative integer"),
            ({"requestId": "x" * 257}, f"requestId {ID_RULE}"),
            ({"extra": 1}, "Unknown client protocol field: extra"),
        ],
    )
    def test_bad_responses_refused(self, changes, expected):
        """parse_response is as strict as parse_request."""
        with pytest.raises(ProtocolError) as caught:
            parse_response(line(response(**changes)))
        assert expected == str(caught.value)

    def test_encoding_checks_fields(self):
        """An invalid outcome cannot be encoded either."""
        with pytest.raises(ProtocolError, match="outcome"):
            encode_response(ClientResponse(request_id="r", outcome="ok"))

    @pytest.mark.parametrize(
        ("changes", "expected"),
        [
            ({"outcome": "done"}, "Invalid client response outcome"),
            ({"outcome": 3}, "Invalid client response outcome"),
            ({"error": ""}, "response error must be nonempty text"),
            ({"error": 5}, "response error must be nonempty text"),
            ({"revision": -1}, "response revision must be a non-negative integer"),
            ({"revision": True}, "response revision must be a non-negative integer"),
            ({"revision": 2**53}, "response revision must be a non-negative integer"),
            ({"requestId": ""}, f"requestId {ID_RULE}"),
            ({"requestId": "x" * 257}, f"requestId {ID_RULE}"),
            ({"requestId": "\u20ac" * 86}, f"requestId {ID_RULE}"),
            ({"requestId": "\U0001f600" * 65}, f"requestId {ID_RULE}"),
        ],
    )
    def test_encoding_refuses_as_parsing_does(self, changes, expected):
        """A response with a bad field is refused by encode_response with parse_response's text."""
        members = response(**changes)
        with pytest.raises(ProtocolError) as parsed:
            parse_response(line(members))
        fields: dict[str, Any] = {
            "request_id": members["requestId"],
            "outcome": members["outcome"],
            "revision": members["revision"],
            "receipt": members["receipt"],
            "error": members.get("error"),
        }
        resp = ClientResponse(**fields)  # a Struct takes its fields unchecked
        with pytest.raises(ProtocolError) as encoded:
            encode_response(resp)
        assert (expected, expected) == (str(parsed.value), str(encoded.value))

    @pytest.mark.parametrize(
        "request_id", ["x" * 256, "\u00e9" * 128, "\U0001f600" * 64, "\u20ac" * 85, "r"]
    )
    def test_ids_at_the_byte_limit_encode_and_parse(self, request_id):
        """Ids of at most 256 UTF-8 bytes pass both ways, however many characters they hold."""
        resp = ClientResponse(request_id=request_id, outcome="accepted", revision=3)
        members = {k: v for k, v in response(requestId=request_id).items() if k != "receipt"}
        encoded = encode_response(resp)
        assert (line(members), resp) == (encoded, parse_response(encoded))


class TestHelloAndEvents:
    def test_hello_round_trip(self):
        """A hello encodes canonically and parses back."""
        hello = ClientHello(connection_id="conn-1", package_version="0.16.1")
        data = encode_hello(hello)
        expected = (
            b'{"connectionId":"conn-1","packageVersion":"0.16.1",'
            b'"schema":"pi-workflows.client.v1","type":"hello"}'
        )
        assert (expected, hello) == (data, parse_hello(data))

    def test_hello_needs_a_package_version(self):
        """packageVersion must be non-empty text."""
        with pytest.raises(ProtocolError, match="packageVersion must be nonempty text"):
            encode_hello(ClientHello(connection_id="c", package_version=""))

    def test_event_round_trip(self):
        """An event encodes canonically and parses back."""
        event = ClientEvent(
            subscription_id="sub-1", event="run_snapshot", payload={"a": 1}, revision=2, run_id="r"
        )
        assert event == parse_event(encode_event(event))

    def test_event_name_checked(self):
        """Only the six event names are allowed."""
        with pytest.raises(ProtocolError, match="Invalid client event name"):
            encode_event(ClientEvent(subscription_id="s", event="run_deleted", payload=None))

    def test_parse_message_dispatches_on_type(self):
        """parse_message returns the Struct that matches the type member."""
        hello = ClientHello(connection_id="c", package_version="1")
        event = ClientEvent(subscription_id="s", event="runs", payload=[])
        resp = ClientResponse(request_id="r", outcome="accepted")
        req = parse_request(line(request()))
        messages = [
            encode_hello(hello),
            encode_event(event),
            encode_response(resp),
            encode_request(req),
        ]
        assert [hello, event, resp, req] == [parse_message(data) for data in messages]

    @pytest.mark.parametrize(
        ("members", "expected"),
        [
            (request(type="subscribe"), "Invalid client protocol message type"),
            (request(type=None), "Invalid client protocol message type"),
            (request(schema="x"), "Invalid client protocol schema"),
        ],
    )
    def test_parse_message_refuses_unknown_types(self, members, expected):
        """A message of no known type or schema is refused."""
        with pytest.raises(ProtocolError) as caught:
            parse_message(line(members))
        assert expected == str(caught.value)


class TestCollapseError:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("Run is not pausable", "Run is not pausable"),
            ("line one\r\n\tline two", "line one line two"),
            ("a\nb\nc", "a b c"),
            ("  padded \n", "padded"),
            ("", "Workflow request failed"),
            ("\r\n\t ", "Workflow request failed"),
            ("\ufeffbom\u00a0", "bom"),
            ("\x1ckept\x85", "\x1ckept\x85"),
        ],
    )
    def test_collapses_to_one_line(self, text, expected):
        """Line breaks and tabs become single spaces; the ends are trimmed as JavaScript does."""
        assert expected == collapse_error(text)

    def test_1000_characters_kept(self):
        """Exactly 1000 characters pass unchanged."""
        assert "x" * 1000 == collapse_error("x" * 1000)

    def test_longer_texts_truncated(self):
        """Over 1000 characters keeps the first 997 and adds an ellipsis."""
        assert "x" * 997 + "..." == collapse_error("x" * 1001)

    def test_length_counts_utf16_units(self):
        """An astral character counts twice, and truncation may split its pair."""
        assert ("😀" * 500, "😀" * 498 + "\ud83d...") == (
            collapse_error("😀" * 500),
            collapse_error("😀" * 501),
        )
