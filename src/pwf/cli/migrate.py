"""``pwf log migrate``: a log of format ``pwf.store.v1`` upgraded in one proven step (ADR 0102).

Imports click, the command line's options, the maintenance lock and the
store's migration.  The old file is kept whole as the backup the
``log.migrated`` event names; ``pwf log verify --backup`` proves it.  A
shared log (``--store``) is migrated in one PostgreSQL transaction, its
export kept as the backup, and a host's local file re-created from it
(ADR 0104).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pwf.cli._options import db_option, echo_json, json_option, open_log, open_store, store_url
from pwf.cli._times import wall_ms
from pwf.config import Settings
from pwf.errors import InputError
from pwf.host import DIRECT_ACTOR, acquire_lock
from pwf.store.schema import FORMAT, FORMAT_V1

if TYPE_CHECKING:
    from pwf.events import LogMigrated
    from pwf.store.migration import Migration, OldLocalFile
    from pwf.store.sqlite_schema import Synchronous

__all__ = ["migrate"]


@click.command()
@db_option
@click.option(
    "--backup",
    "backup",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to keep the old file (default: DB.v1-backup next to it); must not exist."
    " With --store: the file the shared log's old events are exported to (required).",
)
@json_option
def migrate(db: str | None, backup: str | None, as_json: bool) -> None:
    """Upgrade a database of format pwf.store.v1 to pwf.store.v2.

    Every event keeps its seq, bytes and hashes; only how the log stores
    them changes.  The old file is kept whole as the backup, and a
    log.migrated event names its SHA-256 and head, so `pwf log verify
    --backup FILE` proves that each old event is the event at the same seq.
    Nothing changes unless every step succeeds.

    With --store URL the shared log is migrated in one PostgreSQL
    transaction under its lock, its old events exported to --backup FILE
    (as `pwf log export` writes them); with --db LOCAL this host's local
    file is then re-created from the migrated log, the old one kept as
    LOCAL.v1-backup.  A local file left in the old format is re-created by
    --store URL --db LOCAL alone.
    """
    url = store_url()
    if url is not None:
        _migrate_shared(url, db, backup, as_json=as_json)
        return
    from pwf.store.migration import migrate as run  # noqa: PLC0415 - this verb's only

    settings = Settings.load(db=db)
    path = Path(settings.db)
    if not path.is_file():
        raise InputError(f"no state database at {path} (run `pwf init` first)")
    kept = Path(backup) if backup is not None else path.with_name(path.name + ".v1-backup")
    lock = acquire_lock(path)
    try:
        done = run(
            path,
            kept,
            seal=lambda scratch, event: _seal(scratch, event, settings.synchronous),
            busy_timeout_ms=settings.busy_timeout_ms,
        )
    finally:
        lock.release()
    head = done.head
    named = f"{head.seq}:{head.content_hash}" if head.content_hash else "0"
    if as_json:
        echo_json(
            {
                "backup": str(done.backup),
                "backupHead": named,
                "backupSha256": done.backup_sha256,
                "db": str(path),
                "format": done.event.to_format,
                "seq": done.seq,
            }
        )
        return
    click.echo(
        f"migrated {path} to {done.event.to_format}: {head.seq} events kept their seqs and bytes;"
        f" log.migrated at seq {done.seq} names the backup {done.backup}"
        f" (sha256 {done.backup_sha256}, head {named})"
    )


def _seal(scratch: Path, event: LogMigrated, synchronous: Synchronous) -> int:
    """Append ``event`` to the new file at ``scratch``, projections and tree kept; its seq."""
    from pwf.readmodel import ReadModel  # noqa: PLC0415 - as the stores that append
    from pwf.store.opening import open_file  # noqa: PLC0415

    model = ReadModel()
    with (
        open_file(scratch, synchronous=synchronous, hooks=[model]) as store,
        store.transaction() as tx,
    ):
        sealed = tx.append([event], at=wall_ms(), actor=DIRECT_ACTOR)
    return sealed[0].entry.seq


def _migrate_shared(url: str, db: str | None, backup: str | None, *, as_json: bool) -> None:
    """Migrate the shared log at ``url`` (if it is in v1), then re-create the local file ``db``."""
    from pwf.store.migration import old_local_file  # noqa: PLC0415 - this verb's only
    from pwf.store.postgres.migration import migrate as run  # noqa: PLC0415 - an optional extra

    path = None if db is None else Path(Settings.load(db=db).db)
    lock = None
    done: Migration | None = None
    try:
        with open_log(url, formats=(FORMAT, FORMAT_V1)) as log:
            local = None
            if path is not None and path.exists():
                lock = acquire_lock(path)
                aside = path.with_name(path.name + ".v1-backup")
                local = old_local_file(path, aside, log_id=log.log_id, log=log.path)
            if log.format == FORMAT_V1:
                if backup is None:
                    raise click.UsageError(
                        "--backup FILE is required with --store: where the old log is exported to"
                    )
                done = run(log, Path(backup), at=wall_ms(), actor=DIRECT_ACTOR)
            elif backup is not None or local is None:
                raise InputError(f"{log.path} is already in format {FORMAT}; nothing to migrate")
            name = log.path
        events = None if path is None else _recreate(db, local)
    finally:
        if lock is not None:
            lock.release()
    _report_shared(name, done, path, local, events, as_json=as_json)


def _recreate(db: str | None, local: OldLocalFile | None) -> int:
    """A new local file caught up from the shared log, the old one set aside; its events."""
    from pwf.cli.audit import sqlite_file  # noqa: PLC0415 - only a re-created file needs it
    from pwf.store.migration import set_aside  # noqa: PLC0415 - this verb's only
    from pwf.store.tree import set_origin  # noqa: PLC0415

    if local is not None:
        set_aside(local)
    with open_store(db) as store:  # the mirror makes the file and folds the whole log into it
        if local is not None and local.origin is not None:
            file = sqlite_file(store.projections_file)
            with file.file_transaction() as tx:
                set_origin(tx.connection, local.origin)
        return store.head().seq


def _report_shared(  # noqa: PLR0913 - what was done to the log and to the file
    name: str,
    done: Migration | None,
    path: Path | None,
    local: OldLocalFile | None,
    events: int | None,
    *,
    as_json: bool,
) -> None:
    """Print what ``--store`` did: the log's migration, the local file's re-creation."""
    data: dict[str, object] = {"format": FORMAT, "store": name}
    lines = []
    if done is not None:
        head = done.head
        named = f"{head.seq}:{head.content_hash}" if head.content_hash else "0"
        data |= {
            "backup": str(done.backup),
            "backupHead": named,
            "backupSha256": done.backup_sha256,
            "seq": done.seq,
        }
        lines.append(
            f"migrated {name} to {FORMAT}: {head.seq} events kept their seqs and bytes;"
            f" log.migrated at seq {done.seq} names the backup {done.backup}"
            f" (sha256 {done.backup_sha256}, head {named})"
        )
    if path is not None:
        data |= {"db": str(path), "events": events}
        kept = "" if local is None else f", the old file kept as {local.aside}"
        lines.append(f"re-created {path} from {name} ({events} events){kept}")
        if local is not None:
            data["localBackup"] = str(local.aside)
    if as_json:
        echo_json(data)
        return
    for line in lines:
        click.echo(line)
