"""``pwf web``: serve the read-only web view; its libraries load only when it runs."""

from __future__ import annotations

import ipaddress

import click

from pwf.cli._options import db_option, store_url
from pwf.config import Settings
from pwf.errors import InputError
from pwf.extras import missing_extra

__all__ = ["web"]

EXTRA_MISSING = missing_extra("pwf web needs the web extra", "web")
NO_STORE_URL = (
    "--store URL: pwf web does not catch up from a shared log yet; serve a host's local"
    " projection file with --db PATH"
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port."
)
def web(db: str | None, host: str, port: int) -> None:
    """Serve a read-only web view of the database: overview, runs, interactions, log.

    The database is opened read-only (SQLite mode=ro): the view never takes
    the write lock and never appends, so it runs beside writers.  Every page
    can be viewed as of an earlier seq (?at=SEQ).  It listens on loopback
    by default; it has no authentication, so binding elsewhere warns.
    """
    if store_url() is not None:
        raise InputError(NO_STORE_URL)
    try:
        import uvicorn  # noqa: F401, PLC0415 - the web extra loads only for this command

        from pwf.web import create_app, serve  # noqa: PLC0415 - same as uvicorn
    except ImportError:
        raise InputError(EXTRA_MISSING) from None
    settings = Settings.load(db=db)
    app = create_app(settings.db, settings.busy_timeout_ms)
    if not is_loopback(host):
        click.echo(
            f"warning: pwf web has no authentication; listening on {host} shows the whole log"
            " to anyone who can reach it",
            err=True,
        )
    click.echo(
        f"pwf web: serving {app.state.database.path} read-only on http://{host}:{port}/", err=True
    )
    serve(app, host, port)
