"""``pwf session detach|expire|view``: a host's work when a connection ends or a deadline passes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from pwf.cli._options import code_units, db_option, echo_json, json_option, open_store, printable
from pwf.cli._output import with_options
from pwf.cli._seed import seeded_epochs
from pwf.cli.request import at_option, now_ms
from pwf.host import Host

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["session"]

F = Any


@click.group()
def session() -> None:
    """Session coordinators and interaction deadlines, in direct mode.

    A served host does both on its own: it detaches a coordinator when its
    connection closes and polls for expired interactions every 2 s.  These
    verbs let scripts and operators do the same against the log directly.
    """


def _one_session(epoch_help: str) -> Callable[[F], F]:
    """SESSION_ID, ``--epoch`` (helped by ``epoch_help``), ``--db`` and ``--at``."""
    epoch = click.option("--epoch", metavar="EPOCH", default=None, help=epoch_help)
    session_id = click.argument("session_id", metavar="SESSION_ID", callback=code_units)
    return lambda command: with_options(command, (session_id, epoch, db_option, at_option))


@session.command()
@_one_session("Detach only this coordinator epoch.")
def detach(session_id: str, epoch: str | None, db: str | None, at: int | None) -> None:
    """End the coordinator of SESSION_ID, as a closed connection does.

    Attempts with an open step turn in that session become interrupted; their
    idle time is credited when the next coordinator first reports its branch.
    """
    with open_store(db) as store:
        now = now_ms(at)
        host = Host(store, new_epoch=seeded_epochs(store))
        host.refuse_if_served(now)
        detached = host.detach(session_id, now, epoch)
    click.echo(
        printable(
            f"detached {session_id}" if detached else f"no coordinator to detach for {session_id}"
        )
    )


@session.command()
@db_option
@at_option
@json_option
def expire(db: str | None, at: int | None, as_json: bool) -> None:
    """Begin the timeout of every interaction whose model-turn deadline passed.

    Candidates need a started step turn, an unpaused run and a deadline at or
    before now; runs with a live worker, interrupted attempts and sessions
    without a coordinator are skipped (ADR 0015).
    """
    with open_store(db) as store:
        now = now_ms(at)
        host = Host(store, new_epoch=seeded_epochs(store))
        host.refuse_if_served(now)
        started = host.expire(now)
    if as_json:
        rows = [{"runId": run_id, "targetSessionId": sid} for run_id, sid in started]
        echo_json(rows)
        return
    for run_id, sid in started:
        click.echo(printable(f"timeout started: {run_id} in {sid}"))
    if not started:
        click.echo("no expired interactions")


@session.command()
@_one_session("See it as this coordinator epoch.")
def view(session_id: str, epoch: str | None, db: str | None, at: int | None) -> None:
    """Print the snapshot a watch of SESSION_ID would publish, as one canonical line.

    A served host pushes it to the connections that watch the session
    (view.session.watch); direct mode has no connection, so scripts read it
    here: the coordinator epoch, the next message offered to EPOCH once its
    branch is reported, the open message and the session's run.
    """
    with open_store(db) as store:
        snapshot = Host(store, new_epoch=seeded_epochs(store)).session_view(
            session_id, now_ms(at), epoch
        )
    echo_json(snapshot)
