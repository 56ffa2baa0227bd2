"""``pwf call`` in the command list; ``pwf._entry`` runs it without click when invoked."""

from __future__ import annotations

import sys

import click

from pwf.callhost import USAGE
from pwf.callhost import main as run

__all__ = ["call"]


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
    help=USAGE.split("\n\n", 1)[1].split("\nOptions:")[0],
    short_help="Send request lines on stdin to the running host.",
)
@click.pass_context
def call(ctx: click.Context) -> None:
    """Send request lines on stdin to the running host."""
    sys.exit(run(list(ctx.args)))
