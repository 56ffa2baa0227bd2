"""``pwf explain interaction|run``: what touched it, where it is, and what it waits for."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, NamedTuple

import click

from pwf.cli._options import code_units, db_option, echo_json, json_option, open_store, printable
from pwf.cli._progress import activity
from pwf.cli._times import TIME, resolve_format, shown, time_format_option, timed
from pwf.explain import explain_interaction, explain_run

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pwf.cli._times import TimeFormat
    from pwf.explain import Explanation, Finding

__all__ = ["explain"]

_at_seq_option = click.option(
    "--at",
    "at_seq",
    metavar="SEQ",
    type=click.IntRange(min=1),
    default=None,
    help="Explain as of this seq: the log up to it is folded into a scratch read model.",
)
_now_option = click.option(
    "--now",
    "now",
    type=TIME,
    default=None,
    help="The time deadline rules compare with, epoch ms or ISO 8601"
    " (default: the time of the last event read).",
)


class _Times(NamedTuple):
    """How the explanation being printed shows times: the format and its ``now``."""

    form: TimeFormat
    now: int


def _folding(at_seq: int | None) -> AbstractContextManager[Callable[[int, int], None] | None]:
    """Progress on a terminal while ``--at`` folds the log; nothing for the live state."""
    return nullcontext() if at_seq is None else activity(f"folding the log up to seq {at_seq}")


def _cell(value: object, name: str, times: _Times) -> str:
    if value is None:
        return "-"
    if name.endswith("At"):
        return shown(value, times.form, times.now)
    return str(value)


def _state_lines(name: str, value: object, times: _Times, indent: str = "  ") -> Iterator[str]:
    """A state member as lines: objects on one line, lists one element per line."""
    if isinstance(value, list):
        yield f"{indent}{name}:" + ("" if value else " none")
        for element in value:
            yield from _state_lines("-", element, times, indent + "  ")
        return
    if isinstance(value, dict):
        members = " ".join(
            f"{key}={_cell(member, key, times)}"
            for key, member in value.items()
            if not isinstance(member, dict)
        )
        yield f"{indent}{name} {members}".rstrip()
        for key, member in value.items():
            if isinstance(member, dict):
                yield from _state_lines(key, member, times, indent + "  ")
        return
    yield f"{indent}{name}: {_cell(value, name, times)}"


def _findings(
    findings: tuple[Finding, ...], form: TimeFormat, now: int, indent: str = "  "
) -> Iterator[str]:
    for finding in findings:
        since = "" if finding.since_seq is None else f" (since seq {finding.since_seq})"
        text = timed(finding.summary, finding.times, form, now)
        yield f"{indent}{finding.rule}: {text}{since}"
        yield from _findings(finding.diagnosis, form, now, indent + "  ")


def _human(explanation: Explanation, form: TimeFormat, requested: int | None = None) -> str:
    times = _Times(form, explanation.now)
    header = f"{explanation.subject} {explanation.id} at seq {explanation.at_seq}"
    lines = [f"{header} (now {shown(explanation.now, form, explanation.now)})"]
    if requested is not None and requested != explanation.at_seq:
        lines.append(
            f"seq {requested} is inside a batch, which is read whole or not at all:"
            f" this is the state after seq {explanation.at_seq}, the end of the batch before it"
        )
    lines.append("state:")
    for name, value in explanation.state.items():
        lines.extend(_state_lines(name, value, times))
    lines.append("timeline:")
    rows = [
        (str(item.seq), str(item.batch), shown(item.at, form, explanation.now), item.type)
        for item in explanation.timeline
    ]
    widths = [max((len(row[column]) for row in rows), default=0) for column in range(4)]
    for row, item in zip(rows, explanation.timeline, strict=True):
        cells = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        cause = "" if item.cause is None else f"  <- {item.cause.text()}"
        text = timed(item.summary, item.times, form, explanation.now)
        lines.append(f"  {cells}  {text}{cause}")
    lines.append("diagnosis:")
    lines.extend(_findings(explanation.diagnosis, form, explanation.now))
    return "\n".join(lines)


def _show(
    explanation: Explanation, as_json: bool, time_format: str | None, requested: int | None
) -> None:
    if as_json:
        echo_json(explanation)
    else:
        click.echo(printable(_human(explanation, resolve_format(time_format), requested)))


@click.group()
def explain() -> None:
    """Explain an interaction or a run: its timeline, its state and a diagnosis.

    The timeline lists every event that touched it with seq, batch, time,
    what changed and its cause (the client request or worker message).  The
    diagnosis names the rules that hold, each with the seq since which it
    holds (ADR 0016).  The database is only read.
    """


def _subject_command(name: str, explaining: Callable[..., Explanation], doc: str) -> click.Command:
    """``pwf explain NAME ID``: the same options and output for each kind of subject."""

    def command(  # noqa: PLR0913, PLR0917 - one option per setting
        subject_id: str,
        db: str | None,
        at_seq: int | None,
        now: int | None,
        time_format: str | None,
        as_json: bool,
    ) -> None:
        with open_store(db, read_only=True) as store, _folding(at_seq) as progress:
            explanation = explaining(store, subject_id, at_seq, now, progress)
        _show(explanation, as_json, time_format, at_seq)

    command.__doc__ = doc
    options = (
        click.argument("subject_id", metavar="ID", callback=code_units),
        db_option,
        _at_seq_option,
        _now_option,
        time_format_option,
        json_option,
    )
    for option in reversed(options):
        command = option(command)
    return explain.command(name=name)(command)


interaction = _subject_command(
    "interaction",
    explain_interaction,
    """Explain an interactive request: what it is waiting for and since which seq.

    Shows the request, its messages, turns, attempt deadline, submissions and
    the session's coordinator, every event that touched it, and the diagnosis.
    An unknown ID exits 2.
    """,
)
run = _subject_command(
    "run",
    explain_run,
    """Explain a run: its queue, worker, attempts and what it is waiting for.

    A run parked on an interaction includes that interaction's own diagnosis.
    An unknown ID exits 2.
    """,
)
