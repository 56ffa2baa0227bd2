"""``pwf serve``: run the host of one state database in the foreground (HOST §1).

``--database`` is ``--db`` as the original's host entry spells it, and a
missing database is created as ``pwf init`` creates it, as the original host
creates its own: so the original client, which starts its host entry as
``node ENTRY --database DB`` when nothing answers (HOST §1.19), can start
pwf on a new database through the entry ``--print-entry`` names (ADR 0072).
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from pwf.cli._options import db_option, open_store, store_url
from pwf.config import (
    DEFAULT_HEARTBEAT_MS,
    DEFAULT_LEASE_MS,
    DEFAULT_WORKER_STARTUP_MS,
    Settings,
)
from pwf.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["serve"]

F = TypeVar("F", bound="Callable[..., Any]")

_LONGEST_MS = 86_400_000
"""A day: the longest lease, heartbeat or worker startup the options take."""
HOST_ENTRY: Final = Path(__file__).resolve().parent.parent / "host-entry.cjs"
"""The node entry the original client can be pointed at (its ``hostEntryPath``)."""


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


def _print_entry(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(str(HOST_ENTRY))
    ctx.exit(0)


def _milliseconds(flag: str, default: int, text: str) -> Callable[[F], F]:
    """A duration option in milliseconds, 1 ms to a day, also read from ``$PWF_<NAME>``."""
    name = flag.removeprefix("--").replace("-", "_")
    envvar = f"PWF_{name.upper()}"
    return click.option(
        flag,
        name,
        metavar="MS",
        envvar=envvar,
        type=click.IntRange(1, _LONGEST_MS),
        default=default,
        show_default=True,
        help=f"{text} (also ${envvar}).",
    )


@click.command()
@db_option
@click.option(
    "--database",
    "database",
    metavar="PATH",
    default=None,
    help="The same as --db, as the original's host entry spells it.",
)
@click.option(
    "--print-entry",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_entry,
    help="Print the path of the host entry the original client can start (node ENTRY"
    " --database DB runs pwf serve --database DB) and exit.",
)
@click.option(
    "--worker-command",
    "worker_command",
    metavar="CMD",
    envvar="PWF_WORKER_COMMAND",
    default=None,
    help='Start CMD for each run the host activates, e.g. "pwf worker run" (split like a shell'
    " would; also $PWF_WORKER_COMMAND).  Without it runs wait for pwf worker launch.",
)
@_milliseconds(
    "--lease-ms",
    DEFAULT_LEASE_MS,
    "How long the host's claim, and each run claim it renews, lasts; another host may take"
    " over once it runs out",
)
@_milliseconds(
    "--heartbeat-ms",
    DEFAULT_HEARTBEAT_MS,
    "How often the host renews those claims; less than the lease",
)
@_milliseconds(
    "--worker-startup-ms",
    DEFAULT_WORKER_STARTUP_MS,
    "How long a started worker has to report worker.ready before it is stopped and"
    " recorded crashed",
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
def serve(  # noqa: PLR0913, PLR0917 - click passes one parameter per option
    db: str | None,
    database: str | None,
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
    and the lock, remove the socket and exit 0.  A database that does not
    exist yet is created first, as pwf init creates it (missing directories
    included, 0700).
    """
    from pwf.server import Options  # noqa: PLC0415 - asyncio only for this command
    from pwf.server import serve as run  # noqa: PLC0415

    named = _database(db, database, lease_ms, heartbeat_ms)
    address = _metrics_address(metrics)
    settings = Settings.load(db=named)
    # The original resolves the path without following links (path.resolve),
    # and so does the socket path its client computes (HOST §1.1).
    path = Path(os.path.abspath(settings.db))  # noqa: PTH100 - lexical, as Node's path.resolve
    shared = store_url()
    _log_to_stderr()
    if shared is None:
        _create_if_unmade(path)
    options = Options(
        db=path,
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


def _database(db: str | None, database: str | None, lease_ms: int, heartbeat_ms: int) -> str | None:
    """The database ``--db`` or ``--database`` names, once the options agree with each other."""
    if heartbeat_ms >= lease_ms:
        raise InputError(
            f"--heartbeat-ms ({heartbeat_ms}) must be less than --lease-ms ({lease_ms}):"
            " a claim would run out before its renewal"
        )
    if db is not None and database is not None and db != database:
        raise InputError(f"--db ({db}) and --database ({database}) name different databases")
    return db or database


def _create_if_unmade(path: Path) -> None:
    """Create the database as ``pwf init`` does, unless it is made (:func:`_unmade`)."""
    from pwf.server import HostPaths  # noqa: PLC0415 - asyncio only for this command

    if _unmade(path):
        HostPaths(path)  # a socket path too long for Unix refuses before anything is made
        open_store(str(path), create=True).close()
        logging.getLogger("pwf.server").info("created the state database %s", path)


def _unmade(path: Path) -> bool:
    """No file yet, or an empty one: a database another start is making looks so until it commits.

    SQLite holds an empty file to be an empty database, and ``pwf init``
    makes it pwf's; so does ``pwf serve``, whose install waits for the other
    start's and then finds its schema.  A file with content is never made
    over: one that is not a pwf database is refused unchanged.
    """
    try:
        return path.stat().st_size == 0 and path.is_file()
    except FileNotFoundError:
        return True


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
