"""``pwf replay``, ``pwf rebuild`` and ``pwf verify``: fold the log into fresh read models."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

import click

from pwf import canonical, logs
from pwf.cli._options import db_option, echo_json, file_option, json_option, judged, open_store
from pwf.commands.prune import parse_cutoff
from pwf.errors import CommandError, InputError
from pwf.fold.rebuild import rebuild
from pwf.fold.replay import replay
from pwf.host.prune import resolve_cutoff
from pwf.verify import check

if TYPE_CHECKING:
    from collections.abc import Iterator

    from click._termui_impl import ProgressBar

    from pwf.fold.replay import ReplayReport
    from pwf.fold.workfile import Progress
    from pwf.verify import Check, RowDifference, Value

__all__ = ["rebuild_command", "replay_command", "verify_command"]

WIDTH: Final = 100
"""Characters of a value printed before it is cut (``--json`` prints it whole)."""


class _Bar:
    """A progress bar on stderr, drawn on the first report of progress."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: ProgressBar[int] | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
        self.bar.length = total
        self.bar.update(done - self.bar.pos)

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.render_finish()


def _progress(label: str) -> _Bar | None:
    """A bar when stderr is a terminal; nothing otherwise (scripts and pipes stay quiet)."""
    return _Bar(label) if sys.stderr.isatty() else None


def _finish(bar: Progress | None) -> None:
    if isinstance(bar, _Bar):
        bar.finish()


@click.command(name="replay")
@db_option
@click.option(
    "--until",
    "until_seq",
    type=click.IntRange(min=0),
    default=None,
    metavar="SEQ",
    help="Fold the events up to this seq, rounded down to a whole batch.",
)
@click.option(
    "--until-time",
    "until_time",
    default=None,
    metavar="TIME",
    help=(
        "Fold the events up to the first one stamped after TIME: epoch milliseconds,"
        " or ISO 8601 such as 2026-08-01T16:30:00Z (without a zone: local time)."
    ),
)
@file_option(
    "--out", "out", "The database to write; it must not exist yet.", required=True, metavar="FILE"
)
@json_option
def replay_command(
    db: str | None, until_seq: int | None, until_time: str | None, out: str, as_json: bool
) -> None:
    """Fold the log up to a point into a new database with every projection.

    The events are copied verbatim, so the new file is a pwf database that
    `pwf log verify` and `pwf query` accept.  Batches are folded whole: a
    point inside a batch stops at the end of the batch before it, and the
    output says which seq was reached.  Without --until or --until-time the
    whole log is folded.
    """
    if until_seq is not None and until_time is not None:
        raise click.UsageError("--until and --until-time exclude each other")
    bar = _progress("replaying")
    with open_store(db, read_only=True) as store:
        report = replay(
            store, out, until_seq=until_seq, until_time=_until_time(until_time), progress=bar
        )
    _finish(bar)
    logs.info("log.replayed", seq=report.head.seq, out=str(report.out))
    if as_json:
        echo_json(_replay_json(report))
    else:
        click.echo(_replay_line(report))


def _until_time(text: str | None) -> int | None:
    """``--until-time`` in epoch milliseconds: digits as they are, or ISO 8601.

    ISO 8601 is read as ``Date.parse`` reads it; a date-time without a zone
    is read in this host's local time zone, with a warning, as ``pwf state
    prune --before`` reads it (ADR 0019).

    Raises:
        InputError: the text is neither.
    """
    if text is None:
        return None
    if text.isascii() and text.isdigit():
        return int(text)
    refused = InputError(f"--until-time takes epoch milliseconds or an ISO 8601 time, not {text!r}")
    cutoff = parse_cutoff(text)
    if cutoff is None:
        raise refused
    if not cutoff.zoned:
        click.echo(
            f"warning: --until-time {text} has no time zone; it is read in local time", err=True
        )
    try:
        return resolve_cutoff(cutoff)
    except CommandError:
        raise refused from None


def _replay_json(report: ReplayReport) -> dict[str, object]:
    return {
        "batch": report.head.batch,
        "contentHash": report.head.content_hash,
        "events": report.events,
        "logSeq": report.log_seq,
        "out": str(report.out),
        "requestedSeq": report.requested,
        "seq": report.head.seq,
        "tables": report.tables,
    }


def _replay_line(report: ReplayReport) -> str:
    head = report.head
    line = (
        f"replayed {report.events} events into {report.out} ({report.tables} tables):"
        f" reached seq {head.seq}, batch {head.batch}"
    )
    requested = report.requested
    if requested is not None and requested > report.log_seq:
        return f"{line}; the log ends at seq {report.log_seq}"
    if requested is not None and requested > head.seq:
        return (
            f"{line}; seq {requested} is inside batch {head.batch + 1},"
            " which is folded whole or not at all"
        )
    return line


@click.command(name="rebuild")
@db_option
@json_option
def rebuild_command(db: str | None, as_json: bool) -> None:
    """Rebuild every projection from the log, atomically.

    The log is folded into a scratch file beside the database while writers
    carry on; then, under the write lock, the events appended meanwhile are
    folded too and the rebuilt tables replace the live ones in one
    transaction.  A failure or crash before that commit leaves the live
    projections as they were.
    """
    bar = _progress("rebuilding")
    with open_store(db) as store:
        report = rebuild(store, progress=bar)
    _finish(bar)
    logs.info("projections.rebuilt", events=report.events, seq=report.seq, tables=report.tables)
    if as_json:
        shown = {"events": report.events, "seq": report.seq, "tables": report.tables}
        echo_json(shown)
    else:
        click.echo(
            f"rebuilt {report.events} events up to seq {report.seq} into {report.tables} tables"
        )


@click.command(name="verify")
@db_option
@click.option(
    "--rows",
    type=click.IntRange(min=1),
    metavar="N",
    default=5,
    show_default=True,
    help="Differing rows to report.",
)
@json_option
def verify_command(db: str | None, rows: int, as_json: bool) -> None:
    """Verify the hash chain, then that the live projections equal a rebuild of the log.

    Exit 0 when both hold.  Exit 1 at the first bad seq, or at the first
    difference: the projections' checkpoints first, then the projection
    tables by name.  A few differing rows are shown by primary key, with the
    differing columns and both values (BLOBs as lower-case hex).  Exit 2 for
    bad input.
    """
    bar = _progress("verifying")
    with open_store(db, read_only=True) as store:
        found = check(store, progress=bar, rows=rows)
    _finish(bar)
    judged(found.ok, as_json, lambda: _verify_json(found), lambda: _verify_lines(found))


def _verify_json(found: Check) -> dict[str, object]:
    difference = found.difference
    data: dict[str, object] = {
        "events": found.chain.events,
        "firstBadSeq": found.chain.first_bad_seq,
        "ok": found.ok,
        "reason": found.chain.reason,
        "table": None,
        "tables": found.tables,
    }
    if difference is not None:
        data["reason"] = difference.reason
        data["table"] = difference.table
        data["rows"] = [
            {
                "columns": {
                    name: {"live": a, "rebuilt": b} for name, (a, b) in row.columns.items()
                },
                "key": row.key,
                "kind": row.kind,
            }
            for row in difference.rows
        ]
    return data


def _verify_lines(found: Check) -> Iterator[str]:
    chain, difference = found.chain, found.difference
    if not chain.ok:
        yield f"bad: seq {chain.first_bad_seq}: {chain.reason}"
    elif difference is None:
        yield (
            f"ok: chain intact, projections equal the log"
            f" ({chain.events} events, {found.tables} tables)"
        )
    else:
        yield f"bad: table {difference.table}: {difference.reason}"
        for row in difference.rows:
            yield from _row_lines(difference.table, row)


def _row_lines(table: str, row: RowDifference) -> Iterator[str]:
    where = f"{table}[{', '.join(f'{name}={_shown(value)}' for name, value in row.key.items())}]"
    if row.kind == "onlyInLive":
        yield f"  only in live: {where}"
    elif row.kind == "onlyInRebuild":
        yield f"  only in the rebuild: {where}"
    for name, (live, rebuilt) in row.columns.items():
        yield f"  changed: {where}.{name}: live {_shown(live)}, rebuilt {_shown(rebuilt)}"


def _shown(value: Value) -> str:
    text = canonical.encode(value).decode()
    return text if len(text) <= WIDTH else f"{text[:WIDTH]}… ({len(text)} characters)"
