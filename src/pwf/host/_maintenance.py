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
from typing import TYPE_CHECKING, Final

from pwf.errors import CommandError
from pwf.host._context import cause_of, context, refused
from pwf.host._recording import record, replay

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context, Result
    from pwf.host import Host
    from pwf.protocol.client import ClientRequest, ClientResponse
    from pwf.store import EventStore, LogFile

__all__ = ["FILE_MAINTENANCE", "effect", "maintain"]

FILE_MAINTENANCE: Final = frozenset({"state.backup", "state.prune"})
"""Operations whose file work runs outside the write transactions that record them."""


def maintain(
    host: Host[EventStore],
    request: ClientRequest,
    handler: Callable[[Context, ClientRequest], Result],
    now: int,
) -> ClientResponse:
    """Run ``state.backup`` or ``state.prune``: adopt or validate, do the file work, record."""
    from pwf.host._backup import Recording, run_backup  # noqa: PLC0415 - only maintenance

    cause = cause_of(request)
    recording = Recording(
        open=lambda tx: context(tx, now, host.actor, cause, host.mint),
        adopt=replay,
        record=lambda ctx, req, result: record(ctx, req, result, host.host_epoch),
        validate=handler,
        closed=lambda ctx, req: _closed_answer(host, ctx, req),
    )
    shared = host.store.shared_log
    if request.operation == "state.backup" and shared is not None:
        from pwf.host._backup import run_shared_backup  # noqa: PLC0415 - only maintenance

        return run_shared_backup(
            host.store, shared, request, recording, replace=host.replace_backups
        )
    if shared is not None:  # state.prune of the shared log (ADR 0107)
        from pwf.host.prune import Stamp, run_shared_prune  # noqa: PLC0415 - only state.prune

        stamp = Stamp(now, host.actor, cause)
        return run_shared_prune(host.store, shared, request, recording, stamp)
    store = _log_file(host)
    if request.operation == "state.backup":
        return run_backup(store, request, recording, replace=host.replace_backups)
    from pwf.host.prune import Stamp, run_prune  # noqa: PLC0415 - only state.prune

    return run_prune(store, request, recording, Stamp(now, host.actor, cause))


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
