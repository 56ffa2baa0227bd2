"""Typed rows against the DDL: each row type's fields are its table's or query's columns.

ADR 0093.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sqlite3
import types
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NamedTuple,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import pytest

import pwf.commands
import pwf.events.interactions
import pwf.events.runs
import pwf.events.sessions
import pwf.views
from pwf.commands.rows import QUERIES, TABLES, Query, fields, select
from pwf.projections import host
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_HINTS: dict[str, object] = {
    **vars(pwf.events.interactions),
    **vars(pwf.events.runs),
    **vars(pwf.events.sessions),
}
"""Where the rows' hints are resolved: the events' literal types."""

_TYPES: dict[str, type] = {"TEXT": str, "INTEGER": int, "BLOB": bytes}
"""The Python type a STRICT column of each declared type reads as."""


def _load_every_decider() -> None:
    """Import every module of the deciders and views, so their queries are made."""
    for package in (pwf.commands, pwf.views):
        for module in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)


_load_every_decider()


@pytest.fixture(scope="module")
def projections(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """A fresh store's connection with every projection's tables, ``host_state``'s too."""
    path: Path = tmp_path_factory.mktemp("rows") / "pwf.db"
    model = ReadModel()
    store = SqliteStore(path, create=True, hooks=[model])
    with store.transaction() as tx:
        model.install(tx.connection)
        for statement in host.TABLE:  # made by the first host event, not at install
            tx.connection.execute(statement)
    with store.transaction() as tx:
        yield tx.connection
    store.close()


def _columns(connection: sqlite3.Connection, query: Query[Any]) -> list[str]:
    """The result columns of ``query``, run with every parameter 0 on empty tables."""
    numbered = [int(n) for n in re.findall(r"\?(\d+)", query.sql)]
    count = max(numbered) if numbered else query.sql.count("?")
    cursor = connection.execute(query.sql, (0,) * count)
    return [column[0] for column in cursor.description]


@pytest.mark.parametrize("query", QUERIES, ids=repr)
def test_each_query_reads_the_columns_of_its_row_type(
    projections: sqlite3.Connection, query: Query[Any]
) -> None:
    """The statement's result columns are the row type's fields, in order."""
    assert _columns(projections, query) == list(fields(query.row))


@pytest.mark.parametrize("row", list(TABLES), ids=lambda row: row.__name__)
def test_each_table_row_is_its_table(projections: sqlite3.Connection, row: type[Any]) -> None:
    """A whole-table row has the table's columns, in order, typed as the DDL declares them."""
    info = projections.execute(f"PRAGMA table_info({TABLES[row]})").fetchall()
    declared = {
        name: _TYPES[kind] if notnull or pk else _TYPES[kind] | None
        for _, name, kind, notnull, _, pk in info
    }
    assert list(fields(row)) == list(declared)
    assert {
        name: _declared(hint) for name, hint in get_type_hints(row, localns=_HINTS).items()
    } == declared


def _declared(hint: Any) -> Any:
    """The column type a field's type reads: a Literal of texts is TEXT, as the DDL checks it."""
    optional = get_origin(hint) in {types.UnionType, Union} and type(None) in get_args(hint)
    inner = next(arg for arg in get_args(hint) if arg is not type(None)) if optional else hint
    if get_origin(inner) is Literal:
        assert all(isinstance(value, str) for value in get_args(inner))
        inner = str
    return inner | None if optional else inner


def test_a_ddl_change_fails_the_check(projections: sqlite3.Connection) -> None:
    """A row type that lacks a column its statement reads, or names one its table has not, fails."""

    class Short(NamedTuple):
        run_id: str

    class Renamed(NamedTuple):
        run_id: str
        renamed: str

    short = Query(Short, "SELECT * FROM run_checkpoints")
    TABLES[Renamed] = "run_checkpoints"
    try:
        assert _columns(projections, short) != list(fields(Short))
        renamed = select(Renamed, "WHERE run_id = ?")
        with pytest.raises(sqlite3.OperationalError, match="no such column: renamed"):
            _columns(projections, renamed)
        QUERIES.remove(renamed)
    finally:
        del TABLES[Renamed]
        QUERIES.remove(short)
