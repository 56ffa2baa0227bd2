"""``pwf request``: run client-protocol requests read from stdin, in direct mode.

Also holds what ``pwf worker`` shares with it: the ``--at`` option, the clock,
the line loop with its ``#at`` directives, and the refusal while a live
``pwf serve`` owns the database (ADR 0010).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

import click

from pwf import canonical
from pwf.cli._options import db_option, open_store
from pwf.cli._seed import seeded_epochs
from pwf.cli._times import TIME, wall_ms
from pwf.client import message_lines
from pwf.errors import AnswerTooLargeError, InputError, ProtocolError
from pwf.host import Host
from pwf.protocol.client import (
    MAX_SAFE_INTEGER,
    OPERATIONS,
    TOO_LARGE,
    VIEW_OPERATIONS,
    parse_request,
)
from pwf.protocol.wire import MAX_FRAMED_MESSAGE_BYTES
from pwf.statereaders import overview, verify_failure

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pwf.store import EventStore

__all__ = ["answer_lines", "at_option", "canonicalize_option", "listing", "now_ms", "request"]

at_option = click.option(
    "--at",
    "at",
    type=TIME,
    default=None,
    help="Run at this time (epoch ms or ISO 8601) instead of the wall clock.",
)


def now_ms(at: int | None) -> int:
    """The clock of one command: ``at`` when given, else the wall clock in ms."""
    return at if at is not None else wall_ms()


def _directive(line: bytes) -> int | None:
    """The time a ``#at MS`` line sets; None for any other comment line.

    Raises:
        InputError: the line starts with ``#at`` but its value is not a time.
    """
    words = line.split()
    if words[0] != b"#at":
        return None
    if len(words) != 2 or not words[1].isdigit() or int(words[1]) > MAX_SAFE_INTEGER:
        raise InputError("#at takes one whole number of milliseconds since the epoch")
    return int(words[1])


canonicalize_option = click.option(
    "--canonicalize",
    "canonicalize",
    is_flag=True,
    help="Rewrite each line into canonical JSON before parsing it (key order, spacing,"
    " number forms); says so once on stderr.",
)


class _Canonicalizer:
    """``--canonicalize``: each line's canonical form, and one note the first time it differs."""

    def __init__(self) -> None:
        self.noted = False

    def __call__(self, line: bytes) -> bytes:
        rewritten = canonical.canonical_line(line, limit=MAX_FRAMED_MESSAGE_BYTES)
        if rewritten != line and not self.noted:
            self.noted = True
            click.echo(
                "note: --canonicalize rewrites input lines into canonical JSON before parsing",
                err=True,
            )
        return rewritten


def answer_lines(
    host: Host[EventStore],
    answer: Callable[[bytes, int], bytes],
    at: int | None,
    *,
    canonicalize: bool = False,
) -> int:
    """Answer every stdin line in order, one canonical line on stdout each.

    ``#at MS`` lines set the clock for the lines after them; other ``#``
    lines are comments.  A line is a frame: with its newline it must fit in
    1 MiB, so a message of 1 048 576 bytes is refused as the socket's frame
    decoder refuses it.  A refused line is one ``line N: why`` on stderr and
    appends nothing; the loop goes on.  ``answer`` returns the framed line.
    An answer too large to send is one ``line N: request executed ...`` on
    stderr; the loop goes on.  Returns the exit code: 4 if any answer was too
    large, else 2 if any line was refused, else 0.

    Raises:
        StoreError: a live host owns the database, or the store failed.
    """
    out = sys.stdout.buffer
    refused = oversized = False
    rewrite = _Canonicalizer() if canonicalize else None
    for number, line in message_lines(sys.stdin.buffer):
        try:
            if line.startswith(b"#"):
                directive = _directive(line)
                at = at if directive is None else directive
                continue
            if len(line) > MAX_FRAMED_MESSAGE_BYTES:
                raise ProtocolError(TOO_LARGE)
            if rewrite is not None:
                line = rewrite(line)  # noqa: PLW2901 - the rewritten line replaces the read one
            now = now_ms(at)
            host.refuse_if_served(now)
            reply = answer(line, now)
        except InputError as error:
            click.echo(f"line {number}: {' '.join(str(error).split())}", err=True)
            refused = True
            continue
        except AnswerTooLargeError as error:
            click.echo(f"line {number}: {error}", err=True)
            oversized = True
            continue
        out.write(reply)
        out.flush()
    return AnswerTooLargeError.exit_code if oversized else 2 if refused else 0


@click.command()
@db_option
@at_option
@click.option(
    "--wait-ms",
    "wait_ms",
    metavar="N",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Milliseconds an interaction.submit waits for its worker's verdict.",
)
@canonicalize_option
def request(db: str | None, at: int | None, wait_ms: int, canonicalize: bool) -> None:
    """Run client-protocol requests read from stdin.

    Each non-empty stdin line is one canonical pi-workflows.client.v1
    request.  Requests run in order, each in its own write transaction, and
    every answer (rejected and conflict included) is one canonical response
    line on stdout.  A malformed line is reported on stderr as "line N: why",
    appends nothing and makes the exit code 2; the lines after it still run.

    Scripts set the clock with directive lines: a line "#at MS" runs the
    lines after it at MS milliseconds since the epoch.  Other lines starting
    with "#" are comments.  Without --at or "#at" the wall clock is used.

    This is direct mode: it holds no host claim and is refused while a live
    pwf serve owns the database.  An interaction.submit answers once the
    worker's verdict is recorded, or "unavailable" after --wait-ms; a retry
    with the same idempotency key is then adopted.
    """
    with open_store(db, deciding=True) as store:
        host = Host(store, new_epoch=seeded_epochs(store))
        host.verifier = verify_failure
        host.overview = overview

        def answer(line: bytes, now: int) -> bytes:
            return host.answer(parse_request(line), now, wait_ms=wait_ms)

        code = answer_lines(host, answer, at, canonicalize=canonicalize)
    sys.exit(code)


REQUEST_EXAMPLE: Final = (
    '{"clientId":"cli-A","idempotencyKey":"k-1","operation":"host.status","payload":{},'
    '"requestId":"r-1","schema":"pi-workflows.client.v1","type":"request"}'
)
"""The request line ``pwf request --help`` shows, whole, so it can be copied."""


def listing(title: str, names: Iterable[str]) -> str:
    """A help paragraph naming every value of a set, sorted."""
    ordered = sorted(names)
    return f"{title} ({len(ordered)}): {', '.join(ordered)}."


request.help = "\n\n".join(
    (
        request.help or "",
        listing("Operations", OPERATIONS | VIEW_OPERATIONS),
        (
            "A request line looks like this; --canonicalize accepts the same members in any"
            " order and spacing, `pwf schema OPERATION` prints an operation's payload and"
            " receipt schemas, and docs/operations.md shows a line of every operation:"
        ),
        # \b keeps click from rewrapping the line, which has no space to break at.
        "\b\n" + REQUEST_EXAMPLE,
    )
)
