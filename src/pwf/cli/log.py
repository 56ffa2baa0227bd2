"""``pwf log show|tail|verify|export|import``: inspect, verify and move the log."""

from __future__ import annotations

import sys
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pwf import canonical, logs
from pwf.cli._options import db_option, json_option, open_store
from pwf.cli.diff import log_diff
from pwf.config import Settings
from pwf.errors import ImportRefusedError, PwfError
from pwf.events import Entry, open_body
from pwf.store.compaction import prove
from pwf.store.jsonl import export_jsonl, import_jsonl

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pwf.store import Head, StoredEvent
    from pwf.store.sqlite import SqliteStore


@click.group()
def log() -> None:
    """Inspect, verify, export and import the event log."""


log.add_command(log_diff)


def _row(entry: Entry) -> str:
    cause = entry.cause
    origin = ""
    if cause is not None:
        origin = f"{cause.operation} {cause.client_id or cause.worker_epoch or ''}".rstrip()
    run = entry.event.index_run_id() or "-"
    return f"{entry.seq:>8} {entry.batch:>7} {entry.at:>14} {entry.type:<28} {run:<24} {origin}"


_HEADER = f"{'seq':>8} {'batch':>7} {'at':>14} {'type':<28} {'run':<24} cause"


def _print(events: Iterable[StoredEvent], as_json: bool) -> int:
    shown = 0
    out = sys.stdout.buffer
    if not as_json:
        click.echo(_HEADER)
    for stored in events:
        if as_json:
            out.write(stored.body + b"\n")
        else:
            click.echo(_row(open_body(stored.body)))
        shown += 1
    return shown


@log.command()
@db_option
@click.option("--from", "first", type=click.IntRange(min=1), default=1, help="First seq.")
@click.option("--to", "last", type=click.IntRange(min=1), default=None, help="Last seq.")
@click.option("--type", "type_", default=None, help="Only events of this type.")
@click.option("--run", "run_id", default=None, help="Only events about this run.")
@click.option("--session", "session_id", default=None, help="Only events about this session.")
@click.option(
    "--request", "request_id", default=None, help="Only events caused by this request id."
)
@json_option
def show(  # noqa: PLR0913, PLR0917 - one option per filter
    db: str | None,
    first: int,
    last: int | None,
    type_: str | None,
    run_id: str | None,
    session_id: str | None,
    request_id: str | None,
    as_json: bool,
) -> None:
    """Show events in seq order (``--json``: their stored canonical bytes, one per line)."""
    with open_store(db, read_only=True) as store:
        if type_ or run_id or session_id or request_id:
            found = store.find(
                type=type_, run_id=run_id, session_id=session_id, request_id=request_id
            )
            events: Iterable[StoredEvent] = (
                item for item in found if item.seq >= first and (last is None or item.seq <= last)
            )
        else:
            events = store.read(first, last)
        _print(events, as_json)


@log.command()
@db_option
@click.option(
    "-n", "count", type=click.IntRange(min=1), default=10, show_default=True, help="How many."
)
@json_option
def tail(db: str | None, count: int, as_json: bool) -> None:
    """Show the last events of the log."""
    with open_store(db, read_only=True) as store:
        head = store.head()
        _print(deque(store.read(max(1, head.seq - count + 1)), maxlen=count), as_json)


@log.command()
@db_option
@click.option(
    "--chain-only",
    is_flag=True,
    help="Walk the hash chain only: skip parsing events and checking indexed columns.",
)
@click.option(
    "--backup",
    "backup",
    type=click.Path(dir_okay=False),
    default=None,
    help="For a compacted log: prove it is this backup's log minus the pruned runs.",
)
@json_option
def verify(db: str | None, chain_only: bool, backup: str | None, as_json: bool) -> None:
    """Verify the hash chain from the stored bytes (exit 1 at the first bad seq).

    By default every event is also parsed (canonical form, typed data) and its
    indexed columns compared with its bytes.  --chain-only checks each body's
    SHA-256, seq, batch and prevHash from the bytes alone, several times faster.
    A compacted log starts at its log.compacted event; --backup then checks
    the backup it names (SHA-256, its own chain, its head) and that the live
    log is that backup's log with the pruned runs' events left out.
    """
    with open_store(db, read_only=True) as store:
        report = store.verify(deep=not chain_only)
        proof = prove(store, Path(backup)) if backup is not None and report.ok else None
    ok = report.ok and (proof is None or proof.ok)
    if as_json:
        data: dict[str, object] = {
            "events": report.events,
            "firstBadSeq": report.first_bad_seq,
            "headSeq": report.head.seq,
            "ok": ok,
            "reason": report.reason,
        }
        if proof is not None:
            data["backup"] = {
                "backupEvents": proof.backup_events,
                "compared": proof.compared,
                "failure": proof.failure,
                "ok": proof.ok,
                "removedRuns": proof.removed_runs,
            }
        click.echo(canonical.encode(data).decode())
    elif not report.ok:
        click.echo(f"bad: seq {report.first_bad_seq}: {report.reason}", err=True)
    elif proof is not None and not proof.ok:
        click.echo(f"bad: backup {backup}: {proof.failure}", err=True)
    else:
        click.echo(f"ok: {report.events} events, chain intact, head seq {report.head.seq}")
        if proof is not None:
            click.echo(
                f"ok: the log is {backup}'s {proof.backup_events} events compacted:"
                f" {proof.compared} kept, {proof.removed_runs} runs removed"
            )
    if not ok:
        sys.exit(1)


@log.command()
@db_option
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    help="File to write (default: stdout).",
)
@click.option("--from", "first", type=click.IntRange(min=1), default=1, help="First seq.")
@click.option("--to", "last", type=click.IntRange(min=1), default=None, help="Last seq.")
def export(db: str | None, out_path: str, first: int, last: int | None) -> None:
    """Write the log as JSONL: each event's stored bytes, one per line."""
    with open_store(db, read_only=True) as store:
        if out_path == "-":
            written = export_jsonl(store, sys.stdout.buffer, first, last)
        else:
            with Path(out_path).open("wb") as out:
                written = export_jsonl(store, out, first, last)
    logs.info("log.exported", events=written)


@log.command(name="import")
@db_option
@click.argument("source", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@json_option
def import_(db: str | None, source: str, as_json: bool) -> None:
    """Import a JSONL log into a new (empty) database, checking every line first.

    Any fault (not canonical, bad hash, broken chain, gap) refuses the whole file.
    """
    path = Settings.load(db=db).db
    created = not path.exists()
    try:
        with open_store(db, create=True) as store:
            head = _import(store, source)
            events = head.seq - store.origin().seq  # a compacted log starts after its origin
    except PwfError:
        if created:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise
    if as_json:
        shown = {"events": events, "head": head.content_hash, "seq": head.seq}
        click.echo(canonical.encode(shown).decode())
    else:
        click.echo(
            f"imported {events} events up to seq {head.seq} into {path}, head {head.content_hash}"
        )


def _import(store: SqliteStore, source: str) -> Head:
    if source == "-":
        return import_jsonl(store, sys.stdin.buffer)
    try:
        with Path(source).open("rb") as stream:
            return import_jsonl(store, stream)
    except FileNotFoundError:
        raise ImportRefusedError(0, f"no such file: {source}") from None
