"""A recording of the statements a mirrored host sends to PostgreSQL and SQLite, in order.

:func:`recording` wraps a mirrored store's connection to the shared log and
traces its SQLite connection into one list; :func:`round_trips` groups
PostgreSQL's statements by round trip.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self

from pwf.host import Host
from pwf.readmodel import ReadModel
from pwf.store.mirror import MirroredStore
from pwf.store.postgres import PostgresStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


__all__ = ["mirrored_host", "recording", "round_trips"]


class _Cursor:
    """A psycopg cursor that notes each statement it runs."""

    def __init__(self, cursor: Any, seen: list[tuple[str, str]]) -> None:
        self._cursor, self._seen = cursor, seen

    def __enter__(self) -> Self:
        self._cursor.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.__exit__(*exc)

    def execute(self, sql: str, params: object = None, **kwargs: Any) -> Any:
        self._seen.append(("pg", " ".join(str(sql).split())[:60]))
        return self._cursor.execute(sql, params, **kwargs)

    def executemany(self, sql: str, params: object) -> Any:
        self._seen.append(("pg", " ".join(str(sql).split())[:60]))
        return self._cursor.executemany(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Connection:
    """A psycopg connection that notes each statement it runs, in one list with SQLite's."""

    def __init__(self, connection: Any, seen: list[tuple[str, str]]) -> None:
        self._connection, self._seen = connection, seen

    def execute(self, sql: str, params: object = None, **kwargs: Any) -> Any:
        statements = str(sql).split("; ")
        if len(statements) > 1:  # one query string: one round trip
            self._seen.append(("pg", "["))
        self._seen.extend(("pg", " ".join(part.split())[:60]) for part in statements)
        if len(statements) > 1:
            self._seen.append(("pg", "]"))
        return self._connection.execute(sql, params, **kwargs)

    def cursor(self, *args: Any, **kwargs: Any) -> _Cursor:
        return _Cursor(self._connection.cursor(*args, **kwargs), self._seen)

    @contextmanager
    def pipeline(self) -> Iterator[Any]:
        """One round trip: its statements are noted between ``[`` and ``]``."""
        self._seen.append(("pg", "["))
        with self._connection.pipeline() as pipeline:
            yield pipeline
        self._seen.append(("pg", "]"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def mirrored_host(url: str, path: Path) -> tuple[MirroredStore, Host[MirroredStore]]:
    model = ReadModel()
    store = MirroredStore(path, PostgresStore(url), hooks=[model], install=model.install)
    return store, Host(store)


def recording(store: MirroredStore) -> list[tuple[str, str]]:
    """Note every statement of ``store``'s two connections from now on, in order."""
    seen: list[tuple[str, str]] = []
    log = store.shared.log
    log._connection = _Connection(log.connection, seen)  # type: ignore[assignment]
    store.connection.set_trace_callback(lambda sql: seen.append(("sqlite", sql[:60])))
    return seen


def round_trips(seen: list[tuple[str, str]]) -> list[list[str]]:
    """PostgreSQL's statements grouped by round trip: a pipeline's together, others alone."""
    trips: list[list[str]] = []
    open_trip: list[str] | None = None
    for place, sql in seen:
        if place != "pg":
            continue
        if sql == "[":
            open_trip = []
        elif sql == "]":
            assert open_trip is not None
            trips.append(open_trip)
            open_trip = None
        elif open_trip is not None:
            open_trip.append(sql)
        else:
            trips.append([sql])
    return trips
