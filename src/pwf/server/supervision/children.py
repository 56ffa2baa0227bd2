"""The processes a worker registers as its own, and their end with its epoch (HOST §7.7, §7.11).

An edge room: reads process identities and sends signals.  What a
``process.*`` message may do is decided by :mod:`pwf.commands.processes`
from the facts gathered here; an accepted registration enters the process
registry, and the children of an epoch that ended are killed if they are
still exactly the processes registered.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pwf.commands.processes import ProcessFacts, requested_pid
from pwf.server.supervision.identity import kill_exact, parent_pid, start_identity

if TYPE_CHECKING:
    from pwf.protocol.worker import WorkerMessage
    from pwf.server.supervision.registry import Registry

__all__ = ["Children"]

log = logging.getLogger("pwf.server")


class Children:
    """Each worker epoch's registered child processes and their start identities."""

    def __init__(self, registry: Registry) -> None:
        """No child registered yet; each registration is recorded in ``registry`` too."""
        self.registry = registry
        self.by_epoch: dict[str, dict[int, str | None]] = {}

    def facts(self, worker_pid: int | None, message: WorkerMessage) -> ProcessFacts:
        """What this host knows about the pid a ``process.*`` message names (§7.7)."""
        pid = requested_pid(message.payload)
        owner = None
        if pid is not None:
            owner = next((epoch for epoch, pids in self.by_epoch.items() if pid in pids), None)
        return ProcessFacts(
            worker_pid=worker_pid,
            parent_pid=None if pid is None else parent_pid(pid),
            registered_to=owner,
        )

    def registered(self, message: WorkerMessage) -> None:
        """An accepted registration enters the registry; an unregistration leaves it."""
        pid = requested_pid(message.payload)
        if pid is None:
            return
        owned = self.by_epoch.setdefault(message.worker_epoch, {})
        if message.operation == "process.register":
            identity = start_identity(pid)
            owned[pid] = identity
            if identity is not None:
                self.registry.add(pid, identity)
            return
        owned.pop(pid, None)
        self.registry.remove(pid)
        if not owned:
            self.by_epoch.pop(message.worker_epoch, None)

    def reap(self, worker_epoch: str) -> None:
        """The epoch ended: kill its registered children that are still exactly alive (§7.11)."""
        for pid, identity in self.by_epoch.pop(worker_epoch, {}).items():
            if identity is not None and kill_exact(pid, identity):
                log.info("killed process %d of worker %s", pid, worker_epoch)
            self.registry.remove(pid)
