"""``pwf status``: the operator's overview of one database (ADR 0034)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
import msgspec

from pwf import canonical
from pwf.cli import verdict
from pwf.cli._options import db_option, json_option, open_store, printable
from pwf.cli._times import (
    TIME,
    duration,
    resolve_format,
    shown,
    time_format_option,
    timed,
    wall_ms,
)
from pwf.status import LIMIT, overview_parts

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from pwf.cli._times import TimeFormat
    from pwf.explain import Finding
    from pwf.status import Parts, Waiting

__all__ = ["status"]


@click.command()
@db_option
@click.option(
    "--now",
    "now",
    type=TIME,
    default=None,
    help="The time waits are measured to and deadline rules compare with"
    " (epoch ms or ISO 8601; default: the wall clock).",
)
@click.option(
    "--limit",
    "limit",
    metavar="N",
    type=click.IntRange(min=1),
    default=LIMIT,
    show_default=True,
    help="List at most N runs, N interactions and N contradictions; the counts cover all.",
)
@click.option("--all", "show_all", is_flag=True, help="List every item (no --limit).")
@time_format_option
@json_option
def status(  # noqa: PLR0913, PLR0917 - one parameter per option
    db: str | None,
    now: int | None,
    limit: int,
    show_all: bool,
    time_format: str | None,
    as_json: bool,
) -> None:
    """Show counts, the runs not ended and interactions not consumed, and contradictions.

    The counts are host.status's.  The runs that have not ended and the
    interactions not yet consumed are counted by status and the oldest are
    listed (--limit, --all) with the first rule of their pwf explain
    diagnosis, the seq since which it holds and for how long.  Runs whose
    queue status is outside the allowed lifecycle table are contradictions:
    then the exit code is 1.  The database is only read.
    """
    clock = wall_ms() if now is None else now
    with (
        open_store(db, read_only=True) as store,
        overview_parts(store, clock, None if show_all else limit) as parts,
    ):
        verdict(1 if parts.head.contradictory else 0)
        if as_json:
            _stream_json(parts)
        else:
            for line in _lines(parts, resolve_format(time_format)):
                click.echo(printable(line))
    if parts.head.contradictory:
        sys.exit(1)


def _stream_json(parts: Parts) -> None:
    """The overview as canonical JSON, each listed item read, encoded and written in turn.

    The bytes are ``canonical.encode(overview(...))``'s (a test holds them
    equal); memory stays that of one item under ``--all``.
    """
    out = sys.stdout
    data = msgspec.to_builtins(parts.head)
    lists: dict[str, Iterable[object]] = {
        "contradictions": data.pop("contradictions"),
        "interactions": parts.interactions,
        "runs": parts.runs,
    }
    data.pop("interactions")
    data.pop("runs")
    out.write("{")
    for index, key in enumerate(sorted([*data, *lists])):
        out.write(("," if index else "") + canonical.encode(key).decode() + ":")
        if key not in lists:
            out.write(canonical.encode(data[key]).decode())
            continue
        out.write("[")
        for number, item in enumerate(lists[key]):
            # to_builtins first: canonical.encode of a Struct walks a slow generic path
            shown = canonical.encode(msgspec.to_builtins(item)).decode()
            out.write(("," if number else "") + shown)
        out.write("]")
    out.write("}\n")


def _lines(parts: Parts, form: TimeFormat) -> Iterator[str]:
    found = parts.head
    yield f"head seq {found.head_seq}, now {shown(found.now, form, found.now)}"
    pairs = [f"{name} {value}" for name, value in found.counts.items()]
    yield "host.status counts:"
    for first in range(0, len(pairs), 3):
        yield "  " + ", ".join(pairs[first : first + 3])
    lists = (
        ("runs not ended", found.open_runs, parts.runs),
        ("interactions not consumed", found.open_interactions, parts.interactions),
    )
    for title, by_status, items in lists:
        total = sum(by_status.values())
        if not total:
            yield f"{title}: none"
            continue
        counted = ", ".join(f"{status} {count}" for status, count in by_status.items())
        yield f"{title}: {total} ({counted})"
        listed = 0
        for item in items:
            listed += 1
            yield from _item(item, form, found.now)
        yield from _more(total, listed)
    total = int(str(found.counts.get("lifecycleContradictions", 0)))
    if not total:
        yield "lifecycle contradictions: none"
        return
    yield f"lifecycle contradictions: {total}"
    for pair in found.contradictions:
        yield f"  {pair.run_id}: run {pair.run_status} with queue {pair.queue_status}"
    yield from _more(total, len(found.contradictions))


def _more(total: int, listed: int) -> Iterator[str]:
    if total > listed:
        yield f"  … and {total - listed} more (--limit N or --all to list them)"


def _item(item: Waiting, form: TimeFormat, now: int) -> Iterator[str]:
    since = ""
    if item.since_seq is not None:
        since = f" since seq {item.since_seq}"
        if item.since_at is not None and item.waiting_ms is not None:
            since += f" ({shown(item.since_at, form, now)}, {duration(item.waiting_ms)})"
    yield f"  {item.id} {item.status}: {item.rule or 'no rule holds'}{since}"
    yield from _findings(item.diagnosis, form, now, "    ")


def _findings(
    findings: tuple[Finding, ...], form: TimeFormat, now: int, indent: str
) -> Iterator[str]:
    for finding in findings:
        yield f"{indent}{finding.rule}: {timed(finding.summary, finding.times, form, now)}"
        yield from _findings(finding.diagnosis, form, now, indent + "  ")
