"""A polite client's latency beside a flood, against its latency alone (ADR 0074).

Each round starts ``pwf serve`` on a fresh database with a 3 s lease renewed
every second.  The polite client sends one ``host.status`` at a time, every
20 ms, for the round's seconds, first alone and then beside eight connections
that pipeline ``run.list`` requests as fast as their sockets take them (four
read their answers, four never do).  It prints the polite client's p50 and
p99 in both conditions and their ratios, the flooders' answered requests per
second, and whether the host kept its claim.  A ratio, never a timed test:
the flood's eight connections each hold at most 64 unanswered requests, so
the polite request waits behind at most that many decisions per flooder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Final

from pwf import canonical
from pwf.client import HostClient, HostUnavailableError, socket_path, wait_for_host

__all__ = ["main", "run"]

PWF: Final = str(Path(sys.executable).with_name("pwf"))
FLOODERS: Final = 8


def _line(client: str, number: int, operation: str) -> bytes:
    return canonical.encode(
        {
            "clientId": client,
            "idempotencyKey": f"{client}-{number}",
            "operation": operation,
            "payload": {},
            "requestId": f"{client}-{number}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


def _flood(path: Path, number: int, stop: threading.Event, answered: list[int]) -> None:
    """Pipeline ``run.list`` until ``stop``; even numbers read their answers."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(0.5)
        sock.connect(str(path))
        if number % 2 == 0:

            def read() -> None:
                with contextlib.suppress(OSError):
                    while not stop.is_set():
                        try:
                            data = sock.recv(1 << 16)
                        except TimeoutError:
                            continue
                        if not data:
                            return
                        answered[number] += data.count(b"\n")

            threading.Thread(target=read, daemon=True).start()
        sent = 0
        while not stop.is_set():
            chunk = memoryview(
                b"".join(_line(f"flood-{number}", sent + i, "run.list") + b"\n" for i in range(256))
            )
            while chunk and not stop.is_set():
                try:
                    chunk = chunk[sock.send(chunk) :]
                except TimeoutError:
                    continue
            sent += 256


def _polite(path: Path, seconds: float, tag: str) -> list[float]:
    latencies: list[float] = []
    with HostClient.connect(path, timeout=30) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            answer = client.request(_line(f"polite-{tag}", len(latencies), "host.status"))
            latencies.append(time.perf_counter() - started)
            if answer["outcome"] != "accepted":
                raise SystemExit(f"the polite client was answered {answer}")
            time.sleep(0.02)
    return latencies


def _round(seconds: float) -> tuple[list[float], list[float], float, bool]:
    with tempfile.TemporaryDirectory(prefix="pwf-", dir="/tmp") as scratch:
        db = Path(scratch) / "state.db"
        subprocess.run([PWF, "init", "--db", str(db)], check=True, capture_output=True)
        env = {**os.environ, "PWF_LEASE_MS": "3000", "PWF_HEARTBEAT_MS": "1000"}
        host = subprocess.Popen(
            [PWF, "serve", "--db", str(db)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            path = socket_path(db)
            deadline = time.monotonic() + 60
            while True:
                try:
                    wait_for_host(path, timeout=0.5).close()
                    break
                except HostUnavailableError:
                    if time.monotonic() > deadline or host.poll() is not None:
                        raise
            alone = _polite(path, seconds, "alone")
            stop = threading.Event()
            answered = [0] * FLOODERS
            flooders = [
                threading.Thread(target=_flood, args=(path, n, stop, answered), daemon=True)
                for n in range(FLOODERS)
            ]
            for flooder in flooders:
                flooder.start()
            time.sleep(0.5)
            beside = _polite(path, seconds, "beside")
            stop.set()
            for flooder in flooders:
                flooder.join(10)
            held = host.poll() is None
            host.send_signal(signal.SIGTERM)
            _, err = host.communicate(timeout=60)
            held = held and b"claim lost" not in err
            return alone, beside, sum(answered) / (seconds + 0.5), held
        finally:
            if host.poll() is None:
                host.kill()
                host.wait()


def _p(values: list[float], share: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(share * 100) - 1]


def run(rounds: int = 3, seconds: float = 10.0) -> list[str]:
    """Lines of the report: per round, then the medians of the rounds."""
    lines = [
        (
            f"flood: a polite client's host.status every 20 ms, alone and beside {FLOODERS}"
            " pipelining run.list connections (3 s lease)"
        )
    ]
    p50s, p99s = [], []
    for number in range(rounds):
        alone, beside, rate, held = _round(seconds)
        a50, a99, b50, b99 = _p(alone, 0.5), _p(alone, 0.99), _p(beside, 0.5), _p(beside, 0.99)
        p50s.append(b50 / a50)
        p99s.append(b99 / a99)
        lines.append(
            f"  round {number + 1}: alone p50 {a50 * 1000:.2f} ms p99 {a99 * 1000:.2f} ms;"
            f" beside the flood p50 {b50 * 1000:.2f} ms p99 {b99 * 1000:.2f} ms"
            f" ({len(beside)} answers); flood answered {rate:.0f}/s;"
            f" claim {'held' if held else 'LOST'}"
        )
    lines.append(
        f"  beside / alone (median of {rounds}): p50 {statistics.median(p50s):.1f} x,"
        f" p99 {statistics.median(p99s):.1f} x"
    )
    return lines


def main() -> None:
    """``python bench/bench_flood.py [ROUNDS [SECONDS]]``."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    for line in run(rounds, seconds):
        print(line, flush=True)


if __name__ == "__main__":
    main()
