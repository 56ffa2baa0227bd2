"""Plain helpers of the web view's tests: ``pwf web`` in its own process, and GET (no fixtures)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "web"
"""Where the browser tests write their screenshots (ignored by git)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serve(db: Path, *extra: str) -> Iterator[str]:
    """``pwf web --db DB`` in its own process until the block ends; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "pwf", "web", "--db", str(db), "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PWF_DB": ""},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/runs", timeout=5):  # noqa: S310 - our own server
                    break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    error = process.stderr.read().decode() if process.stderr else ""
                    pytest.fail(f"pwf web did not start: {error}")
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


def get(url: str) -> tuple[int, dict[str, str], str]:
    """GET ``url``: status, headers and the body as text (error statuses too)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - our own server
            return response.status, _lower(response.headers.items()), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers.items()), error.read().decode()


def _lower(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers}
