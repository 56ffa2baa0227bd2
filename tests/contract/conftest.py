"""The log implementations the contract suite runs against, one ``backend`` per store.

Each backend hands out its store, a way to open a second connection to the
same log (another writer, another host) and a way to tamper with the stored
rows behind the store's back, as a damaged disk or an attacker would.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

BACKENDS = ("sqlite", "postgresql")


class Backend:
    """One log implementation under test."""

    def __init__(self, name: str, target: str) -> None:
        """Open (creating) the log at ``target``: a file path or a PostgreSQL URL."""
        self.name = name
        self.target = target
        self.opened: list[Any] = []
        self.store: Any = self.open(create=True)

    def open(self, *, create: bool = False) -> Any:
        """Another connection to the same log, closed after the test."""
        store = self.connect(create=create)
        self.opened.append(store)
        return store

    def connect(self, *, create: bool = False) -> Any:
        """Another connection to the same log, for the caller to close."""
        if self.name == "sqlite":
            store: Any = SqliteStore(self.target, create=create)
        else:
            from pwf.store.postgres import PostgresStore  # noqa: PLC0415 - optional extra

            store = PostgresStore(self.target, create=create)
        return store

    def tamper(self, sql: str, *params: object) -> None:
        """Run one statement (``?`` placeholders) on the stored rows, outside the store."""
        if self.name == "sqlite":
            connection = sqlite3.connect(self.target)
            try:
                with connection:
                    connection.execute(sql, params)
            finally:
                connection.close()
            return
        import psycopg  # noqa: PLC0415 - optional extra

        with psycopg.connect(self.target, autocommit=True) as pg:
            pg.execute(sql.replace("?", "%s"), params)

    def close(self) -> None:
        """Close every connection the test opened."""
        for store in self.opened:
            store.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each log implementation in turn, empty."""
    if request.param == "sqlite":
        target = str(tmp_path / "log.db")
    else:
        target = request.getfixturevalue("pg_url")
    opened = Backend(request.param, target)
    yield opened
    opened.close()
