"""``pwf query runs|interactions|messages|turns``: read the projections, never the log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple, get_args

import click

from pwf.cli._options import code_units, db_option, open_store
from pwf.cli._output import Shape, Window, listing, pick_columns, print_rows, with_options
from pwf.events.runs import RunStatus

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.sqlreader import RowReader

F = Any

__all__ = ["query"]


class _Source(NamedTuple):
    """Where one listing comes from and which columns the table shows."""

    select: str
    order: str
    run: str
    session: str
    status: str
    statuses: tuple[str, ...]
    time: str
    shown: tuple[str, ...]


_SOURCES: Final = {
    "runs": _Source(
        select="SELECT r.*, q.status AS queue_status, q.generation AS queue_generation,"
        " q.owner_worker_epoch AS queue_owner_worker_epoch,"
        " q.lease_expires_at AS queue_lease_expires_at, q.error_code AS queue_error_code,"
        " q.error_message AS queue_error_message"
        " FROM runs r LEFT JOIN run_queue q ON q.run_id = r.run_id",
        order="r.created_at, r.run_id",
        run="r.run_id",
        session="r.origin_session_id",
        status="r.status",
        statuses=get_args(RunStatus),
        time="r.created_at",
        shown=(
            "run_id",
            "status",
            "paused",
            "queue_status",
            "revision",
            "origin_session_id",
            "updated_at",
        ),
    ),
    "interactions": _Source(
        select="SELECT * FROM interactive_requests",
        order="created_at, request_id",
        run="run_id",
        session="target_session_id",
        status="status",
        statuses=("pending", "settled", "cancelled"),
        time="created_at",
        shown=(
            "request_id",
            "run_id",
            "kind",
            "revision",
            "status",
            "unproductive_turn_ends",
            "accepted_submission_id",
        ),
    ),
    "messages": _Source(
        select="SELECT * FROM workflow_messages",
        order="target_session_id, order_number",
        run="run_id",
        session="target_session_id",
        status="status",
        statuses=("pending", "sent", "cancelled"),
        time="created_at",
        shown=(
            "order_number",
            "target_session_id",
            "kind",
            "status",
            "workflow_message_id",
            "source_id",
        ),
    ),
    "turns": _Source(
        select="SELECT * FROM workflow_turns",
        order="target_session_id, started_at, workflow_turn_id",
        run="run_id",
        session="target_session_id",
        status="state",
        statuses=("started", "ended"),
        time="started_at",
        shown=(
            "workflow_turn_id",
            "target_session_id",
            "state",
            "stop_reason",
            "started_at",
            "ended_at",
            "workflow_message_id",
        ),
    ),
}


class _Filters(NamedTuple):
    run_id: str | None
    session: str | None
    status: str | None
    since: int | None
    until: int | None
    limit: int | None
    offset: int


def _rows(
    reader: RowReader, source: _Source, filters: _Filters
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one listing, filtered, ordered and paged."""
    where: list[str] = []
    params: list[object] = []
    for column, operator, value in (
        (source.run, "=", filters.run_id),
        (source.session, "=", filters.session),
        (source.status, "=", filters.status),
        (source.time, ">=", filters.since),
        (source.time, "<=", filters.until),
    ):
        if value is not None:
            where.append(f"{column} {operator} ?")
            params.append(value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    text = f"{source.select}{clause} ORDER BY {source.order} LIMIT ? OFFSET ?"
    limit = -1 if filters.limit is None else filters.limit
    return reader.table(text, (*params, limit, filters.offset))


def _show(name: str, db: str | None, filters: _Filters, shape: Shape) -> None:
    source = _SOURCES[name]
    with open_store(db, read_only=True) as store:
        names, rows = _rows(store.reader(), source, filters)
    default = names if shape.form in ("json", "nl") else source.shown
    picked = pick_columns(names, shape.columns, default)
    indexes = [names.index(column) for column in picked]
    print_rows(picked, [[row[i] for i in indexes] for row in rows], shape.form, shape.time_format)


@click.group()
def query() -> None:
    """Read the projections: runs, interactions, workflow messages and model turns.

    Rows come in a fixed order, so two databases built from the same log
    print the same listing.  --json prints one canonical JSON array of
    objects with every column, --nl one object per line, --csv and --tsv a
    header and one line per row; BLOB columns (hashes) are lowercase hex.
    --since/--until bound the creation time (a turn's start), --columns
    picks columns, --limit/--offset page.  Times print in --time-format
    (ISO on a terminal); JSON keeps epoch milliseconds.
    """


_HELP: Final = {
    "runs": "List runs with their queue entry, oldest first.\n\n"
    "--session matches the origin session; --status the run's status.",
    "interactions": "List interactive requests, oldest first.\n\n"
    "--session matches the target session; --status is pending, settled or cancelled.",
    "messages": "List workflow messages by target session and order number.\n\n"
    "--session matches the target session; --status is pending, sent or cancelled.",
    "turns": "List model turns by target session and start time.\n\n"
    "--session matches the target session; --status is started or ended.",
}


def _listing(name: str) -> click.Command:
    """The ``pwf query NAME`` command: one listing, the same filters for all."""
    source = _SOURCES[name]

    def show(  # noqa: PLR0913 - one option per filter
        *,
        db: str | None,
        run_id: str | None,
        session: str | None,
        status: str | None,
        window: Window,
        shape: Shape,
    ) -> None:
        _show(name, db, _Filters(run_id, session, status, *window), shape)

    show.__doc__ = _HELP[name]
    return click.command(name)(with_options(listing(show), _filters(source)))


def _filters(source: _Source) -> tuple[Callable[[F], F], ...]:
    """The options that pick a listing's rows: the database, run, session and status."""
    return (
        db_option,
        click.option(
            "--run",
            "run_id",
            metavar="RUN_ID",
            default=None,
            callback=code_units,
            help="Only this run.",
        ),
        click.option(
            "--session",
            "session",
            metavar="S",
            default=None,
            callback=code_units,
            help="Only this Pi session.",
        ),
        click.option(
            "--status", "status", type=click.Choice(source.statuses), help="Only this status."
        ),
    )


for _name in _SOURCES:
    query.add_command(_listing(_name))
