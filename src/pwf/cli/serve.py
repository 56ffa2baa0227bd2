"""``pwf serve``: run the host of one state database in the foreground (HOST §1)."""

from __future__ import annotations

import logging
import shlex
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
@click.option(
    "--worker-command",
    "worker_command",
    metavar="CMD",
    envvar="PWF_WORKER_COMMAND",
    default=None,
    help='Start CMD for each run the host activates, e.g. "pwf worker run" (split like a shell'
    " would; also $PWF_WORKER_COMMAND).  Without it runs wait for pwf worker launch.",
)
def serve(db: str | None, worker_command: str | None) -> None:
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
        worker_command=_command(worker_command),
    )
    sys.exit(run(options))


def _command(text: str | None) -> tuple[str, ...] | None:
    """The worker command as argv; an empty or unbalanced one is bad input."""
    if text is None:
        return None
    try:
        words = tuple(shlex.split(text))
    except ValueError as error:
        raise InputError(f"--worker-command cannot be split: {error}") from None
    if not words:
        raise InputError("--worker-command is empty")
    return words
