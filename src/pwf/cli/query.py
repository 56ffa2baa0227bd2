"""``pwf query runs|interactions|messages|turns``: read the projections, never the log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

import click

from pwf import canonical
from pwf.cli._options import F, db_option, json_option, open_store

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

__all__ = ["query"]


class _Source(NamedTuple):
    """Where one listing comes from and which columns the table shows."""

    select: str
    order: str
    run: str
    session: str
    status: str
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
    limit: int | None


def _rows(
    connection: sqlite3.Connection, source: _Source, filters: _Filters
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one listing, filtered, ordered and limited."""
    where: list[str] = []
    params: list[object] = []
    for column, value in (
        (source.run, filters.run_id),
        (source.session, filters.session),
        (source.status, filters.status),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    text = f"{source.select}{clause} ORDER BY {source.order} LIMIT ?"
    cursor = connection.execute(text, (*params, -1 if filters.limit is None else filters.limit))
    return [column[0] for column in cursor.description], cursor.fetchall()


def _value(value: object) -> object:
    """A column value as JSON: BLOBs become lowercase hex."""
    return value.hex() if isinstance(value, bytes) else value


def _cell(value: object) -> str:
    """A column value as table text: NULL is ``-``."""
    return "-" if value is None else str(_value(value))


def _table(names: Sequence[str], rows: Sequence[tuple[Any, ...]], shown: Sequence[str]) -> str:
    """An aligned text table of the shown columns, header first."""
    picks = [names.index(name) for name in shown]
    cells = [list(shown), *([_cell(row[index]) for index in picks] for row in rows)]
    widths = [max(len(line[column]) for line in cells) for column in range(len(shown))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def _show(name: str, db: str | None, filters: _Filters, as_json: bool) -> None:
    source = _SOURCES[name]
    with open_store(db, read_only=True) as store:
        names, rows = _rows(store.connection, source, filters)
    if as_json:
        listing = [
            {column: _value(value) for column, value in zip(names, row, strict=True)}
            for row in rows
        ]
        click.echo(canonical.encode(listing).decode())
    else:
        click.echo(_table(names, rows, source.shown))


_FILTERS: Final = (
    db_option,
    click.option("--run", "run_id", metavar="RUN_ID", default=None, help="Only this run."),
    click.option("--session", "session", metavar="S", default=None, help="Only this Pi session."),
    click.option("--status", "status", metavar="S", default=None, help="Only this status."),
    click.option(
        "--limit", "limit", metavar="N", type=click.IntRange(min=1), help="At most N rows."
    ),
    json_option,
)


def _filtered(command: F) -> F:
    """Give a listing the options every listing takes."""
    for option in reversed(_FILTERS):
        command = option(command)
    return command


@click.group()
def query() -> None:
    """Read the projections: runs, interactions, workflow messages and model turns.

    Rows come in a fixed order, so two databases built from the same log
    print the same listing.  --json prints one canonical JSON array of
    objects with every column; BLOB columns are lowercase hex.
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

    def show(  # noqa: PLR0913 - one option per filter
        *,
        db: str | None,
        run_id: str | None,
        session: str | None,
        status: str | None,
        limit: int | None,
        as_json: bool,
    ) -> None:
        _show(name, db, _Filters(run_id, session, status, limit), as_json)

    show.__doc__ = _HELP[name]
    return click.command(name)(_filtered(show))


for _name in _SOURCES:
    query.add_command(_listing(_name))
