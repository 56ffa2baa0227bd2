"""The operations reference and the payload and receipt schemas (ADR 0081).

``docs/operations.md`` shows one request line of every client operation and
its answer.  These tests run every documented line, in order, on a fresh
database with ``pwf request`` as the page says, and compare each answer with
the page's; they hold every documented payload and receipt to its type, and
``pwf schema`` to the files in ``schemas/``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import pytest

from pwf.artifacts import EXAMPLE_AT, EXAMPLE_DIRECTORY, EXAMPLE_SEED, normalised_answer
from pwf.protocol.client import OPERATIONS, VIEW_OPERATIONS
from pwf.protocol.schemas import OPERATION_TYPES, operation_schema

if TYPE_CHECKING:
    from collections.abc import Callable

    from click.testing import Result

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "operations.md"
_EXAMPLE = re.compile(
    r"^\$ echo '(?P<line>\{.*\})' \| pwf request --db ops\.db --at (?P<at>\d+)\n"
    r"(?P<answer>\{.*\})$",
    re.MULTILINE,
)


def _documented() -> list[tuple[bytes, bytes]]:
    """Each documented (request line, answer line), in the page's order."""
    found = []
    for match in _EXAMPLE.finditer(PAGE.read_text(encoding="utf-8")):
        assert int(match["at"]) == EXAMPLE_AT
        found.append((match["line"].encode(), match["answer"].encode()))
    return found


def test_the_page_shows_every_operation_once() -> None:
    operations = [json.loads(line)["operation"] for line, _ in _documented()]
    assert sorted(OPERATIONS | VIEW_OPERATIONS) == sorted(operations)


def test_every_documented_line_gets_its_documented_answer(tmp_path: Path) -> None:
    """Run the page's lines as the page says: a fresh database, `PWF_SEED`, `pwf request`."""
    documented = _documented()
    database = tmp_path / "ops.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}
    env["PWF_SEED"] = EXAMPLE_SEED
    pwf = [sys.executable, "-m", "pwf"]
    subprocess.run([*pwf, "init", "--db", str(database)], env=env, check=True, capture_output=True)
    here, there = EXAMPLE_DIRECTORY.encode(), os.fsencode(tmp_path)
    stdin = b"".join(line.replace(here, there) + b"\n" for line, _ in documented)
    finished = subprocess.run(
        [*pwf, "request", "--db", str(database), "--at", str(EXAMPLE_AT)],
        input=stdin,
        env=env,
        capture_output=True,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr.decode()
    answers = finished.stdout.replace(there, here).splitlines()
    assert len(documented) == len(answers)
    for (line, expected), answer in zip(documented, answers, strict=True):
        operation = json.loads(line)["operation"]
        assert normalised_answer(expected) == normalised_answer(answer), operation


@pytest.mark.parametrize(("line", "answer"), _documented())
def test_documented_payloads_and_receipts_fit_their_types(line: bytes, answer: bytes) -> None:
    request = json.loads(line)
    response = json.loads(answer)
    types = OPERATION_TYPES[request["operation"]]
    if types.payload is not None:
        msgspec.convert(request["payload"], types.payload, strict=True)
    if "receipt" in response and types.receipt is not None:
        msgspec.convert(response["receipt"], types.receipt, strict=True)


def test_a_receipt_member_its_type_does_not_name_is_refused() -> None:
    """A receipt type forbids unknown members: a member added without its type fails above."""
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        msgspec.convert(
            {"runId": "run-1", "status": "cancelled", "extra": 1},
            OPERATION_TYPES["run.cancel"].receipt,
        )


def test_pwf_schema_prints_the_schema_files(run: Callable[..., Result]) -> None:
    for operation in ("run.start", "state.prune", "controller.list"):
        result = run("schema", operation)
        assert 0 == result.exit_code, result.output
        written = (ROOT / "schemas" / f"{operation}.schema.json").read_text(encoding="utf-8")
        assert json.loads(written) == json.loads(result.output)
        assert operation_schema(operation) == json.loads(result.output)
    start = json.loads(run("schema", "run.start").output)
    payload = start["payload"]["$defs"]["RunStart"]
    assert {"projectPath", "workflowName", "workflowSourceRef", "workflowSource"} <= set(
        payload["required"]
    )


def test_pwf_schema_lists_the_operations(run: Callable[..., Result]) -> None:
    result = run("schema")
    assert 0 == result.exit_code
    assert sorted(OPERATIONS | VIEW_OPERATIONS) == result.output.split()


def test_pwf_schema_refuses_an_unknown_operation_in_one_line(run: Callable[..., Result]) -> None:
    result = run("schema", "run.strat")
    assert 2 == result.exit_code
    assert "unknown operation 'run.strat'" in result.output
    assert "Traceback" not in result.output
