"""Served ``state.status`` and ``state.verify`` answer as direct mode, off the writer (ADR 0040).

An in-process host with a fixed clock answers through its socket; the same
request decided by direct mode's code on the same file, at the same time,
must give the same response bytes.  ``state.verify`` runs on a read
connection of its own, so a write sent while it runs is answered first.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

import pwf.verify
from pwf.cli._options import open_store
from pwf.host import Host
from pwf.protocol.client import encode_response, parse_request
from pwf.statereaders import overview, verify_failure
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._hosted import AT, Hosted
    from tests.integration._served import line, run_start, short_dir
else:
    from _hosted import AT, Hosted
    from _served import line, run_start, short_dir


@pytest.fixture
def hosted() -> Iterator[Hosted]:
    with short_dir() as directory:
        path = directory / "state.db"
        open_store(str(path), create=True).close()
        host = Hosted(path)
        try:
            yield host
        finally:
            host.close()


def _direct(db: Path, request: bytes) -> bytes:
    """What ``pwf request`` answers to ``request`` on ``db`` at the hosts' time."""
    store = SqliteStore(db, read_only=True)
    try:
        host = Host(store)
        host.verifier = verify_failure  # what pwf request sets
        host.overview = overview
        return encode_response(host.request(parse_request(request), AT))
    finally:
        store.close()


def _checkpointed(db: Path) -> None:
    """Move the log into the file now, so ``sizeBytes`` is the same for both reads.

    The host's checkpoint thread does it on its own time (ADR 0057), which
    could fall between the served read and the direct one.
    """
    connection = sqlite3.connect(db)
    try:
        for _ in range(500):  # until no other checkpoint runs and the whole log is copied
            busy, pages, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if not busy and pages == copied:
                return
            time.sleep(0.01)
        pytest.fail("the log was never wholly checkpointed")
    finally:
        connection.close()


def _served(hosted: Hosted, request: bytes) -> bytes:
    with hosted.client() as client:
        client.send(request)
        return client.response(str(parse_request(request).request_id))[1]


def test_state_status_carries_the_overview_as_direct_mode_does(hosted: Hosted) -> None:
    with hosted.client() as client:
        for number in (1, 2):
            assert client.request(run_start(number))["outcome"] == "accepted"
    _checkpointed(hosted.options.db)
    request = line("state.status", None, rid="status-1")
    served = _served(hosted, request)
    assert b'"overview":{' in served
    assert b'"lifecycleContradictions":0' in served
    assert served == _direct(hosted.options.db, request)


def test_state_verify_is_valid_as_direct_mode_says(hosted: Hosted) -> None:
    with hosted.client() as client:
        assert client.request(run_start(1))["outcome"] == "accepted"
    request = line("state.verify", {"ignored": True}, rid="verify-1")
    served = _served(hosted, request)
    assert b'"receipt":{"valid":true}' in served
    assert served == _direct(hosted.options.db, request)


def test_state_verify_names_a_projection_that_differs_from_the_log(hosted: Hosted) -> None:
    with hosted.client() as client:
        assert client.request(run_start(1))["outcome"] == "accepted"
    connection = sqlite3.connect(hosted.options.db)
    with connection:
        connection.execute("UPDATE runs SET workflow_name = 'edited' WHERE run_id = 'run-1'")
    connection.close()
    request = line("state.verify", None, rid="verify-2")
    served = _served(hosted, request)
    assert b'"outcome":"rejected"' in served
    assert b"Pi Workflows projection runs differs from the log" in served
    assert served == _direct(hosted.options.db, request)


def test_a_write_is_answered_while_state_verify_runs(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verify waits until the write's answer has arrived: on the writer it never would."""
    started, written = threading.Event(), threading.Event()
    real = pwf.verify.verify_failure

    def slow(store: Any) -> str | None:
        started.set()
        assert written.wait(60), "the write was not answered while verify ran"
        return real(store)

    monkeypatch.setattr(pwf.verify, "verify_failure", slow)
    with hosted.client() as client:
        client.send(line("state.verify", None, rid="verify-3"))
        assert started.wait(60)
        answer = client.request(run_start(7))
        assert answer["outcome"] == "accepted"
        written.set()
        verdict, _ = client.response("verify-3")
    assert verdict["outcome"] == "accepted"
    assert verdict["receipt"] == {"valid": True}
