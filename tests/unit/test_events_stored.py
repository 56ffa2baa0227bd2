"""``open_stored`` judges stored bytes as ``open_body`` does, in one decode where it can.

The deep verify opens every event with :func:`pwf.events.stored.open_stored`
(ADR 0063).  Each body here goes through it and through
:func:`pwf.events.open_body`: the same error and message, or the same
entry, member by member.  The bodies are the seven events the fault corpus
damages, each byte of each flipped as the corpus flips them, and events
whose hashes break only their pattern, which the one-pass decoder leaves
to the caller.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import pytest

from pwf import canonical
from pwf.errors import InputError
from pwf.events import Entry, open_body
from pwf.events.stored import open_stored, stored_decoder

if TYPE_CHECKING:
    from collections.abc import Callable

Outcome = tuple[str, object]


def _outcome(opener: Callable[[bytes], Entry], body: bytes) -> Outcome:
    try:
        entry = opener(body)
    except InputError as error:
        return (type(error).__name__, str(error))
    # The one-pass entry is an Entry subclass that also keeps the envelope's schema.
    return ("entry", {name: getattr(entry, name) for name in Entry.__struct_fields__})


def _same(body: bytes) -> None:
    assert _outcome(open_stored, body) == _outcome(open_body, body), body


@pytest.fixture(scope="module")
def bodies(tmp_path_factory: pytest.TempPathFactory, fill: Any) -> list[bytes]:
    """The fault corpus's seven events (seqs 1 | 2 3 4 | 5 6 | 7)."""
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415 - the fixture's only store

    with SqliteStore(tmp_path_factory.mktemp("stored") / "pwf.db", create=True) as store:
        fill(store, (1, 3, 2, 1))
        return [bytes(event.body) for event in store.read()]


def test_sound_events_take_the_one_pass(bodies: list[bytes]) -> None:
    """Every sound event has a one-pass decoder and opens to open_body's entry."""
    assert len(bodies) == 7
    for body in bodies:
        assert stored_decoder(body) is not None
        _same(body)


def test_every_flip_of_the_fault_corpus_events(bodies: list[bytes]) -> None:
    """Each byte of each event flipped: the same verdict and message."""
    for body in bodies:
        for offset in range(len(body)):
            _same(body[:offset] + bytes([body[offset] ^ 0x01]) + body[offset + 1 :])


def _resealed(body: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """The event edited and sealed again, so its own content hash matches."""
    document = json.loads(body)
    change(document)
    draft = {key: value for key, value in document.items() if key != "contentHash"}
    draft["contentHash"] = hashlib.sha256(canonical.encode(draft)).hexdigest()
    return canonical.encode(draft)


@pytest.mark.parametrize(
    "prev",
    ["A" * 64, "a" * 63, "a" * 65, "g" * 64, "a" * 64 + "\n", "", None],
)
def test_a_prev_hash_judged_by_its_pattern(bodies: list[bytes], prev: str | None) -> None:
    """The one-pass decoder takes any prevHash text; open_stored matches it as the envelope does."""

    def change(document: dict[str, Any]) -> None:
        document["prevHash"] = prev

    _same(_resealed(bodies[2], change))


def test_an_old_or_unknown_tag_takes_the_long_way(bodies: list[bytes]) -> None:
    """A tag the registry does not hold has no one-pass decoder; open_body's verdict stands."""

    def change(document: dict[str, Any]) -> None:
        document["type"] = "no.such.event"

    body = _resealed(bodies[2], change)
    assert stored_decoder(body) is None
    _same(body)
