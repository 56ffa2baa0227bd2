"""Running ``pwf serve`` as a real process for the end-to-end tests of the served host.

Paths live in a short directory under the system temp dir, since a Unix
socket path may hold at most 107 bytes.  Every wait polls for a condition
with a generous deadline, so a loaded two-core machine only makes them slower.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pwf import canonical
from pwf.cli._options import open_store
from pwf.client import HostClient, HostUnavailableError, socket_path, wait_for_host

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["PWF", "Served", "line", "short_dir", "until"]

PWF: Final = str(Path(sys.executable).with_name("pwf"))
START_SECONDS: Final = 60.0
STOP_SECONDS: Final = 60.0


@contextlib.contextmanager
def short_dir() -> Iterator[Path]:
    """A fresh directory with a short path, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="pwf-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def until(condition: Callable[[], object], seconds: float = 60.0, what: str = "") -> Any:
    """Poll ``condition`` until it is truthy; its value.  Fails after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or condition}"
        time.sleep(0.02)


def line(  # noqa: PLR0913 - one keyword per request member a test pins
    operation: str,
    payload: object = None,
    *,
    rid: str,
    key: str | None = None,
    client: str = "cli-A",
    run_id: str | None = None,
    revision: int | None = None,
) -> bytes:
    """A canonical client request line."""
    members: dict[str, object] = {
        "clientId": client,
        "idempotencyKey": key or rid,
        "operation": operation,
        "payload": {} if payload is None else payload,
        "requestId": rid,
        "schema": "pi-workflows.client.v1",
        "type": "request",
    }
    if run_id is not None:
        members["runId"] = run_id
    if revision is not None:
        members["expectedRevision"] = revision
    return canonical.encode(members)


def run_start(number: int, *, client: str = "cli-A") -> bytes:
    """``run.start`` of ``run-N`` (``builtin:echo``, origin ``s-N``)."""
    payload = {
        "definitionDigest": "d1",
        "definitionSnapshot": {},
        "input": {"n": number},
        "originSessionId": f"s-{number}",
        "projectPath": "/p",
        "workflowName": "echo",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "workflowSourceRef": "builtin:echo",
    }
    return line("run.start", payload, rid=f"r-{number}", client=client, run_id=f"run-{number}")


class Served:
    """One ``pwf serve`` process over ``db``; its stderr goes to a file beside it."""

    def __init__(self, db: Path, *options: str) -> None:
        """Start the process (with ``options`` after ``--db``) and wait for its hello."""
        self.db = db
        self.socket = socket_path(db)
        self.log = db.with_name(f"serve-{time.monotonic_ns()}.err")
        with self.log.open("wb") as err:
            self.process = subprocess.Popen(
                [PWF, "serve", "--db", str(db), *options], stdout=subprocess.DEVNULL, stderr=err
            )
        deadline = time.monotonic() + START_SECONDS
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError(self.stderr())
            try:
                wait_for_host(self.socket, timeout=0.5).close()
                break
            except HostUnavailableError:
                pass

    def stderr(self) -> str:
        """What the host logged so far."""
        return self.log.read_text(errors="replace")

    def client(self) -> HostClient:
        """A new connection (its hello already checked)."""
        return HostClient.connect(self.socket, timeout=30)

    def terminate(self) -> int:
        """SIGTERM, then wait for the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_SECONDS)

    def kill(self) -> None:
        """SIGKILL and reap."""
        self.process.kill()
        self.process.wait(STOP_SECONDS)

    def close(self) -> None:
        """Make sure the process is gone."""
        if self.process.poll() is None:
            self.kill()


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Rows of a query against the database, read-only."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def pwf(*args: str, stdin: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """Run the ``pwf`` command line as a process."""
    return subprocess.run(
        [PWF, *args], input=stdin, capture_output=True, timeout=timeout, check=False, env=os.environ
    )


def init(db: Path) -> None:
    """Create a state database as ``pwf init`` does, in this process (ADR 0064).

    These tests are about the served host, not the start of ``pwf init``;
    ``test_served_host.py`` still runs ``pwf init`` as a process where the
    socket path's limits are tested, and so does the demo.
    """
    open_store(str(db), create=True).close()


__all__ += ["init", "pwf", "rows", "run_start"]
