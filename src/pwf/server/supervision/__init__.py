"""The worker processes of a served host: one room for supervising them (HOST §1.6, §7).

An edge room: it starts processes, reads their pipes, reads ``/proc`` and
sends signals; what happens to a run is decided by the command path
(:mod:`pwf.commands.supervision` and :mod:`pwf.commands.processes`, run
through :mod:`pwf.host`), never here.  Its modules, one per job:

- :mod:`.supervisor`: which runs get a worker, and each worker's life as the
  log records it (claim, spawn, answer, renew, stop, recover);
- :mod:`.process`: one worker process, its pipes and its end;
- :mod:`.backoff`: runs whose workers keep crashing wait longer for their next claim;
- :mod:`.stderr`: what a worker writes on stderr, forwarded to the log within a budget;
- :mod:`.children`: the processes a worker registers as its own;
- :mod:`.registry`: ``host.children.json`` and orphan reaping;
- :mod:`.identity`: which process a pid is (start identity, parent, exact kill).
"""

from __future__ import annotations

from pwf.server.supervision.identity import start_identity
from pwf.server.supervision.process import STARTUP_SECONDS, Exit, WorkerProcess
from pwf.server.supervision.registry import REGISTRY_SCHEMA, Registry, reap_orphans
from pwf.server.supervision.supervisor import Active, Supervisor

__all__ = [
    "REGISTRY_SCHEMA",
    "STARTUP_SECONDS",
    "Active",
    "Exit",
    "Registry",
    "Supervisor",
    "WorkerProcess",
    "reap_orphans",
    "start_identity",
]
