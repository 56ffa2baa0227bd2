"""``pwf serve --metrics``: Prometheus metrics and ``/healthz`` of a real served host (ADR 0076).

A host process is started with ``--metrics 0`` (a free loopback port, read
from its log), a scripted session is sent over its socket, and its
``/metrics`` are scraped and checked against the log it wrote.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pwf.errors import InputError
from pwf.projections.host_commands import OPERATIONS
from pwf.server.metrics import MOST_SCRAPES, SCRAPE_SECONDS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration._served import Served, init, line, pwf, rows, run_start, short_dir, until
else:
    from _served import Served, init, line, pwf, rows, run_start, short_dir, until

pytestmark = pytest.mark.slow

QUIET = ("--lease-ms", "600000", "--heartbeat-ms", "300000")
"""Timers that append nothing while a test compares a scrape with the log."""


@pytest.fixture
def db() -> Iterator[Path]:
    """A fresh state database in a short directory."""
    with short_dir() as directory:
        path = directory / "state.db"
        init(path)
        yield path


def _url(served: Served) -> str:
    found = until(lambda: re.search(r"metrics on (\S+)", served.stderr()), what="the metrics URL")
    return str(found.group(1))


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 - loopback http
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def _samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = _get(url)
    assert status == 200, text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _head(db: Path) -> int:
    found = rows(db, "SELECT seq FROM _pwf_head")
    return int(found[0][0]) if found else 0


def test_a_scrape_after_a_session_agrees_with_the_log(db: Path) -> None:
    served = Served(db, "--metrics", "0", *QUIET)
    try:
        url = _url(served)
        assert url.startswith("http://127.0.0.1:"), url
        assert "warning" not in served.stderr()
        with served.client() as client:
            for number in range(1, 5):
                assert client.request(json.loads(run_start(number)))["outcome"] == "accepted"
            again = json.loads(run_start(1))
            again["requestId"], again["idempotencyKey"] = "r-again", "k-again"
            client.request(again)  # run-1 exists: answered other than accepted
            client.request(json.loads(line("run.cancel", rid="r-cancel", run_id="run-none")))
            client.request(json.loads(line("host.status", rid="r-status")))
            watched = client.request(
                json.loads(line("view.runs.watch", {"subscriptionId": "w-1"}, rid="r-watch"))
            )
            assert watched["outcome"] == "accepted", watched
            pushed = next(client.events(timeout=30))
            assert pushed["event"] == "runs", pushed

            samples = _samples(url)
            recorded = {
                (operation, outcome): count
                for operation, outcome, count in rows(
                    db,
                    "SELECT operation, outcome, count(*) FROM host_commands"
                    " GROUP BY operation, outcome",
                )
            }
            scraped = {
                (labels[0][1], labels[1][1]): int(value)
                for (name, labels), value in samples.items()
                if name == "pwf_requests_total" and labels[0][1] in OPERATIONS
            }
            assert scraped == recorded
            assert len({outcome for _, outcome in recorded}) >= 3, recorded
            watch = (("operation", "view.runs.watch"), ("outcome", "accepted"))
            assert samples["pwf_requests_total", watch] == 1
            assert samples["pwf_request_duration_seconds_count", (watch[0],)] == 1
            assert samples["pwf_log_head_seq", ()] == _head(db)
            assert samples["pwf_connections", ()] == 1
            assert samples["pwf_connection_unanswered_requests", ()] == 0
            assert samples["pwf_connections_refused_total", ()] == 0
            assert samples["pwf_subscriptions", (("kind", "runs"),)] == 1
            assert samples["pwf_subscription_pushes_total", (("kind", "runs"),)] >= 1
            assert samples["pwf_subscription_recompute_seconds_total", ()] > 0
            assert samples["pwf_commit_group_size_count", ()] >= 1
            assert samples["pwf_commit_duration_seconds_count", ()] >= 1
            assert samples["pwf_log_bytes", ()] > 0
            assert 500 < samples["pwf_host_lease_remaining_seconds", ()] <= 600
            [(epoch,)] = rows(db, "SELECT epoch FROM host_state")
            assert samples["pwf_host_epoch", ()] == epoch
            assert samples["pwf_workers", (("state", "running"),)] == 0
            assert _get(url.replace("/metrics", "/healthz"))[0] == 200
        assert served.terminate() == 0
    finally:
        served.close()


def test_healthz_turns_503_when_the_claim_is_lost(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write lock held from outside: the heartbeat cannot renew and the lease runs out."""
    monkeypatch.setenv("PWF_BUSY_TIMEOUT_MS", "120000")
    served = Served(db, "--metrics", "0", "--lease-ms", "1500", "--heartbeat-ms", "300")
    try:
        health = _url(served).replace("/metrics", "/healthz")
        status, text = _get(health)
        assert status == 200, text
        assert text.startswith("ok: epoch 1, lease ")
        holder = sqlite3.connect(db, timeout=60, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            status, text = until(lambda: (found := _get(health))[0] == 503 and found, what="a 503")
            assert text.startswith("unhealthy: the host claim was lost: its lease ran out"), text
            assert text.count("\n") == 1
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert served.process.wait(60) == 3
        assert "host claim lost" in served.stderr()
    finally:
        served.close()


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^Threads:\s+(\d+)", status, re.MULTILINE).group(1))  # type: ignore[union-attr]


@pytest.mark.skipif(sys.platform != "linux", reason="threads are counted in /proc")
def test_idle_connections_hold_neither_the_hosts_threads_nor_its_scrapes(db: Path) -> None:
    """Before, each idle connection to the endpoint held a host thread for good (ADR 0110)."""
    served = Served(db, "--metrics", "0", *QUIET)
    try:
        url = _url(served)
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        before = _threads(served.process.pid)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(200)]
        try:
            # Past the bound a connection is closed at once; the first ones wait for bytes.
            assert idle[-1].recv(1) == b""
            assert _threads(served.process.pid) <= before + MOST_SCRAPES
            # Each of those is closed once it has sent nothing for SCRAPE_SECONDS.
            started = time.monotonic()
            assert idle[0].recv(1) == b""
            assert time.monotonic() - started < SCRAPE_SECONDS + 5
        finally:
            for connection in idle:
                connection.close()
        until(lambda: _threads(served.process.pid) <= before, 30, "the threads to end")
        assert _samples(url)["pwf_connections", ()] == 0
    finally:
        served.close()


def test_without_the_extra_serve_says_how_to_install_it_and_appends_nothing(
    db: Path, tmp_path: Path
) -> None:
    shim = tmp_path / "shim" / "prometheus_client"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    before = _head(db)
    done = subprocess.run(
        [sys.executable, "-m", "pwf", "serve", "--db", str(db), "--metrics", "0"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(shim.parent)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    error = done.stderr.decode()
    assert error.count("\n") == 1, error
    assert "pwf serve --metrics needs the metrics extra: pip install '" in error
    assert "[metrics]'" in error
    assert _head(db) == before
    assert not (db.parent / "host" / "host.lock.json").exists()
    assert not (db.parent / "host" / "host.sock").exists()


def test_metrics_listen_on_loopback_unless_told_and_warn_otherwise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pwf.cli.serve import _metrics_address  # noqa: PLC0415

    assert _metrics_address("9464") == ("127.0.0.1", 9464)
    assert _metrics_address("localhost:0") == ("localhost", 0)
    assert _metrics_address("[::1]:9464") == ("::1", 9464)
    assert capsys.readouterr().err == ""
    assert _metrics_address("0.0.0.0:9464") == ("0.0.0.0", 9464)  # noqa: S104 - parsed only
    assert capsys.readouterr().err.startswith("warning: the metrics endpoint has no authentication")


@pytest.mark.parametrize("text", ["", "x", "host:", "1:2:3", "70000", "127.0.0.1:port"])
def test_a_bad_metrics_address_is_bad_input(text: str) -> None:
    from pwf.server.metrics import parse_address  # noqa: PLC0415

    if not text:
        from pwf.cli.serve import _metrics_address  # noqa: PLC0415

        assert _metrics_address(text) is None
        return
    with pytest.raises(InputError, match="--metrics"):
        parse_address(text)


def test_a_missing_extra_is_found_before_anything_starts(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util  # noqa: PLC0415

    from pwf.cli.serve import _metrics_address  # noqa: PLC0415

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "prometheus_client" else real(name, *rest),
    )
    with pytest.raises(InputError, match=r"needs the metrics extra: pip install '.+\[metrics\]'"):
        _metrics_address("0")
    done = pwf("serve", "--db", str(db), "--metrics", "bad:port")
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1


def test_a_host_without_metrics_never_imports_the_library(db: Path) -> None:
    """Start-up is unchanged without ``--metrics``: ``prometheus_client`` stays unloaded."""
    log = db.with_name("importtime.err")
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "pwf", "serve", "--db", str(db)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        until(lambda: "ready on" in log.read_text(errors="replace"), what="the host")
        process.terminate()
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
    imported = {
        entry.rsplit("|", 1)[1].strip()
        for entry in log.read_text(errors="replace").splitlines()
        if entry.startswith("import time:") and "|" in entry
    }
    assert "pwf.server" in imported
    assert not {name for name in imported if name.split(".")[0] == "prometheus_client"}
    assert "pwf.server.metrics" not in imported
    assert "http.server" not in imported


def test_worker_exits_are_counted_as_the_log_records_them(db: Path) -> None:
    """The reference worker ends its epoch with ``run.finished``: the log says ``exited``."""
    command = f"{sys.executable} -m pwf worker run"
    served = Served(db, "--metrics", "0", "--worker-command", command, *QUIET)
    try:
        url = _url(served)
        with served.client() as client:
            for number in (1, 2):
                payload = {
                    "definitionDigest": "d1", "definitionSnapshot": {}, "input": {"n": number},
                    "originSessionId": f"s-{number}", "projectPath": str(db.parent),
                    "workflowName": "echo", "workflowSourceRef": "builtin:echo",
                    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
                }  # fmt: skip
                started = client.request(
                    json.loads(
                        line("run.start", payload, rid=f"s-{number}", run_id=f"run-{number}")
                    )
                )
                assert started["outcome"] == "accepted", started

        def exits() -> dict[str, float]:
            return {
                labels[0][1]: value
                for (name, labels), value in _samples(url).items()
                if name == "pwf_worker_exits_total"
            }

        counted = until(lambda: sum(exits().values()) >= 2 and exits(), what="two worker exits")
        shown = pwf("log", "show", "--db", str(db), "--type", "worker.ended", "--json")
        recorded: dict[str, float] = {}
        for entry in shown.stdout.decode().splitlines():
            status = json.loads(entry)["data"]["status"]
            recorded[status] = recorded.get(status, 0) + 1
        assert counted == recorded == {"exited": 2}
        samples = _samples(url)
        assert sum(value for (name, _), value in samples.items() if name == "pwf_workers") == 0
        assert served.terminate() == 0
    finally:
        served.close()
