"""``pwf state backup``: maintenance commands of the original, from the command line."""

from __future__ import annotations

import sys
import uuid

import click

from pwf import canonical
from pwf.cli._options import db_option, json_option, open_store
from pwf.cli.request import _refuse_if_served, at_option, now_ms
from pwf.host import Host
from pwf.protocol.client import ClientRequest

__all__ = ["state"]


@click.group()
def state() -> None:
    """Maintenance of the state database, recorded like the original's commands."""


@state.command()
@click.argument("destination", metavar="DEST")
@db_option
@at_option
@json_option
def backup(destination: str, db: str | None, at: int | None, as_json: bool) -> None:
    """Copy the database to DEST (absolute) and check the copy.

    The live database must pass its integrity checks; the copy is made with
    SQLite's online backup, gets mode 0600 (parent directories 0700), and is
    reopened read-only to check its integrity, its hash chain and that its
    projections equal its log.  The command is recorded as state.backup.
    """
    key = f"backup-{uuid.uuid4()}"  # noqa: TID251 - the CLI is the edge that mints request ids
    request = ClientRequest(
        request_id=key,
        client_id="pwf-cli",
        operation="state.backup",
        idempotency_key=key,
        payload={"destination": destination},
    )
    with open_store(db) as store:
        now = now_ms(at)
        _refuse_if_served(store, now)
        response = Host(store).request(request, now)
    if as_json:
        click.echo(
            canonical.encode({"error": response.error, "outcome": response.outcome}).decode()
        )
    elif response.outcome in ("accepted", "adopted"):
        click.echo(f"backed up to {destination}")
    else:
        click.echo(f"backup refused: {response.error}", err=True)
    if response.outcome not in ("accepted", "adopted"):
        sys.exit(2)
