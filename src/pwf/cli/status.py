"""``pwf status``: the operator's overview of one database (ADR 0034)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from pwf import canonical
from pwf.cli._options import db_option, json_option, open_store, printable
from pwf.cli._times import TIME, duration, resolve_format, shown, time_format_option, wall_ms

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pwf.cli._times import TimeFormat
    from pwf.explain import Finding
    from pwf.status import Overview, Waiting

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
@time_format_option
@json_option
def status(db: str | None, now: int | None, time_format: str | None, as_json: bool) -> None:
    """Show counts, every waiting run and interaction, and lifecycle contradictions.

    The counts are host.status's.  Every run that has not ended and every
    interaction that still waits is listed with the first rule of its
    pwf explain diagnosis, the seq since which it holds and for how long.
    Runs whose queue status is outside the allowed lifecycle table are
    contradictions: then the exit code is 1.  The database is only read.
    """
    from pwf.status import overview  # noqa: PLC0415 - the explain rules load only for status

    with open_store(db, read_only=True) as store:
        found = overview(store, wall_ms() if now is None else now)
    if as_json:
        click.echo(canonical.encode(found).decode())
    else:
        for line in _lines(found, resolve_format(time_format)):
            click.echo(printable(line))
    if found.contradictory:
        sys.exit(1)


def _lines(found: Overview, form: TimeFormat) -> Iterator[str]:
    yield f"head seq {found.head_seq}, now {shown(found.now, form, found.now)}"
    pairs = [f"{name} {value}" for name, value in found.counts.items()]
    yield "counts:"
    for first in range(0, len(pairs), 3):
        yield "  " + ", ".join(pairs[first : first + 3])
    for title, items in (("runs", found.runs), ("interactions", found.interactions)):
        yield f"waiting {title}: {len(items)}" if items else f"waiting {title}: none"
        for item in items:
            yield from _item(item, form, found.now)
    if not found.contradictions:
        yield "lifecycle contradictions: none"
        return
    yield f"lifecycle contradictions: {len(found.contradictions)}"
    for pair in found.contradictions:
        yield f"  {pair.run_id}: run {pair.run_status} with queue {pair.queue_status}"


def _item(item: Waiting, form: TimeFormat, now: int) -> Iterator[str]:
    since = ""
    if item.since_seq is not None:
        since = f" since seq {item.since_seq}"
        if item.since_at is not None and item.waiting_ms is not None:
            since += f" ({shown(item.since_at, form, now)}, {duration(item.waiting_ms)})"
    yield f"  {item.id} {item.status}: {item.rule or 'no rule holds'}{since}"
    yield from _findings(item.diagnosis, "    ")


def _findings(findings: tuple[Finding, ...], indent: str) -> Iterator[str]:
    for finding in findings:
        yield f"{indent}{finding.rule}: {finding.summary}"
        yield from _findings(finding.diagnosis, indent + "  ")
