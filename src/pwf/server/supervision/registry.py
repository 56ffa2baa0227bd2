"""``host.children.json``: the processes a host started, for the next host to reap (HOST §1.6).

An edge room: writes and reads one file and sends signals.  The registry
holds the pid and start identity of every live worker process and of every
child a worker registered; a host that starts after an unclean exit kills
the process group of each one that is still exactly alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from typing import TYPE_CHECKING, Final

from pwf.private import read_object
from pwf.server.supervision.identity import alive

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["REGISTRY_SCHEMA", "Registry", "reap_orphans"]

REGISTRY_SCHEMA: Final = "pi-workflows.process-registry.v1"


class Registry:
    """``host.children.json``: the pid and start identity of every live worker process."""

    def __init__(self, path: Path) -> None:
        """Name the file; it is written on the first change."""
        self.path = path
        self.processes: dict[int, str] = {}

    def add(self, pid: int, identity: str) -> None:
        """Record a started process."""
        self.processes[pid] = identity
        self._write()

    def remove(self, pid: int) -> None:
        """Forget a process that ended."""
        if self.processes.pop(pid, None) is not None:
            self._write()

    def _write(self) -> None:
        """Sorted by pid, through a temporary file and a rename, mode 0600."""
        content = {
            "processes": [
                {"pid": pid, "startIdentity": identity}
                for pid, identity in sorted(self.processes.items())
            ],
            "schema": REGISTRY_SCHEMA,
        }
        scratch = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        descriptor = os.open(scratch, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(content, separators=(",", ":"), sort_keys=True) + "\n")
        scratch.replace(self.path)


def reap_orphans(path: Path) -> int:
    """SIGKILL the process group of every recorded child that is still exactly alive (§1.6)."""
    registry = read_object(path)
    if registry is None or registry.get("schema") != REGISTRY_SCHEMA:
        return 0
    processes = registry.get("processes")
    reaped = 0
    for item in processes if isinstance(processes, list) else []:
        if isinstance(item, dict) and alive(item.get("pid"), item.get("startIdentity")):
            with contextlib.suppress(OSError):
                os.killpg(int(item["pid"]), signal.SIGKILL)
                reaped += 1
    return reaped
