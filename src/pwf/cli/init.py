"""``pwf init``: create a state database."""

from __future__ import annotations

import click

from pwf import canonical, logs
from pwf.cli._options import db_option, json_option, open_store
from pwf.store.sqlite import FORMAT


@click.command()
@db_option
@json_option
def init(db: str | None, as_json: bool) -> None:
    """Create a state database (log and projections in one file).

    Running it again on an existing pwf database changes nothing.
    """
    with open_store(db, create=True) as store:
        head = store.head()
        logs.info("store.initialised", path=str(store.path), seq=head.seq)
        if as_json:
            report = {"db": str(store.path), "format": FORMAT, "events": head.seq}
            click.echo(canonical.encode(report).decode())
        else:
            click.echo(f"initialised {store.path} ({FORMAT}, {head.seq} events)")
