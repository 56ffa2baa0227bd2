"""``pwf diff``, ``pwf digest`` and ``pwf log diff``: compare read models and logs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

import click

from pwf import canonical
from pwf.cli import verdict
from pwf.cli._options import echo_json, json_option, judged
from pwf.cli._progress import activity
from pwf.diff import diff_databases, diff_logs, digest_database

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pwf.diff import DatabaseDiff, Difference, Value

LIMIT: Final = 50
"""Differences printed per table; the rest are counted (``--json`` lists them all)."""
WIDTH: Final = 100
"""Characters of a value printed before it is cut (``--json`` prints it whole)."""


@click.command()
@click.argument("a")
@click.argument("b")
@click.option(
    "--table",
    "tables",
    multiple=True,
    metavar="NAME",
    help="Compare only this projection table (repeatable).",
)
@json_option
def diff(a: str, b: str, tables: tuple[str, ...], as_json: bool) -> None:
    """Compare the projections of two databases row by row (exit 1 when they differ).

    Rows are paired by primary key.
    The report names every row only in A or only in B, and every changed
    column with both values (BLOBs as lower-case hex).
    Exit 0 equal, 1 different, 2 bad input: a missing file, not a pwf
    database, or different tables, columns or projection versions.
    """
    with activity("comparing"):
        report = diff_databases(a, b, tables)
    judged(report.equal, as_json, lambda: _diff_json(report), lambda: _diff_lines(report))


def _diff_json(report: DatabaseDiff) -> dict[str, object]:
    tables: dict[str, object] = {}
    for name, found in report.tables.items():
        tables[name] = {
            "onlyInA": [list(item.key) for item in found if item.kind == "onlyInA"],
            "onlyInB": [list(item.key) for item in found if item.kind == "onlyInB"],
            "changed": [
                {"key": list(item.key), "column": item.column, "a": item.a, "b": item.b}
                for item in found
                if item.kind == "changed"
            ],
        }
    return {"equal": report.equal, "tables": tables}


def _diff_lines(report: DatabaseDiff) -> Iterator[str]:
    for name, found in report.tables.items():
        yield f"{name}: {_count(len(found), 'difference')}"
        for item in found[:LIMIT]:
            yield f"  {_line(name, item)}"
        if len(found) > LIMIT:
            yield f"  … {len(found) - LIMIT} more"
    if report.equal:
        yield "equal"
    else:
        yield f"{_count(report.count, 'difference')} in {_count(len(report.tables), 'table')}"


def _line(table: str, item: Difference) -> str:
    row = f"{table}[{', '.join(_key_part(value) for value in item.key)}]"
    if item.kind == "onlyInA":
        return f"only in A: {row}"
    if item.kind == "onlyInB":
        return f"only in B: {row}"
    return f"changed: {row}.{item.column}: {_shown(item.a)} -> {_shown(item.b)}"


def _key_part(value: Value) -> str:
    return value if isinstance(value, str) else canonical.encode(value).decode()


def _shown(value: Value) -> str:
    text = canonical.encode(value).decode()
    return text if len(text) <= WIDTH else f"{text[:WIDTH]}… ({len(text)} characters)"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@click.command()
@click.argument("db")
@json_option
def digest(db: str, as_json: bool) -> None:
    """Print one SHA-256 per projection table and one over all, for comparing machines.

    A table's digest covers its rows in primary-key order, each written as a
    canonical JSON array of its columns (BLOBs as lower-case hex) and a newline.
    The "all" line covers the lines "TABLE HEX" of every table in name order,
    so two machines agree when their "all" lines do.
    """
    with activity("digesting"):
        found = digest_database(db)
    if as_json:
        echo_json({"all": found.all, "tables": found.tables})
        return
    for name, value in found.tables.items():
        click.echo(f"{value}  {name}")
    click.echo(f"{found.all}  all")


@click.command(name="diff")
@click.argument("a")
@click.argument("b")
@json_option
def log_diff(a: str, b: str, as_json: bool) -> None:
    """Find the first seq where two event logs diverge (exit 1 when they do).

    Events are compared seq by seq over their stored canonical bytes.
    When one log is a prefix of the other, the shorter side is named.
    Exit 0 identical, 1 divergent, 2 bad input.
    """
    found = diff_logs(a, b)
    verdict(0 if found.identical else 1)
    if as_json:
        data = {
            "common": found.common,
            "firstDivergence": found.first_divergence,
            "identical": found.identical,
            "shorter": found.shorter,
            "shorterEndsAt": found.shorter_ends_at,
        }
        echo_json(data)
    elif found.identical:
        click.echo(f"identical: {found.common} events")
    else:
        click.echo(f"first divergence at seq {found.first_divergence}")
        if found.shorter is not None:
            other = "B" if found.shorter == "A" else "A"
            click.echo(f"{found.shorter} ends at seq {found.shorter_ends_at}, {other} continues")
    if not found.identical:
        sys.exit(1)
