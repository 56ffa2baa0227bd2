"""Fixtures the command-line tests share: a scratch directory, ``pwf`` in-process, request lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

from pwf import canonical
from pwf.cli import cli

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No $PWF_DB from outside, and a scratch working directory for the default path."""
    monkeypatch.delenv("PWF_DB", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def run() -> Callable[..., Result]:
    """Invoke ``pwf`` in-process with the given arguments, stdin bytes and environment."""
    runner = CliRunner()

    def invoke(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Result:
        """Run ``pwf *args``; errors must become exit codes, never escape."""
        return runner.invoke(
            cli, list(args), input=stdin, env=env, catch_exceptions=False, prog_name="pwf"
        )

    return invoke


def _client_line(
    number: int,
    operation: str = "run.start",
    *,
    at: int | None = None,
    payload: object = None,
) -> bytes:
    """A canonical client request line about ``run-N`` (preceded by ``#at AT`` when given).

    ``run.start`` gets the ``builtin:echo`` payload with input ``{"n": N}`` and
    origin ``s-N`` and ids ``r-N`` / ``k-N``; other operations get ``payload``
    (``{}`` by default) and ids named after the operation.
    """
    if operation == "run.start":
        rid, key = f"r-{number}", f"k-{number}"
        payload = {
            "projectPath": "/p",
            "workflowName": "echo",
            "workflowSourceRef": "builtin:echo",
            "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
            "definitionDigest": "d1",
            "definitionSnapshot": {},
            "input": {"n": number},
            "originSessionId": f"s-{number}",
        }
    else:
        rid = key = f"{operation}-{number}"
    request = {
        "schema": "pi-workflows.client.v1",
        "type": "request",
        "requestId": rid,
        "clientId": "cli-A",
        "idempotencyKey": key,
        "operation": operation,
        "runId": f"run-{number}",
        "payload": {} if payload is None else payload,
    }
    clock = b"" if at is None else f"#at {at}\n".encode()
    return clock + canonical.encode(request) + b"\n"


@pytest.fixture
def client_line() -> Callable[..., bytes]:
    """Build client request lines about ``run-N`` (see :func:`_client_line`)."""
    return _client_line
