"""Maintenance: the host's part in ``state.backup`` and ``state.prune`` (DOMAIN §13).

Imports commands, protocol and the host's context and recording rooms.
Both are recorded like any maintenance command, but their file work runs
outside the write transactions that adopt and record them (ADR 0018, 0022):
:mod:`pwf.host._backup` and :mod:`pwf.host.prune` do it, loaded only when
asked for.  On a shared log in PostgreSQL a backup is a snapshot of it
(ADR 0106) and a prune takes the bytes out under the log's lock (ADR 0107).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

from pwf.commands import Result
from pwf.errors import CommandError
from pwf.host._context import cause_of, context, refused
from pwf.host._recording import record, replay

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context
    from pwf.host import Host
    from pwf.host._backup import Recording
    from pwf.host.prune import PruneHandoff
    from pwf.protocol.client import ClientRequest, ClientResponse
    from pwf.store import EventStore, LogFile

__all__ = [
    "FILE_MAINTENANCE",
    "Handoff",
    "begin_backup",
    "begin_prune",
    "effect",
    "finish_backup",
    "maintain",
    "run_handoff",
]

FILE_MAINTENANCE: Final = frozenset({"state.backup", "state.prune"})
"""Operations whose file work runs outside the write transactions that record them."""


class Handoff(NamedTuple):
    """A validated ``state.backup`` whose copy is yet to be made (ADR 0114).

    ``work`` touches files and connections of its own only, never the
    host's store: a served host runs it off its writer thread, between the
    write transactions that validate and record the request.
    """

    request: ClientRequest
    result: Result
    work: Callable[[], None]
    recording: Recording


def _recording(
    host: Host[EventStore],
    request: ClientRequest,
    handler: Callable[[Context, ClientRequest], Result],
    now: int,
) -> Recording:
    from pwf.host._backup import Recording  # noqa: PLC0415 - only maintenance

    cause = cause_of(request)
    return Recording(
        open=lambda tx: context(tx, now, host.actor, cause, host.mint),
        adopt=replay,
        record=lambda ctx, req, result: record(ctx, req, result, host.host_epoch),
        validate=handler,
        closed=lambda ctx, req: _closed_answer(host, ctx, req),
    )


def begin_backup(
    host: Host[EventStore],
    request: ClientRequest,
    handler: Callable[[Context, ClientRequest], Result],
    now: int,
) -> ClientResponse | Handoff:
    """``state.backup`` up to its copy: its answer if it is adopted, refused or rejected now."""
    from pwf.host._backup import prepare_backup, prepare_shared_backup  # noqa: PLC0415

    recording = _recording(host, request, handler, now)
    shared = host.store.shared_log
    store = host.store if shared is not None else _log_file(host)
    if shared is not None:
        host.store.catch_up()  # what other hosts appended is folded before the lock
    result = recording.validated(store, request)
    if not isinstance(result, Result):
        return result
    assert result.effect is not None
    target, replace = Path(result.effect[1]), host.replace_backups
    try:
        if shared is not None:
            work = prepare_shared_backup(host.store, shared, target, replace=replace)
        else:
            work = prepare_backup(_log_file(host), target, replace=replace)
    except CommandError as error:
        return recording.finish(store, request, Result(outcome="rejected", error=str(error)))
    return Handoff(request, result, work, recording)


def finish_backup(host: Host[EventStore], handoff: Handoff, error: str | None) -> ClientResponse:
    """Record a ``state.backup`` whose copy was made, or failed with ``error``.

    A request with the same key recorded meanwhile is adopted instead.
    """
    result = handoff.result if error is None else Result(outcome="rejected", error=error)
    if host.store.shared_log is not None:
        host.store.catch_up()  # and what they appended during the backup
        return handoff.recording.finish(host.store, handoff.request, result)
    return handoff.recording.finish(_log_file(host), handoff.request, result)


def begin_prune(
    host: Host[EventStore], request: ClientRequest, now: int
) -> ClientResponse | PruneHandoff:
    """``state.prune`` of the host's own file up to its copy and compaction (ADR 0114)."""
    from pwf.commands.catalogue import CLIENT_OPERATIONS  # noqa: PLC0415 - served only
    from pwf.host.prune import Stamp  # noqa: PLC0415 - only state.prune
    from pwf.host.prune import begin_prune as begin  # noqa: PLC0415

    handler = CLIENT_OPERATIONS["state.prune"].handler
    recording = _recording(host, request, handler, now)
    return begin(_log_file(host), request, recording, Stamp(now, host.actor, cause_of(request)))


def run_handoff(handoff: Handoff) -> str | None:
    """Make the copy; None when it was made, else the rejection's text."""
    try:
        handoff.work()
    except CommandError as error:
        return str(error)
    return None


def maintain(
    host: Host[EventStore],
    request: ClientRequest,
    handler: Callable[[Context, ClientRequest], Result],
    now: int,
) -> ClientResponse:
    """Run ``state.backup`` or ``state.prune``: adopt or validate, do the file work, record."""
    if request.operation == "state.backup":
        begun = begin_backup(host, request, handler, now)
        if not isinstance(begun, Handoff):
            return begun
        return finish_backup(host, begun, run_handoff(begun))
    recording = _recording(host, request, handler, now)
    cause = cause_of(request)
    shared = host.store.shared_log
    if shared is not None:  # state.prune of the shared log (ADR 0107)
        from pwf.host.prune import Stamp, run_shared_prune  # noqa: PLC0415 - only state.prune

        stamp = Stamp(now, host.actor, cause)
        return run_shared_prune(host.store, shared, request, recording, stamp)
    from pwf.host.prune import Stamp, run_prune  # noqa: PLC0415 - only state.prune

    return run_prune(_log_file(host), request, recording, Stamp(now, host.actor, cause))


def _log_file(host: Host[EventStore]) -> LogFile:
    """The SQLite file of record; a shared log took its own path first."""
    store = host.store.log_file
    if store is None:
        raise CommandError("file maintenance needs a SQLite log of record")
    return store


def _closed_answer(
    host: Host[EventStore], ctx: Context, request: ClientRequest
) -> ClientResponse | None:
    """``unavailable`` while a served host is stopping or has lost its claim."""
    closed = host.gate(ctx) if host.gate is not None else None
    return None if closed is None else refused(request, closed, "unavailable")


def effect(host: Host[EventStore], kind: str, target: str) -> None:
    """File work a maintenance command asked for, done while the write lock is held.

    Raises:
        CommandError: the effect is unknown, or the backup failed.
    """
    if kind != "backup":
        raise CommandError(f"Unknown maintenance effect: {kind}")
    from pwf.host._backup import backup_database, backup_shared  # noqa: PLC0415 - only state.backup

    shared = host.store.shared_log
    if shared is not None:
        backup_shared(host.store, shared, Path(target), replace=host.replace_backups)
        return
    store = _log_file(host)
    backup_database(store, Path(target), replace=host.replace_backups)
