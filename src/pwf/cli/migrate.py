"""``pwf log migrate``: a log of format ``pwf.store.v1`` upgraded in one proven step (ADR 0102).

Imports click, the command line's options, the maintenance lock and the
store's migration.  The old file is kept whole as the backup the
``log.migrated`` event names; ``pwf log verify --backup`` proves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pwf.cli._options import db_option, echo_json, json_option
from pwf.cli._times import wall_ms
from pwf.config import Settings
from pwf.host import DIRECT_ACTOR, acquire_lock

if TYPE_CHECKING:
    from pwf.events import LogMigrated
    from pwf.store.sqlite_schema import Synchronous

__all__ = ["migrate"]


@click.command()
@db_option
@click.option(
    "--backup",
    "backup",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to keep the old file (default: DB.v1-backup next to it); must not exist.",
)
@json_option
def migrate(db: str | None, backup: str | None, as_json: bool) -> None:
    """Upgrade a database of format pwf.store.v1 to pwf.store.v2.

    Every event keeps its seq, bytes and hashes; only how the log stores
    them changes.  The old file is kept whole as the backup, and a
    log.migrated event names its SHA-256 and head, so `pwf log verify
    --backup FILE` proves that each old event is the event at the same seq.
    Nothing changes unless every step succeeds.
    """
    from pwf.store.migration import migrate as run  # noqa: PLC0415 - this verb's only

    settings = Settings.load(db=db)
    path = Path(settings.db)
    if not path.is_file():
        raise click.UsageError(f"no state database at {path}")
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
