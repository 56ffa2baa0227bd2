"""``pwf schema``: the JSON Schemas of the client operations' payloads and receipts."""

from __future__ import annotations

import json

import click

from pwf.protocol.schemas import OPERATION_TYPES, operation_schema

__all__ = ["schema"]


@click.command()
@click.argument("operation", required=False, metavar="[OPERATION]")
def schema(operation: str | None) -> None:
    """Print the JSON Schema of OPERATION's payload and of its receipt.

    Without OPERATION, list the 40 operations.  The schemas are generated
    from the types the host's answers are checked against; the same files
    are in the repository's schemas/ directory, and docs/operations.md shows
    one request line of every operation with its answer.
    """
    if operation is None:
        for name in sorted(OPERATION_TYPES):
            click.echo(name)
        return
    if operation not in OPERATION_TYPES:
        raise click.BadParameter(
            f"unknown operation {operation!r}; `pwf schema` lists them", param_hint="OPERATION"
        )
    click.echo(
        json.dumps(operation_schema(operation), indent=2, sort_keys=True, ensure_ascii=False)
    )
