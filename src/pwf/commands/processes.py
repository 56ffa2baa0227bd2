"""``process.register`` and ``process.unregister``: a worker's own child processes (HOST §7.7).

Imports commands.  A supervised worker registers a child it started, so
the host kills it when the worker's epoch ends and reaps it after an
unclean host exit.  Whether the pid is the worker's direct child and which
epoch holds it are facts of processes that only the supervising host
knows; it reads them before the decision and passes them in as
:class:`ProcessFacts`.  Without them (direct mode, where no host process
supervises the worker) no pid is a child of the worker and none is
registered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from pwf.commands import Result, refuse
from pwf.commands.runs import queue_of

if TYPE_CHECKING:
    from pwf.commands import Context
    from pwf.protocol.worker import WorkerMessage

__all__ = ["PROCESS_OPERATIONS", "ProcessFacts", "process_operation", "requested_pid"]

PROCESS_OPERATIONS: Final = frozenset({"process.register", "process.unregister"})
_MAX_SAFE: Final = 2**53 - 1


class ProcessFacts(NamedTuple):
    """What the supervising host knows about the pid a message names."""

    worker_pid: int | None
    """The pid of the worker process that sent the message."""
    parent_pid: int | None
    """The parent of the named pid, or None when it is not running."""
    registered_to: str | None
    """The worker epoch the named pid is registered to, or None."""


NO_FACTS: Final = ProcessFacts(worker_pid=None, parent_pid=None, registered_to=None)


def requested_pid(payload: object) -> int | None:
    """The positive pid a process message names, or None when it names none."""
    pid = payload.get("pid") if isinstance(payload, dict) else None
    return pid if type(pid) is int and 0 < pid <= _MAX_SAFE else None


def process_operation(
    ctx: Context, message: WorkerMessage, facts: ProcessFacts | None = None
) -> Result:
    """Decide one ``process.*`` message in the original's order; the answer is ``{pid}``.

    ``process.register`` needs the run's live claim (``claimLost`` ``Run
    claim expired`` otherwise); neither checks the run revision.

    Raises:
        CommandError: the payload or the pid is not acceptable (the original's texts).
    """
    known = facts or NO_FACTS
    register = message.operation == "process.register"
    if register:
        queue = queue_of(ctx, message.run_id)
        if (
            queue is None
            or queue.owner_worker_epoch != message.worker_epoch
            or not queue.held(ctx.now)
        ):
            return Result(outcome="claimLost", error="Run claim expired")
    payload = message.payload
    if not isinstance(payload, dict):
        raise refuse("worker process payload must be an object")
    pid = payload.get("pid")
    if type(pid) is not int or not 0 <= pid <= _MAX_SAFE:
        raise refuse("pid must be a non-negative integer")
    if pid == 0:
        raise refuse("Worker process PID must be positive")
    if not register:
        if known.registered_to != message.worker_epoch:
            raise refuse("Worker process is not registered to this worker epoch")
        return Result(receipt={"pid": pid})
    if known.worker_pid is None or known.parent_pid != known.worker_pid:
        raise refuse("Worker process is not a direct child of the active worker")
    if known.registered_to not in (None, message.worker_epoch):
        raise refuse("Worker process is already registered to another worker epoch")
    return Result(receipt={"pid": pid})
