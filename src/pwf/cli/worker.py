"""``pwf worker`` and ``pwf worker launch``: the worker protocol, in direct mode."""

from __future__ import annotations

import os
import sys

import click

from pwf.cli._options import code_units, db_option, open_store
from pwf.cli._seed import seeded_epochs
from pwf.cli.request import (
    answer_lines,
    at_option,
    canonicalize_option,
    listing,
    now_ms,
)
from pwf.commands.workers import WORKER_OPERATIONS
from pwf.errors import PwfError
from pwf.host import Host
from pwf.protocol.worker import (
    KINDS,
    encode_launch,
    encode_worker_response,
    parse_worker_message,
)


@click.group(invoke_without_command=True)
@db_option
@at_option
@canonicalize_option
@click.pass_context
def worker(ctx: click.Context, db: str | None, at: int | None, canonicalize: bool) -> None:
    """Run worker-protocol messages read from stdin.

    Without a subcommand, each non-empty stdin line is one canonical
    pi-workflows.worker-message.v1 message from a workflow worker.  Messages
    run in order, each in its own write transaction, and every answer
    (rejected and claimLost included) is one canonical response line on
    stdout.  A malformed line is reported on stderr as "line N: why", appends
    nothing and makes the exit code 2; the lines after it still run.

    Scripts set the clock with directive lines: a line "#at MS" runs the
    lines after it at MS milliseconds since the epoch.  Other lines starting
    with "#" are comments.  Without --at or "#at" the wall clock is used.

    This is direct mode: it holds no host claim and is refused while a live
    pwf serve owns the database.
    """
    if ctx.invoked_subcommand is not None:
        return
    with open_store(db, deciding=True) as store:
        host = Host(store, new_epoch=seeded_epochs(store))

        def answer(line: bytes, now: int) -> bytes:
            return encode_worker_response(host.worker(parse_worker_message(line), now)) + b"\n"

        code = answer_lines(host, answer, at, canonicalize=canonicalize)
    sys.exit(code)


@worker.command()
@click.argument("run_id", metavar="RUN_ID", callback=code_units)
@db_option
@at_option
@click.pass_context
def launch(ctx: click.Context, run_id: str, db: str | None, at: int | None) -> None:
    """Claim a run and print its launch envelope.

    The run must be queued, or parked with work for a worker, and have no
    live worker.

    The envelope is one canonical pi-workflows.worker-launch.v1 line: the
    run, its new generation and the worker epoch that the worker's messages
    must carry.  A run that cannot be claimed exits 2 with one line saying
    why.  --db and --at may also be given before "launch".
    """
    given = ctx.parent.params if ctx.parent is not None else {}
    db = db if db is not None else given.get("db")
    at = at if at is not None else given.get("at")
    now = now_ms(at)
    with open_store(db, deciding=True) as store:
        host = Host(store, new_epoch=seeded_epochs(store))
        host.refuse_if_served(now)
        envelope = host.launch(run_id, now)
    sys.stdout.buffer.write(encode_launch(envelope) + b"\n")


worker.help = "\n\n".join(
    (
        worker.help or "",
        listing("Operations", WORKER_OPERATIONS),
        listing("Message kinds", KINDS),
    )
)


@worker.command("run")
def run_worker() -> None:
    """Be the worker of one run, as a host supervises it.

    Reads the launch envelope from PI_WORKFLOWS_WORKER_LAUNCH (base64url of
    its canonical JSON), writes worker messages on stdout and reads each
    answer on stdin before the next, and runs the built-in workflows
    builtin:echo (finishes with its input) and builtin:ask (asks the origin
    session and finishes with the accepted answer, checked against the
    request's contract).  Use it as pwf serve --worker-command "pwf worker run".
    """
    from pwf.refworker import run  # noqa: PLC0415 - only the worker needs it

    try:
        run(os.environ, sys.stdout.buffer, sys.stdin.buffer)
    except PwfError as error:
        click.echo(f"pwf worker run: {' '.join(str(error).split())}", err=True)
        sys.exit(3)
