"""The conformance corpus: pwf against what Node wrote (see make_conformance_corpus.js).

Lone surrogates (DOMAIN §3.1, §4) and blob media types (DOMAIN §3.3), each
case produced by the original's own functions running in Node, never by pwf.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pwf import canonical
from pwf.commands import Context
from pwf.commands.ids import session_request_id
from pwf.commands.views import json_bytes
from pwf.errors import CommandError, ProtocolError
from pwf.projections import blobs
from pwf.protocol.client import parse_request, request_fingerprint
from pwf.readmodel import RowReader

CORPUS = Path(__file__).parents[1] / "golden" / "conformance_corpus.jsonl"


def _load(kind: str) -> list[dict[str, Any]]:
    with CORPUS.open(encoding="ascii") as lines:
        cases = [json.loads(line) for line in lines]
    return [case for case in cases if case["kind"] == kind]


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["name"] for case in cases]


TEXTS = _load("text")
VALUES = _load("canonical")
SESSION_IDS = _load("sessionRequestId")
FINGERPRINTS = _load("fingerprint")
BLOBS = _load("blobs")
OPAQUE_IDS = _load("opaqueId")


def test_corpus_has_every_kind() -> None:
    """Lone-surrogate texts and values, ids, fingerprints and blob sequences are all there."""
    kinds = (TEXTS, VALUES, SESSION_IDS, FINGERPRINTS, BLOBS, OPAQUE_IDS)
    assert all(len(cases) >= 1 for cases in kinds)
    assert any("\ud800" in case["text"] for case in TEXTS)


@pytest.mark.parametrize("case", TEXTS, ids=_ids(TEXTS))
def test_text_bytes_and_digest(case: dict[str, Any]) -> None:
    """UTF-8 as Node writes it (U+FFFD for a lone surrogate), its SHA-256 and its JSON form."""
    text = case["text"]
    assert bytes.fromhex(case["utf8"]) == canonical.utf8(text)
    assert case["sha256"] == canonical.text_hex_digest(text)
    assert case["byteLength"] == len(canonical.utf8(text))
    assert bytes.fromhex(case["canonical"]) == canonical.encode(text)


@pytest.mark.parametrize("case", VALUES, ids=_ids(VALUES))
def test_values_with_lone_surrogates(case: dict[str, Any]) -> None:
    """Canonical bytes and digest of values whose strings hold lone surrogates."""
    assert bytes.fromhex(case["canonical"]) == canonical.encode(case["value"])
    assert case["sha256"] == canonical.hex_digest(case["value"])


@pytest.mark.parametrize("case", SESSION_IDS, ids=_ids(SESSION_IDS))
def test_session_request_ids(case: dict[str, Any]) -> None:
    """The session-scoped request id hashes the UTF-8 bytes Node writes."""
    assert case["id"] == session_request_id(case["clientId"], case["idempotencyKey"])


@pytest.mark.parametrize("case", FINGERPRINTS, ids=_ids(FINGERPRINTS))
def test_request_fingerprints(case: dict[str, Any]) -> None:
    """A request holding lone surrogates has Node's canonical line and fingerprint."""
    line = bytes.fromhex(case["line"])
    members = json.loads(line)
    assert line == canonical.encode(members)
    assert case["requestId"] == members["requestId"]
    assert case["fingerprint"] == request_fingerprint(members)
    parsed = parse_request(line)
    assert (case["fingerprint"], members["payload"]) == (parsed.fingerprint, parsed.payload)


@pytest.mark.parametrize("case", OPAQUE_IDS, ids=_ids(OPAQUE_IDS))
def test_opaque_ids_follow_the_256_byte_rule(case: dict[str, Any]) -> None:
    """An id with lone surrogates is counted in Node's UTF-8 bytes, and only that refuses it."""
    line = canonical.encode(
        {
            "clientId": "cli-A",
            "idempotencyKey": case["id"],
            "operation": "host.status",
            "payload": {},
            "requestId": "r-1",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )
    assert case["byteLength"] == len(canonical.utf8(case["id"]))
    if case["valid"]:
        assert case["id"] == parse_request(line).idempotency_key
    else:
        with pytest.raises(
            ProtocolError, match=r"^idempotencyKey must be nonempty text of at most 256 bytes$"
        ):
            parse_request(line)


class _Store:
    """The blobs table alone, written with the projection's own statement."""

    def __init__(self) -> None:
        self.connection = sqlite3.connect(":memory:", isolation_level=None)
        for statement in blobs.DDL:
            self.connection.execute(statement)

    def put(self, media_type: str, content: bytes) -> dict[str, str]:
        digest = hashlib.sha256(content).digest()
        try:
            self.connection.execute(
                blobs.UPSERT,
                (digest, media_type, len(content), content, 0),
            )
        except sqlite3.IntegrityError as error:
            return {"error": blobs.BLOB_CONFLICT if blobs.CONFLICT_SIGNATURE in str(error) else ""}
        return {"mediaType": media_type, "hex": content.hex(), "sha256": digest.hex()}

    def read_json(self, digest: str) -> dict[str, object]:
        ctx = Context(RowReader(self.connection), lambda _events: None, 0)
        try:
            content = json_bytes(ctx, bytes.fromhex(digest))
        except CommandError as error:
            return {"error": str(error)}
        assert content is not None
        return {"value": json.loads(content)}


@pytest.mark.parametrize("case", BLOBS, ids=_ids(BLOBS))
def test_blob_sequences(case: dict[str, Any]) -> None:
    """Each put and read gives Node's media type, bytes and hash, or Node's error."""
    store = _Store()
    for step in case["steps"]:
        expected = {
            key: value
            for key, value in step.items()
            if key in {"mediaType", "hex", "sha256", "error", "value"}
        }
        if "read" in step:
            assert {key: expected[key] for key in expected if key != "sha256"} == store.read_json(
                step["hash"]
            )
            continue
        if step["put"] == "json":
            got = store.put("application/json", canonical.encode(step["value"]))
        else:
            got = store.put("text/plain", canonical.utf8(step["value"]))
        expected.pop("value")
        assert expected == got
