"""Large run values: `$artifact` references in views and `view.content` chunks (DOMAIN §5.10)."""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import START, Fixture
else:
    from _harness import START, Fixture

BIG = "x" * 400_000


def _fixture(tmp_path: Path) -> Fixture:
    fx = Fixture(tmp_path / "s.db")
    response = fx.request("run.start", {**START, "input": {"text": BIG}}, run_id="run-1", at=1000)
    assert "accepted" == response.outcome
    return fx


def test_large_input_is_an_artifact_in_the_run_view(tmp_path: Path) -> None:
    """The run view names a large input by size, media type and SHA-256 instead of inlining it."""
    fx = _fixture(tmp_path)
    view = fx.request("run.status", None, run_id="run-1").receipt
    artifact = view["input"]["$artifact"]  # type: ignore[index]
    content = ('{"text":"' + BIG + '"}').encode()
    expected = hashlib.sha256(content).hexdigest()
    assert (len(content), "application/json", expected) == (
        artifact["bytes"],
        artifact["mediaType"],
        artifact["sha256"],
    )
    fx.assert_rebuild_equals_live()


def test_view_content_serves_chunks_until_complete(tmp_path: Path) -> None:
    """Chunks of 196 608 bytes reassemble the stored bytes; the last one says complete."""
    fx = _fixture(tmp_path)
    artifact = fx.request("run.status", None, run_id="run-1").receipt["input"]["$artifact"]  # type: ignore[index]
    data, offset, chunks = b"", 0, 0
    while offset is not None:
        payload = {"sha256": artifact["sha256"], "offset": offset}
        receipt = fx.request("view.content", payload, run_id="run-1").receipt
        data += base64.b64decode(receipt["data"])  # type: ignore[index]
        offset = receipt["nextOffset"]  # type: ignore[index]
        chunks += 1
    assert (3, len(data), artifact["sha256"]) == (
        chunks,
        artifact["bytes"],
        hashlib.sha256(data).hexdigest(),
    )


def test_unknown_content_is_not_found(tmp_path: Path) -> None:
    """A digest the run does not hold is notFound, and nothing is recorded."""
    fx = _fixture(tmp_path)
    before = fx.events()
    response = fx.request("view.content", {"sha256": "0" * 64}, run_id="run-1")
    assert ("notFound", before) == (response.outcome, fx.events())


def test_bad_view_content_requests_are_refused_and_change_nothing(tmp_path: Path) -> None:
    """A missing runId, a malformed digest or a negative offset is a one-line rejection."""
    fx = _fixture(tmp_path)
    before = fx.events()
    cases = [
        ({"sha256": "0" * 64}, None, "view.content requires runId"),
        ({"sha256": "zz"}, "run-1", "sha256 must be text"),
        ({"sha256": "g" * 64}, "run-1", "sha256 must be text"),
        ({"sha256": "0" * 64, "offset": -1}, "run-1", "offset must be a non-negative integer"),
        ({"sha256": "0" * 64, "offset": True}, "run-1", "offset must be a non-negative integer"),
    ]
    for payload, run_id, error in cases:
        response = fx.request("view.content", payload, run_id=run_id)
        assert ("rejected", error) == (response.outcome, response.error)
    assert before == fx.events()
