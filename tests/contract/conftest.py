"""The log implementations the contract suite runs against, one ``backend`` per store.

Three: a SQLite file, a shared log in PostgreSQL, and a host's local file
mirroring that shared log (ADR 0088), each opened as the rooms above the
store open it (:mod:`pwf.store.opening`).

Each backend hands out its store, a way to open a second connection to the
same log (another writer, another host) and a way to tamper with the stored
rows behind the store's back, as a damaged disk or an attacker would.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from pwf.store.opening import open_file, open_mirror, open_shared_log

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests._tamper import editable, pg_editable
else:
    from _tamper import editable, pg_editable

BACKENDS = ("sqlite", "postgresql", "mirrored")


class Backend:
    """One log implementation under test."""

    def __init__(self, name: str, target: str, folder: Path | None = None) -> None:
        """Open (creating) the log at ``target``: a file path or a PostgreSQL URL.

        A mirrored log keeps each connection's local file in ``folder``.
        """
        self.name = name
        self.target = target
        self.folder = folder
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
            return open_file(self.target, create=create)
        log = open_shared_log(self.target, create=create or self.name == "mirrored")
        if self.name == "postgresql":
            return log
        assert self.folder is not None
        return open_mirror(self.folder / f"host-{len(self.opened)}.db", log)

    def current(self, store: Any) -> Any:
        """``store`` with its reads as of now: a mirror reads its local copy, caught up here.

        A mirror's copy is caught up at each write and each ``catch_up``
        (ADR 0038), not at each read; a damaged shared log is refused then,
        and named by ``verify``, which walks the shared log itself.
        """
        if self.name == "mirrored":
            store.catch_up()
        return store

    def tamper(self, sql: str, *params: object) -> None:
        """Run one statement (``?`` placeholders) on the stored rows, outside the store.

        ``events`` takes it as format v1's table did (:mod:`tests._tamper`).
        """
        if self.name == "sqlite":
            connection = editable(sqlite3.connect(self.target))
            try:
                with connection:
                    connection.execute(sql, params)
            finally:
                connection.close()
            return
        import psycopg  # noqa: PLC0415 - optional extra

        with psycopg.connect(self.target, autocommit=True) as pg, pg_editable(pg):
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
    opened = Backend(request.param, target, tmp_path)
    yield opened
    opened.close()
