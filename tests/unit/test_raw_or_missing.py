"""A value an event embeds is its canonical bytes; an absent one leaves the member out."""

from __future__ import annotations

import msgspec

from pwf import canonical
from pwf.commands import raw_or_missing
from pwf.events import CommandRecorded

FINGERPRINT = "ab" * 32


def _recorded(receipt: object) -> bytes:
    """The canonical data of a ``command.recorded`` whose receipt is ``receipt``."""
    event = CommandRecorded(
        request_id="r-1",
        client_id="c-1",
        operation="run.start",
        idempotency_key="k-1",
        fingerprint=FINGERPRINT,
        outcome="accepted",
        receipt=raw_or_missing(receipt),
    )
    return canonical.encode(event)


def test_an_absent_value_stays_absent() -> None:
    """MISSING is MISSING, so the event omits the member rather than writing null."""
    assert raw_or_missing(canonical.MISSING) is canonical.MISSING
    assert b'"receipt"' not in _recorded(canonical.MISSING)


def test_a_present_value_is_its_canonical_bytes() -> None:
    """None is a value (``null``); an object is written in canonical key order."""
    assert raw_or_missing(None) == msgspec.Raw(b"null")
    assert raw_or_missing({"b": 1, "a": [True]}) == msgspec.Raw(b'{"a":[true],"b":1}')
    assert b'"receipt":{"runId":"run-1"}' in _recorded({"runId": "run-1"})
    assert b'"receipt":null' in _recorded(None)
