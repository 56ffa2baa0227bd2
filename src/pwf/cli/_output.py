"""Rows out, the way sqlite-utils prints them: a table, JSON, NL-JSON, CSV or TSV.

A listing is a sequence of column names and rows of values.  ``--columns``
picks and orders columns; ``--limit``/``--offset`` page; BLOBs (32-byte
hashes) are lowercase hex in every form; columns named ``at`` or ending in
``_at`` are times, printed in the ``--time-format`` in tables, CSV and TSV
and as raw epoch milliseconds in JSON and NL-JSON (ADR 0035).
"""

from __future__ import annotations

import csv
import functools
import sys
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import click

from pwf import canonical
from pwf.cli._options import echo_json, json_flag
from pwf.cli._times import TIME, resolve_format, shown, time_format_option

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from pwf.cli._times import TimeFormat

__all__ = [
    "Form",
    "Shape",
    "Window",
    "is_time_column",
    "listing",
    "output_form",
    "output_options",
    "page_options",
    "pick_columns",
    "print_rows",
    "range_options",
    "shaped",
    "with_options",
]

Form = Literal["table", "json", "nl", "csv", "tsv"]
FORMS: Final = ("json", "nl", "csv", "tsv")

F = Any


def _flag(form: str, text: str) -> Callable[[F], F]:
    return click.option(f"--{form}", f"as_{form}", is_flag=True, help=text)


OUTPUT: Final = "pwf.output"
"""Key in the context's ``meta`` of the form ``-o/--output`` chose."""


def _remember_output(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[OUTPUT] = value


output_options: Final = (
    click.option(
        "-o",
        "--output",
        type=click.Choice(["table", *FORMS]),
        default=None,
        expose_value=False,
        callback=_remember_output,
        help="Output form: table (the default), json, nl, csv or tsv;"
        " --json, --nl, --csv and --tsv say the same.",
    ),
    _flag("nl", "Print one JSON object per row (newline-delimited JSON)."),
    _flag("csv", "Print CSV with a header row."),
    _flag("tsv", "Print tab-separated values with a header row."),
    click.option(
        "--columns",
        "columns",
        metavar="A,B,...",
        default=None,
        help="Only these columns, in this order (comma-separated).",
    ),
    time_format_option,
)
"""``-o/--output --nl --csv --tsv --columns --time-format`` (each command keeps its ``--json``)."""

page_options: Final = (
    click.option(
        "--limit", "limit", metavar="N", type=click.IntRange(min=1), help="At most N rows."
    ),
    click.option(
        "--offset",
        "offset",
        metavar="N",
        type=click.IntRange(min=0),
        default=0,
        help="Skip the first N rows.",
    ),
)

range_options: Final = (
    click.option(
        "--since",
        "since",
        type=TIME,
        default=None,
        help="Only rows at or after TIME (epoch ms or ISO 8601).",
    ),
    click.option("--until", "until", type=TIME, default=None, help="Only rows at or before TIME."),
)


def with_options(command: F, *groups: Sequence[Callable[[F], F]]) -> F:
    """Apply option decorators in the order they are listed."""
    for group in reversed(groups):
        for option in reversed(group):
            command = option(command)
    return command


def shaped(command: F) -> F:
    """The output options and ``--json``, handed to ``command`` as one ``shape``."""

    @functools.wraps(command)
    def run(  # noqa: PLR0913 - the output options, gathered here once
        *,
        columns: str | None,
        time_format: str | None,
        as_json: bool,
        as_nl: bool,
        as_csv: bool,
        as_tsv: bool,
        **rest: object,
    ) -> object:
        flags = {"as_json": as_json, "as_nl": as_nl, "as_csv": as_csv, "as_tsv": as_tsv}
        return command(shape=Shape.of(columns, time_format, **flags), **rest)

    return with_options(run, output_options, (json_flag,))


class Window(NamedTuple):
    """Which rows of a listing print: ``--since/--until`` and ``--limit/--offset``."""

    since: int | None
    until: int | None
    limit: int | None
    offset: int


def listing(command: F) -> F:
    """The range, page and output options, handed to ``command`` as ``window`` and ``shape``."""
    inner = shaped(command)

    @functools.wraps(inner)
    def run(
        *, since: int | None, until: int | None, limit: int | None, offset: int, **rest: object
    ) -> object:
        return inner(window=Window(since, until, limit, offset), **rest)

    return with_options(run, range_options, page_options)


def output_form(**flags: bool) -> Form:
    """The one output form chosen by ``-o/--output`` or ``--json --nl --csv --tsv`` (or table).

    ``--json`` is ``-o json`` and so on: the flags are synonyms of the switch
    (ADR 0079), so ``-o json --json`` is one choice, not two.

    Raises:
        click.UsageError: two different forms were asked for.
    """
    chosen = [f"--{form}" for form in FORMS if flags.get(f"as_{form}")]
    context = click.get_current_context(silent=True)
    output = None if context is None else context.meta.get(OUTPUT)
    if output is not None and [f"--{output}"] != chosen and chosen:
        chosen.insert(0, f"-o {output}")
    elif output is not None:
        chosen = [f"--{output}"]
    if len(chosen) > 1:
        raise click.UsageError(" and ".join(chosen) + " exclude each other")
    form: Form = chosen[0].removeprefix("--") if chosen else "table"  # type: ignore[assignment]
    return form


class Shape(NamedTuple):
    """How a listing prints: the output form, the ``--columns`` asked for, the time format."""

    form: Form
    columns: str | None
    time_format: str | None

    @classmethod
    def of(cls, columns: str | None, time_format: str | None, **flags: bool) -> Shape:
        """The shape the listing options ask for (see :func:`output_form`)."""
        return cls(output_form(**flags), columns, time_format)


def is_time_column(name: str) -> bool:
    """Whether a column holds epoch milliseconds: ``at`` and names ending in ``_at``."""
    return name == "at" or name.endswith("_at")


def pick_columns(
    available: Sequence[str], columns: str | None, default: Sequence[str]
) -> list[str]:
    """The columns to print: ``--columns`` checked against ``available``, else ``default``.

    Raises:
        click.BadParameter: a named column does not exist.
    """
    if columns is None:
        return list(default)
    names = [name.strip() for name in columns.split(",") if name.strip()]
    unknown = [name for name in names if name not in available]
    if unknown or not names:
        raise click.BadParameter(
            f"no column {', '.join(unknown) or '(none given)'}; choose from {', '.join(available)}",
            param_hint="--columns",
        )
    return names


def _json_value(value: object) -> object:
    return value.hex() if isinstance(value, bytes) else value


def _text(name: str, value: object, form: TimeFormat, now: int | None) -> str:
    if value is None:
        return "-"
    if is_time_column(name):
        return shown(value, form, now)
    return canonical.utf8(str(_json_value(value))).decode()  # a lone surrogate as U+FFFD


def print_rows(
    names: Sequence[str],
    rows: Iterable[Sequence[object]],
    form: Form,
    time_format: str | None,
    *,
    header: bool = True,
) -> None:
    """Print the rows (values in ``names`` order) in the chosen form, streaming where it can.

    ``header=False`` leaves out the CSV/TSV header (rows that continue a listing).
    """
    if form == "json":
        listing = [{n: _json_value(v) for n, v in zip(names, row, strict=True)} for row in rows]
        echo_json(listing)
        return
    if form == "nl":
        out = sys.stdout
        for row in rows:
            item = {n: _json_value(v) for n, v in zip(names, row, strict=True)}
            out.write(canonical.encode(item).decode() + "\n")
        return
    times = resolve_format(time_format)
    now = None
    if form in ("csv", "tsv"):
        writer = csv.writer(sys.stdout, dialect="excel" if form == "csv" else "excel-tab")
        if header:
            writer.writerow(names)
        for row in rows:
            writer.writerow(
                [
                    "" if v is None else _text(n, v, times, now)
                    for n, v in zip(names, row, strict=True)
                ]
            )
        return
    for line in _table(names, rows, times):
        click.echo(line)


def _table(
    names: Sequence[str], rows: Iterable[Sequence[object]], form: TimeFormat
) -> Iterator[str]:
    """An aligned text table, header first; NULL is ``-``."""
    cells = [list(names)]
    cells += [[_text(n, v, form, None) for n, v in zip(names, row, strict=True)] for row in rows]
    widths = [max(len(line[column]) for line in cells) for column in range(len(names))]
    for line in cells:
        yield "  ".join(
            text.ljust(width) for text, width in zip(line, widths, strict=True)
        ).rstrip()
