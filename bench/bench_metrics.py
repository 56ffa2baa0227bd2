"""What ``pwf serve --metrics`` costs the host: processor time per request, with and without.

Each round starts two hosts on fresh databases, one plain and one with
``--metrics 127.0.0.1:0`` (scraped once a second, far more often than
Prometheus's default of 15 s, so each scrape's cost counts), and sends them
blocks of requests in turn, the order alternating, so that both meet the
same machine.  One connection per block sends ``run.start`` requests
(recorded, durable at ``synchronous=FULL``), keeping :data:`WINDOW` of them
unanswered so that groups form and the host's own work per request is
small: the metrics' share of it is then at its largest.  The host's
processor time (``/proc``: user and system, all its threads) over its
blocks, divided by their requests, is its cost per request; the report
gives each side's median and the median of the rounds' ratios (with
metrics / without).  Never pass/fail: the figure is a ratio, not a timing.
"""

from __future__ import annotations

import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_serve import PWF, _cpu_seconds, _init, _line, _template

from pwf.client import HostClient, socket_path, wait_for_host

__all__ = ["main", "run"]

WINDOW: Final = 32
"""Requests kept unanswered on the one connection."""
BLOCKS: Final = 12
"""Turns each host takes in a round."""
SCRAPE_SECONDS: Final = 1.0
START_SECONDS: Final = 60.0


def _metrics_url(log: Path) -> str:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        found = re.search(r"metrics on (\S+)", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise RuntimeError(f"no metrics URL in {log}")


def _send(db: Path, first: int, requests: int) -> None:
    """``run.start`` of runs ``first + 1`` on, ``requests`` of them, :data:`WINDOW` unanswered."""
    template = _template("metrics")
    last = first + requests
    with HostClient.connect(socket_path(db), timeout=60) as client:
        sent = answered = first
        while answered < last:
            while sent < last and sent - answered < WINDOW:
                sent += 1
                client.send(_line(template, sent))
            answered += 1
            answer = client.response(f"r-{answered}")[0]
            if answer["outcome"] != "accepted":
                raise RuntimeError(str(answer))


def _scrape(url: str, stop: threading.Event, scrapes: list[int]) -> None:
    while not stop.wait(SCRAPE_SECONDS):
        with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 - loopback http
            answer.read()
        scrapes.append(1)


class _Host:
    """One ``pwf serve`` process on a fresh database, scraped once a second with metrics."""

    def __init__(self, workdir: Path, name: str, *, metrics: bool) -> None:
        self.db = workdir / name / "state.db"
        self.db.parent.mkdir()
        _init(self.db)
        log = self.db.with_name("host.err")
        options = ["--metrics", "127.0.0.1:0"] if metrics else []
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                [PWF, "serve", "--db", str(self.db), *options],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.stop = threading.Event()
        self.scrapes: list[int] = []
        self.scraper: threading.Thread | None = None
        self.sent = 0
        self.cpu = 0.0
        wait_for_host(socket_path(self.db), timeout=START_SECONDS).close()
        if metrics:
            url = _metrics_url(log)
            self.scraper = threading.Thread(target=_scrape, args=(url, self.stop, self.scrapes))
            self.scraper.start()

    def block(self, requests: int) -> None:
        """Send ``requests`` more and add the host's processor time over them."""
        before = _cpu_seconds(self.process.pid)
        _send(self.db, self.sent, requests)
        after = _cpu_seconds(self.process.pid)
        if before is None or after is None:
            raise RuntimeError("no /proc: the host's processor time cannot be read")
        self.sent += requests
        self.cpu += after - before

    def close(self) -> None:
        """Stop scraping, stop the host."""
        self.stop.set()
        if self.scraper is not None:
            self.scraper.join()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(120)


def run(rounds: int = 5, requests: int = 6000) -> list[str]:
    """Report lines: host CPU per request without and with ``--metrics``, and their ratio.

    In each round both hosts run at once and take turns, :data:`BLOCKS` blocks
    of ``requests / BLOCKS`` each, so the machine's load changes both alike.
    """
    workdir = Path(tempfile.mkdtemp(prefix="pwf-bench-", dir="/tmp"))
    plain: list[float] = []
    measured: list[float] = []
    ratios: list[float] = []
    scrapes = 0
    try:
        for round_no in range(rounds):
            hosts = {
                metrics: _Host(workdir, f"{metrics}-{round_no}", metrics=metrics)
                for metrics in (False, True)
            }
            try:
                for block in range(BLOCKS):
                    order = (False, True) if (round_no + block) % 2 == 0 else (True, False)
                    for metrics in order:
                        hosts[metrics].block(requests // BLOCKS)
            finally:
                for host in hosts.values():
                    host.close()
            if not hosts[True].scrapes:
                raise RuntimeError("the metrics endpoint was never scraped")
            scrapes += len(hosts[True].scrapes)
            costs = {metrics: host.cpu * 1000 / host.sent for metrics, host in hosts.items()}
            plain.append(costs[False])
            measured.append(costs[True])
            ratios.append(costs[True] / costs[False])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [
        (
            f"served host with --metrics (scraped every {SCRAPE_SECONDS:g} s, {scrapes} scrapes),"
            f" {requests} run.start requests per host over one connection, {WINDOW} unanswered,"
            f" {rounds} rounds:"
        ),
        f"  host CPU without --metrics  {statistics.median(plain):.3f} ms/request (median)",
        f"  host CPU with --metrics     {statistics.median(measured):.3f} ms/request (median)",
        (
            f"  with / without  {statistics.median(ratios):.3f}"
            f"  [{min(ratios):.3f}-{max(ratios):.3f}] (median of per-round ratios)"
        ),
    ]


def main() -> int:
    """Run the metrics-cost benchmark from the command line."""
    quick = "--quick" in sys.argv
    for line in run(3 if quick else 5, 3000 if quick else 6000):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
