"""The Python API: a database in this process, its log, and the re-exported served-host client.

Imports the host, the store, the read model, events, protocol, status and
verify (the last two when asked for).  ``pwf`` exports these names lazily
(``from pwf import Database``), so ``import pwf`` stays cheap.

- :class:`Database` opens a state database in this process and runs
  client-protocol requests against it in direct mode, as ``pwf request``
  does, then reads the log as typed events and the projections as rows.
- :class:`LogReader` reads a database's log without taking the write lock:
  typed events in seq order, the head, and the chain's verification.

A served host is reached with :class:`pwf.client.HostClient` instead (see
``docs/api.md``).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final, Self

from pwf import _sqlite
from pwf._closing import Closing
from pwf.errors import InputError
from pwf.host import Host
from pwf.protocol.client import (
    ClientRequest,
    ClientResponse,
    encode_request,
    parse_request,
)
from pwf.statereaders import overview, verify_failure
from pwf.store.opening import open_file

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator

    from pwf.events import Entry
    from pwf.store import EventStore, Head, VerifyReport

__all__ = ["DEFAULT_CLIENT_ID", "Database", "LogReader", "Row"]

DEFAULT_CLIENT_ID: Final = "pwf-python"
"""The ``clientId`` of requests :meth:`Database.request` builds unless told otherwise."""

Row = dict[str, object]
"""One projection row: column name to value (BLOBs as ``bytes``)."""


def _now(at: int | None) -> int:
    """``at``, else the wall clock in epoch milliseconds."""
    return at if at is not None else time.time_ns() // 1_000_000


def _events(
    store: EventStore, first: int, last: int | None, types: frozenset[str]
) -> Iterator[Entry]:
    for entry in store.entries(first, last):
        if not types or entry.type in types:
            yield entry


class _Opened(Closing):
    """A database file opened in this process: its head, its typed events, closing it."""

    _opened: EventStore

    def head(self) -> Head:
        """The last event's seq, its ``contentHash`` and its batch (seq 0 for an empty log)."""
        return self._opened.head()

    def events(
        self,
        first: int = 1,
        last: int | None = None,
        *,
        types: frozenset[str] | set[str] = frozenset(),
    ) -> Iterator[Entry]:
        """The events from seq ``first`` to ``last`` (the head when None), typed, in seq order.

        ``types`` keeps only events of those type names (``"run.reserved"``, ...).
        Each :class:`~pwf.events.Entry` has the envelope's members and ``event``,
        the typed event (a msgspec Struct of :mod:`pwf.events`).
        """
        return _events(self._opened, first, last, frozenset(types))

    def close(self) -> None:
        """Close the file."""
        self._opened.close()


class LogReader(_Opened):
    """Read one database's log without writing: typed events, the head, the chain's proof.

    >>> with LogReader("state.db") as log:            # doctest: +SKIP
    ...     for entry in log.events(types={"run.reserved"}):
    ...         print(entry.seq, entry.event.run_id)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open ``path`` read-only (SQLite ``mode=ro``).

        Raises:
            StoreError: the file is missing or is not a pwf database.
        """
        self._opened = open_file(Path(path), read_only=True)

    def __iter__(self) -> Iterator[Entry]:
        """Every event, in seq order."""
        return self.events()

    def verify(self) -> VerifyReport:
        """Walk the hash chain from the stored bytes; ``first_bad_seq`` names the first fault."""
        return self._opened.verify()


class Database(_Opened):
    """A state database in this process: run requests, read the log and the projections.

    Requests run in direct mode, each in its own write transaction, exactly as
    ``pwf request`` runs them: the same answers, the same events.  Like
    ``pwf request``, it refuses while a served host (``pwf serve``) owns the
    database; talk to that host with :class:`pwf.client.HostClient`.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        """Open the database at ``path``; ``create`` makes it first when it does not exist.

        Raises:
            StoreError: the file is missing (without ``create``) or is not a pwf database.
        """
        from pwf.readmodel import ReadModel  # noqa: PLC0415 - the projections load with a writer
        from pwf.sqlviews import install_views  # noqa: PLC0415 - as ReadModel

        path = Path(path)
        create = create and not path.exists()
        read_model = ReadModel()
        self.path = path.absolute()
        """The database file."""
        self.store = open_file(path, create=create, hooks=[read_model], deciding=True)
        """The underlying store, for what this class does not wrap."""
        self._opened = self.store
        if create:
            self.store.install(read_model.install, install_views)
        self._host = Host(self.store)
        self._host.verifier = verify_failure
        self._host.overview = overview
        self._numbers = 0
        self._prefix = secrets.token_hex(4)

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> Self:
        """Open ``path``, making a new database there first when it does not exist."""
        return cls(path, create=True)

    def request(  # noqa: PLR0913 - the members of a request, all optional but the first
        self,
        operation: str,
        payload: object = None,
        *,
        run_id: str | None = None,
        expected_revision: int | None = None,
        request_id: str | None = None,
        idempotency_key: str | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        at: int | None = None,
    ) -> ClientResponse:
        """Run one client-protocol request and return its response.

        ``payload`` is the operation's payload (``pwf schema OPERATION``
        prints its JSON Schema); None sends ``{}``.  ``request_id`` and
        ``idempotency_key`` default to fresh ids; send the same key again to
        get the recorded answer back (``adopted``).  ``at`` is the request's
        time in epoch milliseconds (default: the wall clock).

        Raises:
            ProtocolError: the request is not valid (a bad id, an unknown operation).
            StoreError: a served host owns the database, or the store failed.
        """
        self._numbers += 1
        request_id = request_id or f"py-{self._prefix}-{self._numbers}"
        request = ClientRequest(
            request_id=request_id,
            client_id=client_id,
            operation=operation,
            idempotency_key=idempotency_key or request_id,
            payload={} if payload is None else payload,
            run_id=run_id,
            expected_revision=expected_revision,
        )
        line = encode_request(request)  # checks every member as a parsed line is checked
        now = _now(at)
        self._host.refuse_if_served(now)
        return self._host.request(parse_request(line), now)

    def answer(self, line: bytes, *, at: int | None = None) -> bytes:
        """Answer one canonical request line (without its newline) with its response line.

        Raises:
            ProtocolError: the line is not a canonical request.
            StoreError: a served host owns the database, or the store failed.
        """
        request = parse_request(line)
        now = _now(at)
        self._host.refuse_if_served(now)
        return self._host.answer(request, now)

    def tables(self) -> list[str]:
        """The names of the projection tables, sorted (``runs``, ``run_queue``, ...)."""
        with self.store.snapshot() as reader:
            _, rows = reader.table(_sqlite.PROJECTION_TABLES.format(schema="main"))
        return [str(row[0]) for row in rows]

    def rows(self, table: str, **equal: object) -> list[Row]:
        """The rows of one projection table whose columns equal ``equal`` (all rows without it).

        >>> db.rows("runs", run_id="run-1")[0]["status"]   # doctest: +SKIP
        'queued'

        Raises:
            InputError: ``table`` is not a projection table, or a column is not one of its own.
        """
        if table not in self.tables():
            raise InputError(
                f"unknown projection table: {table}; known: {', '.join(self.tables())}"
            )
        with self.store.snapshot() as reader:
            names, _ = reader.table(f"SELECT * FROM {_sqlite.quote(table)} LIMIT 0")
            unknown = sorted(set(equal) - set(names))
            if unknown:
                raise InputError(f"{table} has no column {unknown[0]}; columns: {', '.join(names)}")
            where = " AND ".join(f"{_sqlite.quote(name)} = ?" for name in equal)
            sql = f"SELECT * FROM {_sqlite.quote(table)}" + (f" WHERE {where}" if where else "")
            names, rows = reader.table(sql, tuple(equal.values()))
        return [dict(zip(names, row, strict=True)) for row in rows]

    def status(self, at: int | None = None) -> object:
        """What ``pwf status --json`` prints: the counts, what waits and why, contradictions."""
        return overview(self.store, _now(at))

    def verify(self) -> str | None:
        """``pwf verify``'s verdict: why the chain or a projection fails, or None when both hold."""
        return verify_failure(self.store)
