"""``pwf serve``: run the host of one state database in the foreground (HOST §1)."""

from __future__ import annotations

import logging
import shlex
import sys

import click

from pwf.cli._options import db_option, store_url
from pwf.config import (
    DEFAULT_HEARTBEAT_MS,
    DEFAULT_LEASE_MS,
    DEFAULT_WORKER_STARTUP_MS,
    Settings,
)
from pwf.errors import InputError

__all__ = ["serve"]

_LONGEST_MS = 86_400_000
"""A day: the longest lease, heartbeat or worker startup the options take."""


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
@click.option(
    "--lease-ms",
    "lease_ms",
    metavar="MS",
    envvar="PWF_LEASE_MS",
    type=click.IntRange(1, _LONGEST_MS),
    default=DEFAULT_LEASE_MS,
    show_default=True,
    help="How long the host's claim, and each run claim it renews, lasts; another host may take"
    " over once it runs out (also $PWF_LEASE_MS).",
)
@click.option(
    "--heartbeat-ms",
    "heartbeat_ms",
    metavar="MS",
    envvar="PWF_HEARTBEAT_MS",
    type=click.IntRange(1, _LONGEST_MS),
    default=DEFAULT_HEARTBEAT_MS,
    show_default=True,
    help="How often the host renews those claims; less than the lease (also $PWF_HEARTBEAT_MS).",
)
@click.option(
    "--worker-startup-ms",
    "worker_startup_ms",
    metavar="MS",
    envvar="PWF_WORKER_STARTUP_MS",
    type=click.IntRange(1, _LONGEST_MS),
    default=DEFAULT_WORKER_STARTUP_MS,
    show_default=True,
    help="How long a started worker has to report worker.ready before it is stopped and"
    " recorded crashed (also $PWF_WORKER_STARTUP_MS).",
)
@click.option(
    "--metrics",
    "metrics",
    metavar="ADDR",
    envvar="PWF_METRICS",
    default=None,
    help="Serve Prometheus metrics at http://ADDR/metrics and a health check at /healthz;"
    " ADDR is PORT (on 127.0.0.1), HOST:PORT or [V6]:PORT, port 0 picks a free one"
    " (also $PWF_METRICS; needs the metrics extra).",
)
def serve(  # noqa: PLR0913, PLR0917 - one parameter per option
    db: str | None,
    worker_command: str | None,
    lease_ms: int,
    heartbeat_ms: int,
    worker_startup_ms: int,
    metrics: str | None,
) -> None:
    """Serve the database to clients over host/host.sock until stopped.

    With --store the log is the shared one in PostgreSQL and --db names
    this host's local projection file, caught up before every decision.

    Takes the process lock host/host.lock.json and the host claim (a new
    epoch, a lease of --lease-ms renewed every --heartbeat-ms), recovers from a host that did
    not stop cleanly, then answers pi-workflows.client.v1 connections on
    the Unix socket beside the database.  With --metrics it also serves
    Prometheus metrics and /healthz over HTTP (docs/metrics.md).  SIGTERM,
    SIGINT or host.stop finish the requests in flight, release the claim
    and the lock, remove the socket and exit 0.
    """
    from pwf.server import Options  # noqa: PLC0415 - asyncio only for this command
    from pwf.server import serve as run  # noqa: PLC0415

    if heartbeat_ms >= lease_ms:
        raise InputError(
            f"--heartbeat-ms ({heartbeat_ms}) must be less than --lease-ms ({lease_ms}):"
            " a claim would run out before its renewal"
        )
    address = _metrics_address(metrics)
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
        lease_ms=lease_ms,
        heartbeat_ms=heartbeat_ms,
        startup_seconds=worker_startup_ms / 1000,
        metrics=address,
    )
    sys.exit(run(options))


def _metrics_address(text: str | None) -> tuple[str, int] | None:
    """``--metrics`` as (host, port); warns when it is not loopback, as ``pwf web`` does."""
    if text is None or not text.strip():
        return None
    from importlib.util import find_spec  # noqa: PLC0415 - only with --metrics

    from pwf.cli.web import is_loopback  # noqa: PLC0415
    from pwf.server.metrics import MISSING_EXTRA, parse_address  # noqa: PLC0415

    host, port = parse_address(text)
    if find_spec("prometheus_client") is None:
        from pwf.extras import missing_extra  # noqa: PLC0415 - only on this error

        raise InputError(missing_extra(MISSING_EXTRA, "metrics"))
    if not is_loopback(host):
        click.echo(
            f"warning: the metrics endpoint has no authentication; listening on {host} shows"
            " the host's request counts and state to anyone who can reach it",
            err=True,
        )
    return host, port


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
