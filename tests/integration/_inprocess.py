"""The chain walk's ranges walked in this process: what a forked range gives, without the fork.

:class:`pwf._process.Forked` runs one range of a split walk in a forked
process; forking a test process costs far more than walking seven events.
:func:`ranges_in_process` puts :class:`InProcess` in its place, which runs
the same function on the same range here and hands back its value, or its
failure as the :class:`~pwf._process.ForkedError` a fork reports, so the
split, the ranges and the joining of their parts are the code under test
(ADR 0049, ADR 0054).  Tests that walk every offset use it and still walk a
sample of the offsets with real forks.

Inside the block the walk's connections to one file are one connection,
opened at the first ``connect`` and closed when the block ends: a fresh
connection reads the whole schema, which costs more than walking a short
log, and in one process nothing but the fork made them separate
(ADR 0067).  Each range still runs its own query on it, from its own
bounds, as a fork does on its own connection.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING
from unittest import mock

from pwf._process import ForkedError
from pwf.store import chainwalk

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["InProcess", "ranges_in_process"]


class InProcess:
    """What :class:`pwf._process.Forked` gives, computed here: the same function, range and part."""

    def __init__(self, target: Callable[..., object], *args: object) -> None:
        """Run ``target(*args)`` at once, keeping its value or its failure."""
        try:
            self._found: object = target(*args)
            self._failed: str | None = None
        except Exception as error:  # noqa: BLE001 - a forked process reports any failure
            self._failed = f"{type(error).__name__}: {error}"

    def result(self) -> object:
        """The value, or the failure as a fork reports it.

        Raises:
            ForkedError: the function raised.
        """
        if self._failed is not None:
            raise ForkedError(f"a forked process failed: {self._failed}")
        return self._found

    def close(self) -> None:
        """Nothing to stop."""


class _Kept:
    """A connection whose ``close`` waits for the end of the block (see :class:`_OneConnection`)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, *args: object) -> sqlite3.Cursor:
        return self._connection.execute(*args)  # type: ignore[arg-type]

    def close(self) -> None:
        """Kept open for the block's next walker of the same file."""


class _OneConnection:
    """``sqlite3`` as :mod:`pwf.store.chainwalk` sees it in the block: one connection per file."""

    Error = sqlite3.Error
    Connection = sqlite3.Connection

    def __init__(self) -> None:
        self.opened: dict[str, sqlite3.Connection] = {}

    def connect(self, database: str, *, uri: bool) -> _Kept:
        if database not in self.opened:
            self.opened[database] = sqlite3.connect(database, uri=uri)
        return _Kept(self.opened[database])

    def close(self) -> None:
        for connection in self.opened.values():
            connection.close()


@contextlib.contextmanager
def ranges_in_process() -> Iterator[None]:
    """The split walk's ranges walked one after the other here instead of in forks."""
    connections = _OneConnection()
    try:
        with (
            mock.patch.object(chainwalk, "Forked", InProcess),
            mock.patch.object(chainwalk, "sqlite3", connections),
        ):
            yield
    finally:
        connections.close()
