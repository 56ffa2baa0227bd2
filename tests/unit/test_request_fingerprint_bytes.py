"""A parsed request's fingerprint is hashed from its line's bytes (ADR 0052).

DOMAIN §7.1 defines the fingerprint as the SHA-256 of the canonical request
without ``requestId``.  Parsing takes it from the line itself, dropping the
``requestId`` member's bytes; these properties check it against the
definition (encode the members without ``requestId``, hash) for ids and
payloads drawn with quotes, backslashes, lone surrogates and nested
``requestId`` members, and for the optional members present or absent.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwf import canonical
from pwf.protocol.client import (
    CLIENT_SCHEMA,
    ClientRequest,
    _json_text,
    encode_request,
    parse_request,
)

if TYPE_CHECKING:
    from tests._depth import examples
else:
    from _depth import examples

SETTINGS = settings(
    max_examples=examples(quick=200, deep=1000),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_CHARS = st.one_of(
    st.characters(codec="utf-8", exclude_characters="\x00"),
    st.sampled_from(['"', "\\", ",", ":", "{", "}", "\n", "\u2028", "é", "\U0001f600"]),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.just(',"requestId":"'),
)
_IDS = (
    st.lists(_CHARS, min_size=1, max_size=8)
    .map("".join)
    .filter(lambda text: len(text.encode("utf-8", "surrogatepass")) <= 256)
)
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), _IDS)
_PAYLOADS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(_IDS, st.just("requestId")), inner, max_size=3),
    ),
    max_leaves=8,
)


def _definition(members: dict[str, Any]) -> str:
    """DOMAIN §7.1 read literally: canonical bytes of the members but requestId, hashed."""
    rest = {key: value for key, value in members.items() if key != "requestId"}
    return hashlib.sha256(canonical.encode(rest)).hexdigest()


@SETTINGS
@given(
    request_id=_IDS,
    client_id=_IDS,
    key=_IDS,
    payload=_PAYLOADS,
    run_id=st.none() | _IDS,
    revision=st.none() | st.integers(0, 2**53 - 1),
)
def test_the_fingerprint_of_the_line_is_the_fingerprint_of_the_members(  # noqa: PLR0913 - drawn members
    *,
    request_id: str,
    client_id: str,
    key: str,
    payload: object,
    run_id: str | None,
    revision: int | None,
) -> None:
    """Parsed from bytes, built in Python, or read from the definition: one fingerprint."""
    built = ClientRequest(
        request_id=request_id,
        client_id=client_id,
        operation="run.status",
        idempotency_key=key,
        payload=payload,
        run_id=run_id,
        expected_revision=revision,
    )
    line = encode_request(built)
    members = canonical.decode(line)
    assert isinstance(members, dict)
    parsed = parse_request(line)
    assert "fingerprint" in parsed.__dict__, "the line's own bytes gave the fingerprint"
    assert parsed.fingerprint == _definition(members)
    assert parsed.fingerprint == built.fingerprint


def test_a_payload_holding_the_same_request_id_member_keeps_it_in_the_hash() -> None:
    """The payload's own ``requestId`` member, with the very same id, stays in the hash."""
    members = {
        "clientId": "c",
        "idempotencyKey": "k",
        "operation": "run.status",
        "payload": {"a": 1, "requestId": "r-1", "z": 2},
        "requestId": "r-1",
        "schema": "pi-workflows.client.v1",
        "type": "request",
    }
    parsed = parse_request(canonical.encode(members))
    assert parsed.fingerprint == _definition(members)
    assert parsed.fingerprint != _definition({**members, "payload": {}})


def test_the_request_id_member_is_found_by_its_canonical_bytes_for_every_ascii_character() -> None:
    """The quick quoting of a plain id gives canonical's bytes, and the fingerprint follows."""
    for code in range(128):
        request_id = f"r{chr(code)}1"
        members = {
            "clientId": "c",
            "idempotencyKey": "k",
            "operation": "host.status",
            "payload": {},
            "requestId": request_id,
            "schema": CLIENT_SCHEMA,
            "type": "request",
        }
        parsed = parse_request(canonical.encode(members))
        from_line = "fingerprint" in vars(parsed)  # set by parsing, not by the property
        assert (canonical.encode(request_id), True, _definition(members)) == (
            _json_text(request_id),
            from_line,
            parsed.fingerprint,
        )
