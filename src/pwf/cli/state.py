"""``pwf state backup|prune|restore|status|verify``: the original's state commands.

``backup`` and ``prune`` are recorded through the host like the original's
commands; ``status`` and ``verify`` answer what ``state.status`` and
``state.verify`` answer, read-only; ``restore`` puts a proved backup back
(:mod:`pwf.cli._restore`).  A relative path on the command line is resolved
against the working directory for ``backup``'s DEST, as the original's CLI
resolves it; only the protocol operation insists on an absolute path
(DOMAIN §13.1).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
from pathlib import Path

import click

from pwf.cli import verdict
from pwf.cli._options import db_option, echo_json, json_option, open_store, store_url
from pwf.cli._progress import activity
from pwf.cli._seed import seeded_epochs, seeded_id
from pwf.cli.request import at_option, now_ms
from pwf.commands.prune import parse_cutoff
from pwf.config import Settings
from pwf.errors import CommandError
from pwf.host import Host
from pwf.host.statereads import state_read
from pwf.protocol.client import ClientRequest, ClientResponse

__all__ = ["state"]


@click.group()
def state() -> None:
    """Maintenance of the state database, recorded like the original's commands."""


_EXISTS = "Backup destination already exists: "


@state.command()
@click.argument("destination", metavar="DEST")
@click.option("--overwrite", is_flag=True, help="Replace DEST when it already exists.")
@db_option
@at_option
@json_option
def backup(
    destination: str, overwrite: bool, db: str | None, at: int | None, as_json: bool
) -> None:
    """Copy the database to DEST and check the copy (a relative DEST is from here).

    DEST is refused when it already exists (unless --overwrite), when it is a
    directory, and always when it reaches the live database, its -wal, -shm
    or -journal, a file pwf keeps beside it, or a backup that a compaction of
    this log names (symlinks followed).  The live database must pass its
    integrity checks; the copy is made with SQLite's online backup, gets mode
    0600 (parent directories 0700), and is reopened read-only to check its
    integrity, its hash chain and that its projections equal its log.  With
    --store, the copy is one read-only snapshot of the shared log, written as
    a pwf database with its projections folded from it (--db is the live
    file).  The command is recorded as state.backup.
    """
    destination = os.path.abspath(destination)  # noqa: PTH100 - keeps the path as typed, no symlinks resolved
    with activity("backing up"):
        response = _maintain(
            "state.backup", {"destination": destination}, db, at, replace_backups=overwrite
        )
    if as_json:
        echo_json({"error": response.error, "outcome": response.outcome})
    elif response.outcome in ("accepted", "adopted"):
        click.echo(f"backed up to {destination}")
    else:
        hint = (
            "; pass --overwrite to replace it" if (response.error or "").startswith(_EXISTS) else ""
        )
        raise CommandError(f"{response.error or 'state.backup was refused'}{hint}")
    if response.outcome not in ("accepted", "adopted"):
        sys.exit(2)


def _maintain(
    operation: str,
    payload: dict[str, object],
    db: str | None,
    at: int | None,
    *,
    replace_backups: bool = True,
) -> ClientResponse:
    """Send one maintenance request through the host, as a client would."""
    with open_store(db) as store:
        minted = seeded_id(store, operation) or str(uuid.uuid4())  # noqa: TID251 - the CLI is the edge that mints request ids
        key = f"{operation}-{minted}"
        request = ClientRequest(
            request_id=key,
            client_id="pwf-cli",
            operation=operation,
            idempotency_key=key,
            payload=payload,
        )
        now = now_ms(at)
        host = Host(store, new_epoch=seeded_epochs(store), replace_backups=replace_backups)
        host.refuse_if_served(now)
        return host.request(request, now)


_REPORT_LINES = (
    ("cutoff", "cutoff"),
    ("candidateTrees", "candidate trees"),
    ("blockedTrees", "blocked trees"),
    ("selectedRuns", "selected runs"),
    ("deletedRows", "deleted rows"),
    ("deletedBlobs", "deleted blobs"),
    ("deletedBlobBytes", "deleted blob bytes"),
    ("databaseBytesBefore", "database bytes before"),
    ("databaseBytesAfter", "database bytes after"),
    ("applied", "applied"),
)


@state.command()
@click.option("--before", required=True, help="Cutoff: ISO 8601 date or date-time.")
@click.option(
    "--apply/--dry-run",
    "apply",
    default=False,
    help="Delete, or only report what would go (--dry-run, the default).",
)
@click.option("--backup", "backup_path", default=None, help="Absolute path of the backup.")
@db_option
@at_option
@json_option
def prune(  # noqa: PLR0913, PLR0917 - one option per prune setting
    before: str, apply: bool, backup_path: str | None, db: str | None, at: int | None, as_json: bool
) -> None:
    """Remove finished run trees from before a cutoff (a dry run unless --apply).

    A run is eligible when it finished (completed, failed, timed out or
    cancelled) strictly before the cutoff; a tree (a root and its restarts and
    continuations) goes only when every member is eligible and nothing still
    holds it.  --apply takes the maintenance lock file, makes a checked backup
    at --backup, then takes the removed runs' events' bytes out of the log:
    every seq, hash and Merkle leaf stays, so every earlier proof still
    verifies, and a log.pruned event names the backup and its SHA-256
    (`pwf log verify --backup` proves each removed body against its leaf).
    A date alone is UTC midnight; a date-time without an offset is read in
    the local time zone.
    """
    cutoff = parse_cutoff(before)
    if cutoff is not None and not cutoff.zoned:
        click.echo(
            f"warning: --before {before} has no time zone; it is read in local time", err=True
        )
    payload: dict[str, object] = {"apply": apply, "before": before}
    if backup_path is not None:
        payload["backupPath"] = backup_path
    with activity("pruning") if apply else contextlib.nullcontext():
        response = _maintain("state.prune", payload, db, at)
    refused = response.outcome not in ("accepted", "adopted")
    if as_json:
        data = {"error": response.error, "outcome": response.outcome, "report": response.receipt}
        echo_json(data)
    elif refused:
        raise CommandError(response.error or "state.prune was refused")
    else:
        report = response.receipt if isinstance(response.receipt, dict) else {}
        for member, label in _REPORT_LINES:
            click.echo(f"{label}: {json.dumps(report.get(member))}")
    if refused:
        sys.exit(2)


@state.command(name="status")
@db_option
@at_option
@json_option
def state_status_command(db: str | None, at: int | None, as_json: bool) -> None:
    """Show what state.status answers: the file's size and the state counts.

    The counts are HOST §2.16's (runs, pending interactions and follow-ups,
    live leases, ...); pwf status shows the operator's overview.  The
    database is only read.
    """
    request = _read_request("state.status")
    with open_store(db, read_only=True) as store:
        response = state_read(store, request, now_ms(at))
    if response.outcome != "accepted" or not isinstance(response.receipt, dict):
        raise CommandError(response.error or "state.status was refused")
    receipt = response.receipt
    if as_json:
        echo_json(receipt)
        return
    click.echo(f"size {receipt['sizeBytes']} bytes")
    counts = receipt["counts"]
    assert isinstance(counts, dict)
    pairs = [f"{name} {value}" for name, value in sorted(counts.items())]
    click.echo("counts:")
    for first in range(0, len(pairs), 3):
        click.echo("  " + ", ".join(pairs[first : first + 3]))


@state.command(name="verify")
@db_option
@json_option
def state_verify_command(db: str | None, as_json: bool) -> None:
    """Check the file as state.verify does (exit 1 when a check fails).

    SQLite's integrity check of the file, then pwf's whole verification:
    the hash chain, and the projections equal to a rebuild of the log, as
    pwf request answers state.verify.  The database is only read.
    """
    from pwf.verify import verify_failure  # noqa: PLC0415 - only this verb folds the log

    request = _read_request("state.verify")
    with open_store(db, read_only=True) as store, activity("verifying"):
        response = state_read(store, request, now_ms(None), verifier=verify_failure)
    valid = response.outcome == "accepted"
    verdict(0 if valid else 1)
    if as_json:
        data = {"error": response.error, "valid": valid}
        echo_json(data)
    elif valid:
        click.echo("valid: SQLite integrity, hash chain and projections")
    else:
        click.echo(f"invalid: {response.error}", err=True)
    if not valid:
        sys.exit(1)


def _read_request(operation: str) -> ClientRequest:
    """A request for one of the state reads; they append nothing, so the ids are fixed."""
    return ClientRequest(
        request_id=f"pwf-cli-{operation}",
        client_id="pwf-cli",
        operation=operation,
        idempotency_key=f"pwf-cli-{operation}",
        payload=None,
    )


def _restore_shared(backup: Path, url: str, *, as_json: bool) -> None:
    """``pwf state restore BACKUP --store URL``: into an empty shared log (ADR 0107)."""
    from pwf.cli._options import open_log  # noqa: PLC0415 - a shared log's only
    from pwf.cli._restore import restore_shared  # noqa: PLC0415

    with activity("restoring"), open_log(url) as log:
        events, head_seq = restore_shared(backup, log)
        where = log.path
    if as_json:
        echo_json({"events": events, "headSeq": head_seq, "store": where})
        return
    click.echo(
        f"restored {where} from {backup}: head seq {head_seq} (chain and projections proved)"
    )


@state.command()
@click.argument("backup", metavar="BACKUP")
@db_option
@at_option
@json_option
def restore(backup: str, db: str | None, at: int | None, as_json: bool) -> None:
    """Put a proved BACKUP in place of the database; the replaced file is kept beside it.

    BACKUP must prove first: its hash chain and its projections equal to a
    rebuild of its log, and, when the database's log.pruned (or an older
    log.compacted) names this very backup, what pwf log verify --backup
    proves.  The restore is
    refused while a served host holds the database, while maintenance runs,
    or while any other process has it open.  The backup is written beside
    the database, synced and renamed over it; the replaced file stays as
    DB.before-restore-TIME.  With --store, BACKUP goes into an empty shared
    log instead, row for row, in one transaction.
    """
    from pwf.cli._restore import restore as run_restore  # noqa: PLC0415 - only restore needs it

    url = store_url()
    if url is not None:
        _restore_shared(Path(backup), url, as_json=as_json)
        return
    database = Path(Settings.load(db=db).db)
    with activity("restoring"):
        done = run_restore(Path(backup), database, now_ms(at))
    if as_json:
        data = {
            "compactionProved": done.compaction_proved,
            "events": done.events,
            "provedBy": done.proved_by,
            "headSeq": done.head_seq,
            "kept": None if done.kept is None else str(done.kept),
            "replacedHeadSeq": done.replaced_head_seq,
        }
        echo_json(data)
        return
    proof = "chain and projections" + (
        f", and the {done.proved_by} that names it" if done.proved_by is not None else ""
    )
    click.echo(f"restored {database} from {backup}: head seq {done.head_seq} ({proof} proved)")
    if done.kept is not None:
        click.echo(
            f"the replaced database (head seq {done.replaced_head_seq}) is kept as {done.kept}"
        )
