"""``pwf init``: create a state database."""

from __future__ import annotations

import click

from pwf import logs
from pwf.cli._options import db_option, echo_json, json_option, open_store
from pwf.cli._seed import seeded_id
from pwf.cli.audit import default_origin, sqlite_file
from pwf.errors import InputError
from pwf.store.schema import FORMAT
from pwf.store.tree import check_origin, set_origin


@click.command()
@db_option
@click.option(
    "--origin",
    default=None,
    help="The name checkpoints give this log (default: pwf/ and a random id); kept once set.",
)
@json_option
def init(db: str | None, origin: str | None, as_json: bool) -> None:
    """Create a state database (log and projections in one file).

    With --store, create the log's schema in PostgreSQL instead (with its
    format row) and this host's local projection file named by --db.
    Running it again on an existing pwf database or log changes nothing.
    --origin names the log in its signed checkpoints (`pwf log checkpoint`).
    """
    with open_store(db, create=True) as store:
        file = sqlite_file(store.projections_file)
        with file.file_transaction() as tx:
            seeded = seeded_id(store, "origin")  # PWF_SEED: the same file on every run
            given = (
                check_origin(origin)
                if origin is not None
                else default_origin()
                if seeded is None
                else f"pwf/{seeded}"
            )
            kept = set_origin(tx.connection, given)
        if origin is not None and kept != origin:
            raise InputError(f"{file.path}: this log's origin is already {kept!r}")
        head = store.head()
        shared = store.log_file is None
        logs.info("store.initialised", path=store.log_name, seq=head.seq)
        if as_json:
            report = {"db": str(store.projections_file.path), "format": FORMAT, "events": head.seq}
            if shared:
                report["store"] = store.log_name
            echo_json(report)
        elif not shared:
            click.echo(f"initialised {store.projections_file.path} ({FORMAT}, {head.seq} events)")
        else:
            click.echo(
                f"initialised {store.log_name} ({FORMAT}, {head.seq} events),"
                f" local projections {store.projections_file.path}"
            )
