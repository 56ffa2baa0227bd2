"""``view.content`` serves every ``$artifact`` a run view names, not only inputs and outputs.

A step output over 16 384 bytes (DOMAIN §5.10: a string by its UTF-8 text,
anything else by its canonical JSON) is an ``$artifact`` in the steps page;
``view.content`` serves it in 196 608-byte chunks with HOST §2.11's receipt
and errors.  The edges are 16 KiB - 1, 16 KiB and 16 KiB + 1.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import ATTEMPT, Fixture
else:
    from _harness import ATTEMPT, Fixture

LIMIT = 16_384
CHUNK = 196_608


def _finished_with(tmp_path: Path, output: object) -> Fixture:
    fx = Fixture.running(tmp_path / "s.db")
    fx.ok("node.finished", {"output": output}, attempt=ATTEMPT)
    return fx


def _step_output(fx: Fixture) -> Any:
    page = fx.request("view.page", {"cursor": 0, "kind": "steps"}, run_id="run-1")
    assert page.outcome == "accepted", page
    receipt: Any = page.receipt
    [step] = receipt["items"]
    return step["output"]


def _chunk(fx: Fixture, path: str, offset: int, run_id: str = "run-1") -> Any:
    return fx.request("view.content", {"offset": offset, "path": path}, run_id=run_id)


@pytest.mark.parametrize(
    ("size", "served"), [(LIMIT - 1, False), (LIMIT, False), (LIMIT + 1, True)]
)
def test_a_text_step_output_is_served_from_16_kib_plus_1(
    tmp_path: Path, size: int, served: bool
) -> None:
    text = "é" + "x" * (size - 2)  # two UTF-8 bytes, then one each
    fx = _finished_with(tmp_path, text)
    output = _step_output(fx)
    if not served:
        assert output == text
        fx.close()
        return
    data = text.encode()
    digest = hashlib.sha256(data).hexdigest()
    assert output == {
        "$artifact": {
            "bytes": size,
            "mediaType": "text/plain",
            "opaque": True,
            "path": f"artifacts/sha256/{digest}.txt",
            "sha256": digest,
        }
    }
    answer = _chunk(fx, output["$artifact"]["path"], 0)
    assert answer.outcome == "accepted", answer
    assert answer.receipt == {
        "bytes": size,
        "complete": True,
        "data": base64.b64encode(data).decode(),
        "mediaType": "text/plain",
        "nextOffset": size,
        "offset": 0,
        "path": f"artifacts/sha256/{digest}.txt",
        "runId": "run-1",
        "schema": "pi-workflows.content-chunk.v1",
        "sha256": digest,
    }
    fx.close()


@pytest.mark.parametrize(
    ("size", "served"), [(LIMIT - 1, False), (LIMIT, False), (LIMIT + 1, True)]
)
def test_a_json_step_output_is_served_from_16_kib_plus_1(
    tmp_path: Path, size: int, served: bool
) -> None:
    value = {"t": "x" * (size - len('{"t":""}'))}
    data = ('{"t":"' + value["t"] + '"}').encode()
    assert len(data) == size
    fx = _finished_with(tmp_path, value)
    output = _step_output(fx)
    if not served:
        assert output == value
        fx.close()
        return
    digest = hashlib.sha256(data).hexdigest()
    assert output["$artifact"]["path"] == f"artifacts/sha256/{digest}.json"
    assert output["$artifact"]["mediaType"] == "application/json"
    answer = _chunk(fx, output["$artifact"]["path"], 0)
    assert answer.outcome == "accepted", answer
    assert base64.b64decode(answer.receipt["data"]) == data
    assert answer.receipt["complete"] is True
    fx.close()


def test_a_large_step_output_comes_in_chunks_with_the_spec_errors(tmp_path: Path) -> None:
    text = "y" * 400_000
    fx = _finished_with(tmp_path, text)
    path = _step_output(fx)["$artifact"]["path"]
    data, offset, steps = b"", 0, []
    while True:
        receipt = _chunk(fx, path, offset).receipt
        assert base64.b64decode(receipt["data"]) == text.encode()[offset : receipt["nextOffset"]]
        data += base64.b64decode(receipt["data"])
        steps.append((receipt["offset"], receipt["nextOffset"], receipt["complete"]))
        if receipt["complete"]:
            break
        offset = receipt["nextOffset"]
    assert data == text.encode()
    assert steps == [(0, CHUNK, False), (CHUNK, 2 * CHUNK, False), (2 * CHUNK, 400_000, True)]
    end = _chunk(fx, path, 400_000)
    assert (end.outcome, end.receipt["data"], end.receipt["complete"]) == ("accepted", "", True)
    beyond = _chunk(fx, path, 400_001)
    assert (beyond.outcome, beyond.error) == (
        "rejected",
        "Workflow content offset is outside the content range",
    )
    wrong_type = _chunk(fx, path.replace(".txt", ".json"), 0)
    assert (wrong_type.outcome, wrong_type.error) == ("notFound", "Workflow content not found")
    other_run = _chunk(fx, path, 0, run_id="run-other")
    assert (other_run.outcome, other_run.error) == ("notFound", "Workflow content not found")
    fx.close()
