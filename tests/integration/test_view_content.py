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


CHUNK = 196_608
"""HOST.md §2.11: chunks are 196 608 raw bytes."""


def _path(artifact: dict[str, object]) -> str:
    return f"artifacts/sha256/{artifact['sha256']}.json"


def test_view_content_serves_chunks_until_complete(tmp_path: Path) -> None:
    """Chunks of 196 608 raw bytes reassemble the stored bytes; the receipt is HOST.md §2.11's."""
    fx = _fixture(tmp_path)
    artifact = fx.request("run.status", None, run_id="run-1").receipt["input"]["$artifact"]  # type: ignore[index]
    path = _path(artifact)
    assert path == artifact["path"]
    data, offset, receipts = b"", 0, []
    while True:
        response = fx.request("view.content", {"path": path, "offset": offset}, run_id="run-1")
        assert "accepted" == response.outcome, response
        receipt = response.receipt
        assert isinstance(receipt, dict)
        receipts.append(receipt)
        chunk = base64.b64decode(receipt["data"])
        assert offset + len(chunk) == receipt["nextOffset"]
        data += chunk
        offset = receipt["nextOffset"]
        if receipt["complete"]:
            break
    size = artifact["bytes"]
    assert [0, CHUNK, 2 * CHUNK] == [receipt["offset"] for receipt in receipts]
    assert [CHUNK, 2 * CHUNK, size] == [receipt["nextOffset"] for receipt in receipts]
    assert [False, False, True] == [receipt["complete"] for receipt in receipts]
    assert (size, artifact["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert {
        "schema": "pi-workflows.content-chunk.v1",
        "runId": "run-1",
        "path": path,
        "mediaType": "application/json",
        "bytes": size,
        "sha256": artifact["sha256"],
        "offset": 2 * CHUNK,
        "nextOffset": size,
        "complete": True,
    } == {key: value for key, value in receipts[-1].items() if key != "data"}


def test_offset_at_the_end_is_an_empty_complete_chunk(tmp_path: Path) -> None:
    """``offset === bytes`` is allowed: empty data, complete, nextOffset = bytes."""
    fx = _fixture(tmp_path)
    artifact = fx.request("run.status", None, run_id="run-1").receipt["input"]["$artifact"]  # type: ignore[index]
    size = artifact["bytes"]
    payload = {"path": _path(artifact), "offset": size}
    receipt = fx.request("view.content", payload, run_id="run-1").receipt
    assert ("", size, True) == (receipt["data"], receipt["nextOffset"], receipt["complete"])  # type: ignore[index]


def test_offset_past_the_end_is_refused(tmp_path: Path) -> None:
    """An offset greater than the byte length throws the range error; nothing is recorded."""
    fx = _fixture(tmp_path)
    artifact = fx.request("run.status", None, run_id="run-1").receipt["input"]["$artifact"]  # type: ignore[index]
    before = fx.events()
    payload = {"path": _path(artifact), "offset": artifact["bytes"] + 1}
    response = fx.request("view.content", payload, run_id="run-1")
    assert ("rejected", "Workflow content offset is outside the content range") == (
        response.outcome,
        response.error,
    )
    assert before == fx.events()


def test_unknown_content_is_not_found(tmp_path: Path) -> None:
    """An unknown digest, a wrong extension, a malformed path or another run: notFound, no id."""
    fx = _fixture(tmp_path)
    artifact = fx.request("run.status", None, run_id="run-1").receipt["input"]["$artifact"]  # type: ignore[index]
    before = fx.events()
    digest = artifact["sha256"]
    for run_id, path in [
        ("run-1", f"artifacts/sha256/{'0' * 64}.json"),
        ("run-1", f"artifacts/sha256/{digest}.txt"),
        ("run-1", f"artifacts/sha256/{digest.upper()}.json"),
        ("run-1", f"/artifacts/sha256/{digest}.json"),
        ("run-1", f"artifacts/sha256/{digest}.json.gz"),
        ("run-2", f"artifacts/sha256/{digest}.json"),
    ]:
        response = fx.request("view.content", {"path": path, "offset": 0}, run_id=run_id)
        assert ("notFound", "Workflow content not found") == (response.outcome, response.error)
    assert before == fx.events()


def test_bad_view_content_requests_are_refused_and_change_nothing(tmp_path: Path) -> None:
    """Payload checks in the original's order, each a one-line rejection (HOST.md §2)."""
    fx = _fixture(tmp_path)
    before = fx.events()
    good = f"artifacts/sha256/{'0' * 64}.json"
    cases = [
        ([], "run-1", "view.content payload must be an object"),
        ({"path": good, "offset": 0}, None, "view.content requires runId"),
        ({"offset": 0}, "run-1", "path must be text"),
        ({"path": "", "offset": 0}, "run-1", "path must be text"),
        ({"path": good}, "run-1", "offset must be a non-negative integer"),
        ({"path": good, "offset": -1}, "run-1", "offset must be a non-negative integer"),
        ({"path": good, "offset": True}, "run-1", "offset must be a non-negative integer"),
        ({"path": good, "offset": 1.5}, "run-1", "offset must be a non-negative integer"),
    ]
    for payload, run_id, error in cases:
        response = fx.request("view.content", payload, run_id=run_id)
        assert ("rejected", error) == (response.outcome, response.error)
    assert before == fx.events()


def test_text_values_are_served_as_txt(tmp_path: Path) -> None:
    """A large JSON string is kept as its UTF-8 text: path ``.txt``, media type text/plain."""
    fx = Fixture(tmp_path / "s.db")
    assert "accepted" == fx.request("run.start", {**START, "input": BIG}, run_id="run-1").outcome
    artifact = fx.request("run.status", None, run_id="run-1").receipt["input"]["$artifact"]  # type: ignore[index]
    digest = hashlib.sha256(BIG.encode()).hexdigest()
    assert f"artifacts/sha256/{digest}.txt" == artifact["path"]
    payload = {"path": artifact["path"], "offset": 0}
    receipt = fx.request("view.content", payload, run_id="run-1").receipt
    assert ("text/plain", len(BIG), digest) == (
        receipt["mediaType"],  # type: ignore[index]
        receipt["bytes"],  # type: ignore[index]
        receipt["sha256"],  # type: ignore[index]
    )
    json_path = {"path": artifact["path"].replace(".txt", ".json"), "offset": 0}
    assert "notFound" == fx.request("view.content", json_path, run_id="run-1").outcome
