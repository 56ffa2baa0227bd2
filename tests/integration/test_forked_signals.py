"""A forked process's signals are its own, never its caller's event loop's.

``pwf serve`` runs an event loop whose signal handlers have Python write
each signal's number to the loop's wakeup socket.  A process the host forks
(a state.verify's chain walk or split fold) inherited that socket, so the
``SIGTERM`` with which :meth:`pwf._process.Forked.close` ends one still
running reached the host's loop as its own, and the host stopped: four
clients pipelining ``state.verify`` stopped a served host within a second.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pwf._process import Forked


def _fork_and_close() -> float:
    """Fork a process that sleeps, end it while it runs; how long the end took."""
    forked = Forked(time.sleep, 30)
    time.sleep(0.3)  # it runs
    started = time.monotonic()
    forked.close()
    return time.monotonic() - started


def test_ending_a_forked_process_signals_nothing_to_the_callers_loop() -> None:
    async def serve() -> tuple[list[str], float]:
        loop = asyncio.get_running_loop()
        received: list[str] = []
        loop.add_signal_handler(signal.SIGTERM, received.append, "SIGTERM")
        try:
            # Forked from a worker thread, as a served host's state reads fork.
            took = await asyncio.to_thread(_fork_and_close)
            await asyncio.sleep(0.3)  # a signal written to the wakeup socket is read by now
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
        return received, took

    received, took = asyncio.run(serve())
    assert received == []
    assert took < 10  # SIGTERM ends it, rather than a handler it inherited ignoring it


_CALLER = """
import os, sys, time
from pathlib import Path
from pwf._process import Forked

def share(path):
    Path(path).write_text(str(os.getpid()))
    time.sleep(60)  # a share of a fold that nobody will take

forked = Forked(share, sys.argv[1])
time.sleep(60)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="a forked process's end is tied on Linux")
def test_a_forked_process_ends_when_its_caller_is_killed(tmp_path: Path) -> None:
    """A caller killed by SIGKILL runs no clean-up; its forked share must not run on.

    Before, a ``pwf rebuild`` killed half way left its forked process folding
    its half of a million-event log for seconds more, into a part file no one
    would merge.
    """
    pid_file = tmp_path / "forked.pid"
    caller = subprocess.Popen([sys.executable, "-c", _CALLER, str(pid_file)])
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the forked process never started"
            time.sleep(0.05)
        forked = int(pid_file.read_text())
        assert _running(forked)
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        deadline = time.monotonic() + 10
        while _running(forked):
            assert time.monotonic() < deadline, "the forked process outlived its caller"
            time.sleep(0.05)
    finally:
        caller.kill()
        caller.wait()
