"""``pwf serve``: run the host of one state database in the foreground (HOST §1)."""

from __future__ import annotations

import logging
import sys

import click

from pwf.cli._options import db_option, store_url
from pwf.config import Settings
from pwf.errors import InputError

__all__ = ["serve"]


class _HostLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"[pwf host] {record.getMessage()}"


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_HostLines())
    logger = logging.getLogger("pwf.server")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


@click.command()
@db_option
def serve(db: str | None) -> None:
    """Serve the database to clients over host/host.sock until stopped.

    With --store the log is the shared one in PostgreSQL and --db names
    this host's local projection file, caught up before every decision.

    Takes the process lock host/host.lock.json and the host claim (a new
    epoch, a 30 s lease renewed every 10 s), recovers from a host that did
    not stop cleanly, then answers pi-workflows.client.v1 connections on
    the Unix socket beside the database.  SIGTERM, SIGINT or host.stop finish
    the requests in flight, release the claim and the lock, remove the
    socket and exit 0.
    """
    from pwf.server import Options  # noqa: PLC0415 - asyncio only for this command
    from pwf.server import serve as run  # noqa: PLC0415

    settings = Settings.load(db=db)
    shared = store_url()
    if shared is None and not settings.db.exists():
        raise InputError(f"no state database at {settings.db} (run `pwf init` first)")
    _log_to_stderr()
    options = Options(
        db=settings.db,
        store_url=shared,
        synchronous=settings.synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
    )
    sys.exit(run(options))
