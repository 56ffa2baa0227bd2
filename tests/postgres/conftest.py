"""Tests of the PostgreSQL store; collected only where psycopg (the ``postgres`` extra) is.

Without psycopg the contract suite's ``postgresql`` cases skip (and fail
under CI), so a missing extra is still reported.  :class:`Hosts` runs pwf's
command line as several hosts, each with its own local projection file, on
one shared log.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

from pwf import canonical
from pwf.cli import cli

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

collect_ignore_glob = [] if importlib.util.find_spec("psycopg") else ["test_*.py"]


class Hosts:
    """``pwf`` as host ``name`` (its own ``NAME.db``) on the shared log at ``url``."""

    def __init__(self, url: str, folder: Path) -> None:
        """Hosts keep their projection files in ``folder``."""
        self.url = url
        self.folder = folder

    def db(self, name: str) -> Path:
        """Host ``name``'s local projection file."""
        return self.folder / f"{name}.db"

    def __call__(self, name: str, *args: str, stdin: bytes | None = None) -> Result:
        """Run ``pwf ARGS --db NAME.db --store URL`` in this process."""
        return CliRunner().invoke(
            cli,
            [*args, "--db", str(self.db(name)), "--store", self.url],
            input=stdin,
            catch_exceptions=False,
        )


@pytest.fixture
def hosts(pg_url: str, tmp_path: Path) -> Hosts:
    """Hosts on a fresh shared log (``pwf init --store`` already run by host ``a``)."""
    made = Hosts(pg_url, tmp_path)
    assert 0 == made("a", "init").exit_code
    return made


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
    """Build client request lines about ``run-N`` (as the command-line tests do)."""
    return _client_line
