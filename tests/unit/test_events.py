"""The event registry, the envelope and reading events back."""

import hashlib
import inspect

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pwf import canonical
from pwf.errors import EventDataError, LineError
from pwf.events import (
    EVENT_TYPES,
    REGISTRY,
    Actor,
    Cause,
    CommandRecorded,
    Event,
    content_hash_of,
    open_body,
    seal,
)

FINGERPRINT = "c5b58e1545e811b2c08997cf42f88cf7cc8ae4a6e82c47d97fadb29fa3731493"


_TRICKY = st.one_of(st.characters(), st.sampled_from(['"', ",", ":", "\\", "\ud800", "\udc00"]))
"""Characters, plus the ones JSON escapes or that could fake a member: quotes, lone surrogates."""


def _recorded(**changes: object) -> CommandRecorded:
    fields: dict[str, object] = {
        "request_id": "r-1",
        "client_id": "cli-A",
        "operation": "host.status",
        "idempotency_key": "k-1",
        "fingerprint": FINGERPRINT,
        "outcome": "accepted",
        "receipt": canonical.raw({"live": True}),
        "host_epoch": 1,
    }
    fields.update(changes)
    return CommandRecorded(**fields)  # type: ignore[arg-type]


def _sealed(event: Event, seq: int = 1, prev: str | None = None) -> bytes:
    return seal(
        event,
        seq=seq,
        batch=1,
        at=1_000,
        actor=Actor(type="host", id="host-1"),
        cause=Cause(operation="host.status", request_id="r-1", client_id="cli-A"),
        event_id=f"evt-{seq}",
        prev_hash=prev,
    ).body


class TestRegistry:
    def test_tags_are_unique_dotted_and_match_the_registry(self):
        """Every event type has its own dotted tag and the registry maps it back."""
        tags = [cls.TAG for cls in EVENT_TYPES]
        assert len(tags) == len(set(tags))
        assert all("." in tag and tag == tag.lower() for tag in tags)
        assert {cls.TAG: cls for cls in EVENT_TYPES} == dict(REGISTRY)

    @pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.TAG)
    def test_every_event_is_frozen_strict_and_camel_case(self, cls: type[Event]):
        """Config inherits from Event; kw_only must be repeated, so it is checked too."""
        config = cls.__struct_config__
        assert (True, True, True) == (
            config.frozen,
            config.forbid_unknown_fields,
            config.omit_defaults,
        )
        parameters = inspect.signature(cls).parameters.values()
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        assert all(not field.encode_name[:1].isdigit() for field in info.fields)
        assert all("_" not in field.encode_name for field in info.fields)


class TestEnvelope:
    def test_sealed_bytes_are_canonical_and_self_hashed(self):
        """The content hash is SHA-256 of the canonical envelope without its own member."""
        body = _sealed(_recorded())
        entry = open_body(body)
        without = canonical.parse_line(body)
        assert isinstance(without, dict)
        del without["contentHash"]
        expected = hashlib.sha256(canonical.encode(without)).hexdigest()
        assert expected == entry.content_hash
        assert expected == content_hash_of(body)
        assert canonical.encode(canonical.parse_line(body)) == body

    @given(
        actor_id=st.text(_TRICKY, min_size=1, max_size=20),
        operation=st.text(_TRICKY, max_size=20),
        key=st.one_of(st.none(), st.text(max_size=20)),
        receipt=st.text(max_size=20),
    )
    def test_the_sealed_bytes_are_the_envelope_encoded_with_its_hash(
        self, actor_id: str, operation: str, key: str | None, receipt: str
    ):
        """Inserting contentHash into the hashed bytes gives the envelope's own encoding.

        Texts with quotes, commas, ``"data":`` and lone surrogates take the
        exact path of the canonical encoder; the result must not differ.
        """
        actor = Actor(type="host", id=actor_id)
        cause = Cause(operation=operation + ',"data":{}', idempotency_key=key)
        event = _recorded(receipt=canonical.raw({"data": receipt, ',"data":': 1}))
        sealed = seal(
            event, seq=3, batch=2, at=5, actor=actor, cause=cause, event_id="e", prev_hash=None
        )
        members = canonical.parse_line(sealed.body)
        assert isinstance(members, dict)
        assert canonical.encode(members) == sealed.body
        del members["contentHash"]
        assert hashlib.sha256(canonical.encode(members)).hexdigest() == sealed.entry.content_hash

    def test_the_tag_is_the_type_and_is_not_repeated_in_data(self):
        """Data holds only the fields; the envelope's type names the event."""
        value = canonical.parse_line(_sealed(_recorded()))
        assert isinstance(value, dict)
        assert "command.recorded" == value["type"]
        assert "type" not in value["data"]
        assert {"live": True} == value["data"]["receipt"]

    def test_reading_back_gives_the_same_typed_event(self):
        """open_body returns an equal event with the raw receipt bytes intact."""
        event = _recorded(run_id="run-1", revision=3, error="boom")
        entry = open_body(_sealed(event))
        assert isinstance(entry.event, CommandRecorded)
        assert bytes(event.receipt) == bytes(entry.event.receipt)  # type: ignore[arg-type]
        assert ("run-1", 3, "boom") == (entry.event.run_id, entry.event.revision, entry.event.error)
        assert "run-1" == entry.event.index_run_id()

    def test_a_changed_byte_breaks_the_content_hash(self):
        """Editing data while keeping the bytes canonical is caught by the hash."""
        body = _sealed(_recorded()).replace(b'"k-1"', b'"k-2"')
        with pytest.raises(LineError, match="content hash"):
            open_body(body)

    def test_unknown_types_and_fields_are_refused(self):
        """An event whose data does not fit its tag is an EventDataError."""
        value = canonical.parse_line(_sealed(_recorded()))
        assert isinstance(value, dict)
        for change in ({"type": "no.such"}, {"data": {**value["data"], "extra": 1}}):
            forged = {**value, **change}
            del forged["contentHash"]
            forged["contentHash"] = hashlib.sha256(canonical.encode(forged)).hexdigest()
            with pytest.raises(EventDataError):
                open_body(canonical.encode(forged))
