"""A long served log, made by consecutive hosts, and the whole-log verbs run over it.

``python bench/served_log.py DB [--hosts 6] [--requests 2100]`` starts ``pwf
serve`` on DB ``--hosts`` times in a row (a 5 s lease, a 200 ms heartbeat, so
renewals land between the answers), sends each ``--requests`` ``run.start``
requests of new runs on one connection, and stops it with SIGTERM.  Each run
start writes two events, so six hosts of 2 100 requests write about 25 000
events, past every split threshold of the whole-log walkers.  Then it runs
``pwf log verify``, ``pwf verify``, ``pwf rebuild`` and ``pwf replay --until``
the head over the log, and prints each verb's exit code, wall time and
output's last line.  It is how the split fold's fault with served logs was
reproduced and its fix checked at full size (ADR 0074); no timing is judged.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from pwf import canonical
from pwf.client import HostClient, HostUnavailableError, socket_path, wait_for_host

__all__ = ["main"]

PWF: Final = str(Path(sys.executable).with_name("pwf"))


def _start(number: int) -> bytes:
    return canonical.encode(
        {
            "clientId": "bench",
            "idempotencyKey": f"k-{number}",
            "operation": "run.start",
            "payload": {
                "definitionDigest": "d1",
                "definitionSnapshot": {},
                "input": {"n": number},
                "originSessionId": f"s-{number}",
                "projectPath": "/p",
                "workflowName": "echo",
                "workflowSource": {"id": "echo", "kind": "builtin", "revision": "bench"},
                "workflowSourceRef": "builtin:echo",
            },
            "requestId": f"r-{number}",
            "runId": f"run-{number}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


def _host(db: Path, first: int, count: int) -> None:
    env = {**os.environ, "PWF_LEASE_MS": "5000", "PWF_HEARTBEAT_MS": "200"}
    process = subprocess.Popen([PWF, "serve", "--db", str(db)], env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                wait_for_host(socket_path(db), timeout=0.5).close()
                break
            except HostUnavailableError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
        with HostClient.connect(socket_path(db), timeout=60) as client:
            for number in range(first, first + count):
                answer = client.request(_start(number))
                if answer["outcome"] != "accepted":
                    raise SystemExit(f"run-{number}: {answer}")
        process.send_signal(signal.SIGTERM)
        if process.wait(60) != 0:
            raise SystemExit(f"pwf serve exited {process.returncode}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _verb(*args: str) -> None:
    started = time.monotonic()
    done = subprocess.run([PWF, *args], capture_output=True, text=True, check=False)
    lines = (done.stdout + done.stderr).strip().splitlines() or [""]
    print(f"pwf {args[0]} {args[1] if args[0] == 'log' else ''}".rstrip(), end="")
    print(f": exit {done.returncode}, {time.monotonic() - started:.1f} s: {lines[-1][:120]}")


def main() -> None:
    """Make the log (unless it exists), then run the whole-log verbs over it."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("db", type=Path)
    parser.add_argument("--hosts", type=int, default=6)
    parser.add_argument("--requests", type=int, default=2100)
    args = parser.parse_args()
    db: Path = args.db.absolute()
    if not db.exists():
        subprocess.run([PWF, "init", "--db", str(db)], check=True, capture_output=True)
        started = time.monotonic()
        for host in range(args.hosts):
            _host(db, host * args.requests + 1, args.requests)
        print(
            f"{args.hosts} hosts x {args.requests} requests in {time.monotonic() - started:.0f} s"
        )
    _verb("log", "verify", "--db", str(db))
    _verb("verify", "--db", str(db))
    _verb("rebuild", "--db", str(db))
    with tempfile.TemporaryDirectory() as scratch:
        head = subprocess.run(
            [PWF, "log", "head", "--db", str(db)], capture_output=True, text=True, check=True
        ).stdout.split(":")[0]
        _verb("replay", "--db", str(db), "--until", head, "--out", str(Path(scratch) / "r.db"))


if __name__ == "__main__":
    main()
