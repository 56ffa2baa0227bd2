"""``pwf log show|tail|verify|export|import``: inspect, verify and move the log."""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import click

from pwf import logs
from pwf.cli import verdict
from pwf.cli._anchor import anchored, parse_anchor
from pwf.cli._options import (
    code_units,
    db_option,
    echo_json,
    file_option,
    json_option,
    open_log,
    open_store,
    printable,
    store_url,
)
from pwf.cli._output import Shape, Window, listing, pick_columns, print_rows, shaped, with_options
from pwf.cli._progress import activity
from pwf.cli._times import resolve_format, shown
from pwf.cli.audit import (
    check_checkpoint,
    checkpoint_command,
    keygen,
    receipt,
    sqlite_file,
    trust_options,
)
from pwf.cli.audit import prove as prove_command
from pwf.cli.diff import log_diff
from pwf.cli.migrate import migrate
from pwf.config import Settings
from pwf.errors import InputError, StoreError
from pwf.events import EVENT_TYPES, open_body
from pwf.private import create_file
from pwf.store.compaction import prove
from pwf.store.jsonl import export_jsonl
from pwf.store.tree import proofs

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from pwf.cli._anchor import Anchor, Held
    from pwf.cli._times import TimeFormat
    from pwf.store import EventLog, EventStore, StoredEvent, VerifyReport
    from pwf.store.compaction import Proof
    from pwf.store.migration import BackupProof
    from pwf.store.pruned import PruneProof


F = Any


@click.group()
def log() -> None:
    """Inspect, verify, export and import the event log."""


log.add_command(log_diff)
log.add_command(prove_command)
log.add_command(receipt)
log.add_command(keygen)
log.add_command(checkpoint_command)
log.add_command(migrate)


_COLUMNS: Final = ("seq", "batch", "at", "type", "run", "session", "request", "hash", "cause")
_SHOWN: Final = ("seq", "batch", "at", "type", "run", "cause")
_WIDTHS: Final = {"seq": 8, "batch": 7, "type": 28, "run": 24, "session": 24, "request": 24}
_RIGHT: Final = frozenset({"seq", "batch"})
_AT_WIDTHS: Final = {"iso": 24, "relative": 16, "raw": 14}


def _values(stored: StoredEvent) -> dict[str, object]:
    """The columns of one event, read from its stored bytes."""
    entry = open_body(stored.body)
    cause = entry.cause
    origin = None
    if cause is not None:
        origin = f"{cause.operation} {cause.client_id or cause.worker_epoch or ''}".rstrip()
    return {
        "seq": entry.seq,
        "batch": entry.batch,
        "at": entry.at,
        "type": entry.type,
        "run": entry.event.index_run_id(),
        "session": entry.event.index_session_id(),
        "request": None if cause is None else cause.request_id,
        "hash": entry.content_hash,
        "cause": origin,
    }


def _line(values: dict[str, object], columns: Sequence[str], form: TimeFormat) -> str:
    cells = []
    for name in columns:
        value = values[name]
        if name == "at":
            text = shown(value, form).rjust(_AT_WIDTHS[form])
        else:
            text = "-" if value is None else str(value)
            width = _WIDTHS.get(name, 0)
            text = text.rjust(width) if name in _RIGHT else text.ljust(width)
        cells.append(text)
    return " ".join(cells).rstrip()


def _heading(name: str, form: TimeFormat) -> str:
    width = _AT_WIDTHS[form] if name == "at" else _WIDTHS.get(name, 0)
    return name.rjust(width) if name in _RIGHT or name == "at" else name.ljust(width)


def _print(events: Iterable[StoredEvent], shape: Shape) -> int:
    """Print events in the chosen form; ``--json`` writes each stored body as it is."""
    shown_count = 0
    if shape.form == "json":
        out = sys.stdout.buffer
        for stored in events:
            out.write(stored.body + b"\n")
            shown_count += 1
        return shown_count
    default = _COLUMNS if shape.form == "nl" else _SHOWN
    columns = pick_columns(_COLUMNS, shape.columns, default)
    if shape.form != "table":
        rows = ([_values(stored)[name] for name in columns] for stored in events)
        print_rows(columns, rows, shape.form, shape.time_format)
        return -1
    form = resolve_format(shape.time_format)
    click.echo(" ".join(_heading(name, form) for name in columns).rstrip())
    for stored in events:
        click.echo(printable(_line(_values(stored), columns, form)))
        shown_count += 1
    return shown_count


_TYPES: Final = tuple(kind.TAG for kind in EVENT_TYPES)


def _log_show(command: F) -> F:
    filters = (
        db_option,
        click.option("--from", "first", type=click.IntRange(min=1), default=1, help="First seq."),
        click.option("--to", "last", type=click.IntRange(min=1), default=None, help="Last seq."),
        click.option(
            "--type",
            "type_",
            type=click.Choice(_TYPES),
            default=None,
            help="Only events of this type.",
        ),
        click.option(
            "--run", "run_id", default=None, callback=code_units, help="Only events about this run."
        ),
        click.option(
            "--session",
            "session_id",
            default=None,
            callback=code_units,
            help="Only events about this session.",
        ),
        click.option(
            "--request",
            "request_id",
            default=None,
            callback=code_units,
            help="Only events caused by this request id.",
        ),
    )
    return with_options(listing(command), filters)


@log.command()
@_log_show
def show(  # noqa: PLR0913 - one option per filter
    *,
    db: str | None,
    first: int,
    last: int | None,
    type_: str | None,
    run_id: str | None,
    session_id: str | None,
    request_id: str | None,
    window: Window,
    shape: Shape,
) -> None:
    """Show events in seq order (``--json``: their stored canonical bytes, one per line).

    --nl prints one JSON object of columns per event, --csv and --tsv a header
    and one line per event; --columns picks them from seq, batch, at, type,
    run, session, request, hash and cause.  --since/--until bound the event
    time, --limit/--offset page after the filters.  Times print in
    --time-format (ISO on a terminal).  A pruned log's removed events have no
    bytes here: a note on stderr names their seqs and the backup that holds them.
    """
    if shape.form != "json":  # a bad --columns fails before the store opens
        pick_columns(_COLUMNS, shape.columns, _SHOWN)
    with open_store(db, read_only=True) as store:
        wanted = {
            "type": type_, "run_id": run_id, "session_id": session_id, "request_id": request_id,
        }  # fmt: skip
        events: Iterable[StoredEvent]
        if any(wanted.values()) or window.since is not None or window.until is not None:
            events = store.find(
                after=first - 1,
                until=last,
                at_least=window.since,
                at_most=window.until,
                **wanted,
            )
        else:
            events = store.read(first, last)
        stop = None if window.limit is None else window.offset + window.limit
        seen = _Seen(events)
        _print(itertools.islice(seen, window.offset, stop), shape)
        # A listing cut short by --limit says only what it passed over on the way.
        _note_pruned(store, first, seen.last if seen.cut else last)


class _Seen:
    """The events of a listing, passed on as they come; the last seq read, and whether more were."""

    def __init__(self, events: Iterable[StoredEvent]) -> None:
        self._events = iter(events)
        self.last = 0
        self.cut = True
        """False once the events ran out: the listing reached the end of its range."""

    def __iter__(self) -> Iterator[StoredEvent]:
        for stored in self._events:
            self.last = stored.seq
            yield stored
        self.cut = False


_SPANS_SHOWN: Final = 6
"""How many runs of pruned seqs a note names before it says how many there are in all."""


def _note_pruned(store: EventLog, first: int, last: int | None) -> None:
    """Say on stderr which seqs of ``first..last`` a prune took: no listing can show them.

    One line for each ``log.pruned``, naming the runs of seqs it took and the
    backup that holds their bytes (ADR 0103).
    """
    spans: dict[int, list[list[int]]] = {}
    counts: dict[int, int] = {}
    for seq, taken in store.pruned(first, last):
        runs = spans.setdefault(taken, [])
        counts[taken] = counts.get(taken, 0) + 1
        if runs and runs[-1][1] == seq - 1:
            runs[-1][1] = seq
        elif len(runs) <= _SPANS_SHOWN:
            runs.append([seq, seq])
    if spans:
        from pwf.store.pruned import backup_of  # noqa: PLC0415 - a pruned log's only
    for taken, runs in spans.items():
        named = ", ".join(
            str(low) if low == high else f"{low}-{high}" for low, high in runs[:_SPANS_SHOWN]
        )
        if len(runs) > _SPANS_SHOWN:
            named += f", ... ({counts[taken]} events in all)"
        click.echo(
            f"note: seqs {named} are not shown: the log.pruned at seq {taken} took their bytes"
            f" to the backup {backup_of(store, taken)}",
            err=True,
        )


@log.command()
@db_option
@click.option(
    "-n", "count", type=click.IntRange(min=1), default=10, show_default=True, help="How many."
)
@click.option(
    "-f",
    "--follow",
    "follow",
    is_flag=True,
    help="Keep printing new events as they are appended (polls; stop with Ctrl-C).",
)
@click.option(
    "--interval",
    "interval",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    metavar="SECONDS",
    help="How often --follow looks for new events.",
)
@click.option("--run", "run_id", default=None, help="Only events about this run.")
@click.option("--session", "session_id", default=None, help="Only events about this session.")
@shaped
def tail(  # noqa: PLR0913 - one option per setting
    *,
    db: str | None,
    count: int,
    follow: bool,
    interval: float,
    run_id: str | None,
    session_id: str | None,
    shape: Shape,
) -> None:
    """Show the last events of the log; with --follow, keep showing new ones.

    --run and --session keep only the events about one run or session, both
    the last ones and those that follow.  --follow polls the log every
    --interval seconds and ends quietly on Ctrl-C or when the reader of its
    output goes away.
    """
    about = _About(run_id, session_id)
    with open_store(db, read_only=True) as store:
        head = store.head()
        if about.any:
            last: Iterable[StoredEvent] = (
                store.find(run_id=run_id)
                if session_id is None
                else store.find(session_id=session_id)
                if run_id is None
                else store.find(run_id=run_id, session_id=session_id)
            )
        else:
            last = store.read(max(1, head.seq - count + 1))
        _print(deque((item for item in last if item.seq <= head.seq), maxlen=count), shape)
        if follow:
            _follow(store, head.seq, shape, interval, about)


class _About(NamedTuple):
    """The run and session ``tail`` keeps to (None: any)."""

    run_id: str | None
    session_id: str | None

    @property
    def any(self) -> bool:
        return self.run_id is not None or self.session_id is not None

    def keeps(self, stored: StoredEvent) -> bool:
        if not self.any:
            return True
        event = open_body(stored.body).event
        return (self.run_id is None or event.index_run_id() == self.run_id) and (
            self.session_id is None or event.index_session_id() == self.session_id
        )


def _follow(store: EventStore, seq: int, shape: Shape, interval: float, about: _About) -> None:
    """Print every event after ``seq`` that ``about`` keeps as it appears, until Ctrl-C."""
    plain = shape
    try:
        while True:
            sys.stdout.flush()
            time.sleep(interval)
            read = list(store.read(seq + 1))
            if not read:
                continue
            seq = read[-1].seq
            fresh = [item for item in read if about.keeps(item)]
            if not fresh:
                continue
            if plain.form == "table":
                form = resolve_format(plain.time_format)
                columns = pick_columns(_COLUMNS, plain.columns, _SHOWN)
                for stored in fresh:
                    click.echo(printable(_line(_values(stored), columns, form)))
            elif plain.form in ("csv", "tsv"):
                columns = pick_columns(_COLUMNS, plain.columns, _SHOWN)
                print_rows(
                    columns,
                    ([_values(item)[name] for name in columns] for item in fresh),
                    plain.form,
                    plain.time_format,
                    header=False,
                )
            else:
                _print(fresh, plain)
    except KeyboardInterrupt:
        return


@log.command()
@db_option
@click.option(
    "--chain-only",
    is_flag=True,
    help="Walk the hash chain only: skip parsing events and checking indexed columns.",
)
@file_option(
    "--backup",
    "backup",
    "For a compacted log: prove it is this backup's log minus the pruned runs;"
    " for a migrated log: prove each of the old file's events is the one at its seq.",
)
@click.option(
    "--expect-head",
    "expect_head",
    metavar="SEQ:HASH",
    default=None,
    help="Also prove that the event at SEQ still has content hash HASH (from `pwf log head`).",
)
@file_option(
    "--checkpoint",
    "checkpoint",
    "Also check this signed checkpoint (needs --vkey): its root is this log's at its size.",
)
@trust_options(
    vkey_help="The log's verifier key, for --checkpoint.",
    quorum_help="Witness cosignatures the checkpoint needs (default: every --witness).",
    required=False,
)
@json_option
def verify(  # noqa: PLR0913 - one option and one report each
    *,
    db: str | None,
    chain_only: bool,
    backup: str | None,
    expect_head: str | None,
    checkpoint: str | None,
    vkey: str | None,
    witnesses: tuple[str, ...],
    quorum: int | None,
    as_json: bool,
) -> None:
    """Verify the hash chain from the stored bytes (exit 1 at the first bad seq).

    By default every event is also parsed (canonical form, typed data) and its
    indexed columns compared with its bytes.  --chain-only checks each body's
    SHA-256, seq, batch and prevHash from the bytes alone, several times faster.
    A compacted log starts at its log.compacted event; --backup then checks
    the backup it names (SHA-256, its own chain, its head) and that the live
    log is that backup's log with the pruned runs' events left out; for the
    backup a log.migrated event names, that each of its events is, byte for
    byte, the event at the same seq.  --expect-head SEQ:HASH anchors the log
    out of band: the event at SEQ must still have HASH, so the log still
    extends a head written down earlier.
    The Merkle tree is checked against the events too.  --checkpoint FILE
    --vkey KEY checks a signed checkpoint (and with --witness, its witness
    cosignatures, --quorum of them) and that its root is this log's tree's
    at its size.
    """
    anchor = parse_anchor(expect_head) if expect_head is not None else None
    if (checkpoint is None) != (vkey is None):
        raise InputError("--checkpoint and --vkey go together")
    note = None
    if checkpoint is not None and vkey is not None:
        note = _Note(Path(checkpoint), vkey, witnesses, quorum)
    with open_store(db, read_only=True) as store, activity("verifying the chain"):
        found = _verified(store, chain_only=chain_only, backup=backup, anchor=anchor, note=note)
    if found.signed is not None:
        held, what = found.signed
        click.echo(f"{'ok' if held else 'bad'}: checkpoint {checkpoint}: {what}", err=True)
    verdict(0 if found.ok else 1)
    if as_json:
        echo_json(_verified_json(found))
    else:
        _echo_verified(found, backup)
    if not found.ok:
        sys.exit(1)


class _Note(NamedTuple):
    """The signed checkpoint ``log verify`` checks, with the keys and quorum it needs."""

    path: Path
    vkey: str
    witnesses: tuple[str, ...]
    quorum: int | None


def _verified(
    store: EventStore,
    *,
    chain_only: bool,
    backup: str | None,
    anchor: Anchor | None,
    note: _Note | None,
) -> _Verified:
    """Walk the chain, then, if it holds, check each proof asked for."""
    report = store.verify(deep=not chain_only)
    if not report.ok:
        return _Verified(report, None, None, None)
    signed = None if note is None else _signed_checkpoint(store, note)
    pruned = _prune_proof(store, Path(backup)) if backup is not None else None
    migrated = None
    if backup is not None and (pruned is None or not pruned.named):
        migrated = _migration_proof(store, Path(backup))
        if migrated is not None:
            pruned = None  # the migration's backup, not a prune's
    proof = (
        prove(store, Path(backup))
        if backup is not None and migrated is None and pruned is None
        else None
    )
    held = (
        anchored(store, anchor, proof, Path(backup) if backup else None)
        if anchor is not None
        else None
    )
    return _Verified(report, signed, proof, held, migrated, pruned)


def _prune_proof(store: EventStore, backup: Path) -> PruneProof | None:
    """The proof of ``backup`` as the one a ``log.pruned`` names; None when none names it."""
    from pwf.store.opening import sqlite_file  # noqa: PLC0415 - with the proof
    from pwf.store.pruned import prove_pruned  # noqa: PLC0415

    try:
        live = sqlite_file(store.projections_file)  # a shared log's: the host's caught-up copy
    except InputError:
        return None
    return prove_pruned(store, live.connection, backup)


def _migration_proof(store: EventStore, backup: Path) -> BackupProof | None:
    """The proof of ``backup`` as the file a ``log.migrated`` names; None when it names another.

    A shared log's backup is proven against the shared log itself, whatever
    the local file holds (ADR 0104).
    """
    url = store_url()
    if url is None:
        return _proof_against(store, backup)
    with open_log(url) as shared:
        return _proof_against(shared, backup)


def _proof_against(log: EventLog, backup: Path) -> BackupProof | None:
    """:func:`_migration_proof` on ``log``.

    On a log that was never compacted any backup is the migration's, so a
    changed one fails here.
    """
    from pwf.store.compaction import file_sha256  # noqa: PLC0415 - with the proof
    from pwf.store.migration import migrated_event, prove_backup  # noqa: PLC0415

    event = migrated_event(log)
    if event is None:
        return None
    named = backup.is_file() and file_sha256(backup) == event.backup_sha256
    if not named and log.origin().seq != 0:  # a compacted log's backup, maybe
        return None
    return prove_backup(log, backup)


class _Verified(NamedTuple):
    """What ``log verify`` found: the chain, and each proof it was asked for (None: not asked)."""

    report: VerifyReport
    signed: tuple[bool, str] | None
    proof: Proof | None
    held: Held | None
    migrated: BackupProof | None = None
    pruned: PruneProof | None = None

    @property
    def ok(self) -> bool:
        """Whether the chain and every proof asked for hold."""
        return (
            self.report.ok
            and (self.proof is None or self.proof.ok)
            and (self.migrated is None or self.migrated.failure is None)
            and (self.pruned is None or self.pruned.failure is None)
            and (self.held is None or self.held.ok)
            and (self.signed is None or self.signed[0])
        )


def _verified_json(found: _Verified) -> dict[str, object]:
    """``log verify --json``'s object: the chain's verdict, the backup's and the anchor's."""
    report, proof, held = found.report, found.proof, found.held
    data: dict[str, object] = {
        "events": report.events,
        "firstBadSeq": report.first_bad_seq,
        "headSeq": report.head.seq,
        "ok": found.ok,
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
    if found.pruned is not None:
        data["backup"] = {
            "failure": found.pruned.failure,
            "ok": found.pruned.failure is None,
            "pruned": True,
            "proven": found.pruned.proven,
        }
    migrated = found.migrated
    if migrated is not None:
        data["backup"] = {
            "backupEvents": migrated.backup_events,
            "failure": migrated.failure,
            "migrated": True,
            "ok": migrated.failure is None,
        }
    if held is not None:
        data["expectHead"] = {
            "contentHash": held.content_hash,
            "failure": held.failure,
            "ok": held.ok,
            "seq": held.seq,
        }
    return data


def _echo_verified(found: _Verified, backup: str | None) -> None:
    """``log verify``'s lines: the first failure on stderr, or each proof that held."""
    report, proof, held = found.report, found.proof, found.held
    if not report.ok:
        click.echo(f"bad: seq {report.first_bad_seq}: {report.reason}", err=True)
    elif proof is not None and not proof.ok:
        click.echo(f"bad: backup {backup}: {proof.failure}", err=True)
    elif found.migrated is not None and found.migrated.failure is not None:
        click.echo(f"bad: backup {backup}: {found.migrated.failure}", err=True)
    elif found.pruned is not None and found.pruned.failure is not None:
        click.echo(f"bad: backup {backup}: {found.pruned.failure}", err=True)
    elif held is not None and not held.ok:
        click.echo(f"bad: expected head seq {held.seq}: {held.failure}", err=True)
    else:
        click.echo(f"ok: {report.events} events, chain intact, head seq {report.head.seq}")
        if proof is not None:
            click.echo(
                f"ok: the log is {backup}'s {proof.backup_events} events compacted:"
                f" {proof.compared} kept, {proof.removed_runs} runs removed"
            )
        if found.pruned is not None:
            click.echo(
                f"ok: {backup} holds each of the {found.pruned.proven} events log.pruned took,"
                " with the content hash and Merkle leaf the log kept"
            )
        if found.migrated is not None:
            click.echo(
                f"ok: each of {backup}'s {found.migrated.backup_events} events is the event"
                " at its seq here, byte for byte (log.migrated names its SHA-256)"
            )
        if held is not None:
            click.echo(f"ok: seq {held.seq} still has contentHash {held.content_hash}")


def _signed_checkpoint(store: EventStore, note: _Note) -> tuple[bool, str]:
    """Whether the signed checkpoint ``note`` holds for this log, and what was found."""
    file = sqlite_file(store.projections_file)
    with file.snapshot():
        try:
            tree = proofs(file.connection, file.head())
            text = note.path.read_text(encoding="utf-8")
            return True, check_checkpoint(text, note.vkey, note.witnesses, note.quorum, tree)
        except (InputError, StoreError) as error:
            return False, str(error)


@log.command()
@db_option
@json_option
def head(db: str | None, as_json: bool) -> None:
    """Print the log's head: its last seq, that event's contentHash and its batch.

    Written down out of band, ``SEQ:HASH`` is what `pwf log verify
    --expect-head` later proves the log still extends.
    """
    with open_store(db, read_only=True) as store:
        tip = store.head()
    if as_json:
        data = {"batch": tip.batch, "contentHash": tip.content_hash, "seq": tip.seq}
        echo_json(data)
    elif tip.content_hash is None:
        click.echo("empty log: seq 0, no contentHash, batch 0")
    else:
        click.echo(f"{tip.seq}:{tip.content_hash} batch {tip.batch}")


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
    """Write the log as JSONL: each event's stored bytes, one per line (--out: mode 0600).

    A pruned log's removed events have no bytes here: a range that holds one
    is refused, naming the backup that holds it (ADR 0103).
    """
    with open_store(db, read_only=True) as store:
        _whole(store, first, last)
        if out_path == "-":
            written = export_jsonl(store, sys.stdout.buffer, first, last)
        else:
            with os.fdopen(
                create_file(Path(out_path), exclusive=False, truncate=True), "wb"
            ) as out:
                written = export_jsonl(store, out, first, last)
    logs.info("log.exported", events=written)


def _whole(store: EventStore, first: int, last: int | None) -> None:
    """Refuse an export of ``first..last`` that would leave out a pruned event's bytes.

    Raises:
        InputError: an event of the range was pruned.
    """
    from pwf.store.pruned import gone  # noqa: PLC0415 - a pruned log's only

    found = next(store.pruned(first, last), None)
    if found is not None:
        raise InputError(
            f"{gone(store, found[0])};"
            " export that backup, or the range after the pruned seqs (--from)"
        )


@log.command(name="import")
@db_option
@click.argument("source", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@json_option
def import_(db: str | None, source: str, as_json: bool) -> None:
    """Import a JSONL log into a new (empty) database, checking every line first.

    Any fault (not canonical, bad hash, broken chain, gap) refuses the whole file.
    A new database is built in a scratch file beside it and appears under its
    name only when the whole log is in, so an interrupted import leaves none.
    """
    from pwf.cli._import import import_file  # noqa: PLC0415 - only import loads it

    path = Settings.load(db=db).db
    head, events = import_file(path, source)
    if as_json:
        shown = {"events": events, "head": head.content_hash, "seq": head.seq}
        echo_json(shown)
    else:
        click.echo(
            f"imported {events} events up to seq {head.seq} into {path}, head {head.content_hash}"
        )
