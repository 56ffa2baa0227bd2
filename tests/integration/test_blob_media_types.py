"""One hash, one media type: the blob conflict and the JSON read rule (DOMAIN §3.3)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import pytest

from pwf import canonical
from pwf.commands import Context
from pwf.commands.views import view_text
from pwf.errors import CommandError

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import ATTEMPT, START, Fixture, coordinate, edit
else:
    from _harness import ATTEMPT, START, Fixture, coordinate, edit

CONFLICT = "Content-addressed blob conflict"
NOT_JSON = "JSON blob is missing or has the wrong media type"
BYTES = '{"n":1}'
"""Text whose UTF-8 equals the canonical bytes of the JSON value ``{"n":1}``."""


def _session_run(db: Path) -> tuple[Fixture, str]:
    """``run-9`` waiting on an agent request for session ``s-1``, with its coordinator."""
    fx = Fixture(db, run_id="run-9")
    fx.start(at=1000)
    fx.launch(at=1000)
    fx.ready()
    fx.ok("node.started", {"nodeId": "ask", "timeoutMs": 60000}, attempt=ATTEMPT)
    fx.request_interaction(at=1000)
    return fx, coordinate(fx, at=2000)


def _queue(fx: Fixture, epoch: str, prompt: str, key: str) -> object:
    payload = {"targetSessionId": "s-1", "coordinatorEpoch": epoch, "prompt": prompt}
    return fx.request("followUp.queue", payload, run_id="run-9", key=key, at=3000)


def _blob(fx: Fixture, content: bytes) -> tuple[str, bytes] | None:
    row = fx.row("blobs", blob_hash=hashlib.sha256(content).digest())
    return None if row is None else (row["media_type"], bytes(row["content"]))


def test_text_first_then_the_same_bytes_as_json(tmp_path: Path) -> None:
    """A JSON value whose bytes are stored as text refuses its whole batch."""
    fx, epoch = _session_run(tmp_path / "s.db")
    queued = _queue(fx, epoch, BYTES, "fu-1")
    assert "accepted" == queued.outcome  # type: ignore[attr-defined]
    assert ("text/plain", BYTES.encode()) == _blob(fx, BYTES.encode())
    before = fx.events()

    started = fx.request("run.start", {**START, "input": {"n": 1}}, run_id="run-10", key="s-10")

    assert ("rejected", CONFLICT) == (started.outcome, started.error)
    assert before == fx.events()
    assert None is fx.row("runs", run_id="run-10")
    assert 0 == fx.count("host_commands", idempotency_key="s-10")
    assert ("text/plain", BYTES.encode()) == _blob(fx, BYTES.encode())
    other = fx.request("run.start", {**START, "input": {"n": 2}}, run_id="run-10", key="s-11")
    assert "accepted" == other.outcome
    fx.assert_rebuild_equals_live()
    fx.close()


def test_json_first_then_the_same_bytes_as_text(tmp_path: Path) -> None:
    """Text whose bytes are stored as JSON refuses its whole batch."""
    fx, epoch = _session_run(tmp_path / "s.db")
    started = fx.request("run.start", {**START, "input": {"n": 1}}, run_id="run-10", key="s-10")
    assert "accepted" == started.outcome
    assert ("application/json", BYTES.encode()) == _blob(fx, BYTES.encode())
    before = fx.events()

    queued = _queue(fx, epoch, BYTES, "fu-1")

    assert ("rejected", CONFLICT) == (queued.outcome, queued.error)  # type: ignore[attr-defined]
    assert before == fx.events()
    assert 0 == fx.count("workflow_follow_ups")
    assert 0 == fx.count("host_commands", idempotency_key="fu-1")
    assert "accepted" == _queue(fx, epoch, BYTES + " ", "fu-2").outcome  # type: ignore[attr-defined]
    fx.assert_rebuild_equals_live()
    fx.close()


def test_the_same_bytes_with_the_same_media_type_are_stored_once(tmp_path: Path) -> None:
    """Storing a stored hash again with its own media type is a no-op."""
    fx, epoch = _session_run(tmp_path / "s.db")
    assert "accepted" == _queue(fx, epoch, BYTES, "fu-1").outcome  # type: ignore[attr-defined]
    assert "accepted" == _queue(fx, epoch, BYTES, "fu-2").outcome  # type: ignore[attr-defined]
    assert 2 == fx.count("workflow_follow_ups")
    assert 1 == fx.count("blobs", blob_hash=hashlib.sha256(BYTES.encode()).digest())
    fx.close()


def test_reading_json_requires_application_json(tmp_path: Path) -> None:
    """A JSON column whose blob is stored as text cannot be read as JSON."""
    fx = Fixture(tmp_path / "s.db")
    fx.start(at=1000)
    run = fx.existing("runs", run_id="run-1")
    statement = "UPDATE blobs SET media_type = 'text/plain' WHERE blob_hash = x'{}'"
    edit(fx.store.projections_file.path, statement.format(bytes(run["input_hash"]).hex()))
    before = fx.events()
    status = fx.request("run.status", None, run_id="run-1")
    assert ("rejected", NOT_JSON) == (status.outcome, status.error)
    assert before == fx.events()
    fx.close()


def test_a_conflict_in_the_recorded_outcome_refuses_the_whole_batch(tmp_path: Path) -> None:
    """When the outcome's own receipt conflicts, the run it reserved is not kept either."""
    scratch = Fixture(tmp_path / "scratch.db")
    receipt = scratch.request("run.start", {**START, "input": {}}, run_id="run-10").receipt
    scratch.close()
    fx, epoch = _session_run(tmp_path / "s.db")
    text = canonical_text(receipt)
    assert "accepted" == _queue(fx, epoch, text, "fu-1").outcome  # type: ignore[attr-defined]
    before = fx.events()

    started = fx.request("run.start", {**START, "input": {}}, run_id="run-10", key="s-10")

    assert ("rejected", CONFLICT) == (started.outcome, started.error)
    assert before == fx.events()
    assert None is fx.row("runs", run_id="run-10")
    fx.assert_rebuild_equals_live()
    fx.close()


def canonical_text(value: object) -> str:
    """The canonical JSON of ``value`` as text, which a prompt may spell."""
    return canonical.encode(value).decode()


def test_reading_text_requires_text_plain(tmp_path: Path) -> None:
    """A text column whose blob is stored as JSON cannot be read as text (a follow-up's prompt)."""
    fx, epoch = _session_run(tmp_path / "s.db")
    assert "accepted" == _queue(fx, epoch, "hello", "fu-1").outcome  # type: ignore[attr-defined]
    prompt_hash = bytes(fx.existing("workflow_follow_ups", run_id="run-9")["prompt_hash"])
    ctx = Context(fx.store.reader(), _never, 4000)
    assert "hello" == view_text(ctx, prompt_hash)
    statement = "UPDATE blobs SET media_type = 'application/json' WHERE blob_hash = x'{}'"
    edit(fx.store.projections_file.path, statement.format(prompt_hash.hex()))
    with pytest.raises(CommandError, match=r"^Text blob is missing or has the wrong media type$"):
        view_text(Context(fx.store.reader(), _never, 4000), prompt_hash)
    fx.close()


def _never(_events: object) -> object:
    raise AssertionError("reading a view stages nothing")
