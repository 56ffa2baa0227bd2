"""Options shared by several commands, and opening the store they name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from pwf.config import Settings
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

F = TypeVar("F", bound=Callable[..., Any])

db_option = click.option(
    "--db",
    "db",
    metavar="PATH",
    default=None,
    help="State database (default: $PWF_DB, else ./.pwf/state.db; pwf --help lists the"
    " other settings: PWF_SYNCHRONOUS, PWF_BUSY_TIMEOUT_MS).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def open_store(db: str | None, *, create: bool = False, read_only: bool = False) -> SqliteStore:
    """Open the store named by ``--db`` / ``$PWF_DB`` with the read model attached."""
    settings = Settings.load(db=db)
    read_model = ReadModel()
    store = SqliteStore(
        settings.db,
        create=create,
        synchronous=settings.synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
        hooks=[read_model],
        read_only=read_only,
    )
    if create:
        with store.transaction() as tx:
            read_model.install(tx.connection)
    return store
