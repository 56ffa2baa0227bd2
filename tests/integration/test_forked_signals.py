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
import time

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
