"""``pwf dev``: developer tasks (generated artifacts)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pwf.artifacts import sync_artifacts


@click.group()
def dev() -> None:
    """Developer tasks."""


@dev.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(),
    help="Repository root (default: current directory).",
)
@click.option("--check", is_flag=True, help="Only compare; exit 1 when a file drifted.")
def export(root: Path, check: bool) -> None:
    """Write events/*.schema.json and projections/*.sql from the code."""
    drifted = sync_artifacts(root, check=check)
    for relative in drifted:
        click.echo(f"{'drifted' if check else 'wrote'}: {relative}")
    if check and drifted:
        click.echo("generated artifacts are out of date: run `pwf dev export`", err=True)
        sys.exit(1)
