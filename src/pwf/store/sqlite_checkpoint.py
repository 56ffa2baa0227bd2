"""Checkpoints of a busy SQLite log on a thread of their own; imports nothing of pwf (an edge room).

A write-ahead log is moved into the database file by a checkpoint.  By
default SQLite runs one inside the commit that takes the log past 1 000
pages: the committing writer copies the pages and waits for two more
``fsync`` calls, and every request of that commit waits with it.
:class:`Checkpointer` runs passive checkpoints (they never take the write
lock, so the writer carries on meanwhile) on its own connection and thread,
woken by the writer's commits and at most once per :data:`PERIOD_SECONDS`;
SQLite releases the interpreter lock while it checkpoints, so the writer's
Python keeps running.  The writer's own automatic checkpoint stays, at
:data:`BOUND_PAGES`, as the bound on the log's growth when this thread falls
behind (ADR 0057).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["BOUND_PAGES", "PERIOD_SECONDS", "Checkpointer"]

log = logging.getLogger("pwf.store")

PERIOD_SECONDS: Final = 0.2
"""At most one round of checkpoints this often, so their ``fsync`` calls stay few."""
BOUND_PAGES: Final = 8_192
"""The writer checkpoints itself once the log holds this many pages (32 MiB of 4 KiB pages)."""
_ROUNDS: Final = 3
"""A round checkpoints again while commits landed during the last one (at most this often),
so the log is often wholly in the file when the writer begins, and SQLite starts it over."""


class Checkpointer:
    """A thread that runs passive checkpoints of one database file after its commits."""

    def __init__(self, path: Path, synchronous: int) -> None:
        """Open the thread's connection (read-write, ``synchronous`` as the writer's) and start it.

        Raises:
            sqlite3.Error: the file could not be opened.
        """
        self._wake = threading.Event()
        self._closing = threading.Event()
        self.observe: Callable[[str], None] | None = None
        """A metrics hook, told ``"round"`` as each checkpoint round starts (tests count them)."""
        connection = sqlite3.connect(
            f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None, check_same_thread=False
        )
        connection.execute(f"PRAGMA synchronous = {int(synchronous)}")
        self._connection = connection
        self._thread = threading.Thread(target=self._run, name="pwf-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """The writer committed: checkpoint soon."""
        self._wake.set()

    def close(self) -> None:
        """Stop the thread (after the round in progress) and close its connection."""
        self._closing.set()
        self._wake.set()
        self._thread.join()
        self._connection.close()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._closing.is_set():
                return
            self._wake.clear()
            self._round()
            if self._closing.wait(PERIOD_SECONDS):
                return

    def _round(self) -> None:
        """Checkpoint until the log is wholly in the file, or :data:`_ROUNDS` times."""
        observe = self.observe
        if observe is not None:
            observe("round")
        for _ in range(_ROUNDS):
            try:
                busy, pages, copied = self._connection.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)"
                ).fetchone()
            except sqlite3.Error as error:  # the writer's own checkpoint is the fallback
                log.info("background checkpoint failed: %s", error)
                return
            if busy or pages <= copied:
                return
