"""Where a store is opened: the one way the rooms above the store make one (ADR 0088).

Imports the SQLite store and the mirror, and the PostgreSQL store only when
a shared log is asked for (psycopg is an optional extra).  No module above
:mod:`pwf.store` names a backend class (``tests/unit/test_store_backends.py``
walks them): it opens a file with :data:`open_file`, a shared log with
:func:`open_shared_log`, a host's local file on a shared log with
:func:`open_mirror`, and asks for the SQLite file that holds the Merkle
tree with :func:`sqlite_file`; it types what it got against the port
(:class:`~pwf.store.EventStore`, :class:`~pwf.store.LogFile`,
:class:`~pwf.store.ProjectionFile`, :class:`~pwf.store.FileTransaction`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.errors import InputError
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    import os
    from typing import Unpack

    from pwf.store.mirror import MirroredStore, MirrorOptions
    from pwf.store.postgres import PostgresStore

__all__ = ["open_file", "open_mirror", "open_shared_log", "sqlite_file"]


open_file: Final = SqliteStore
"""The pwf database file at a path: its log of record and its projections.

Called with :class:`~pwf.store.sqlite.SqliteStore`'s arguments (``create``,
``read_only``, ``synchronous``, ``busy_timeout_ms``, ``hooks``, ``serving``,
``deciding``); raises :class:`~pwf.errors.InputError` when the file does not
exist and ``create`` is false, :class:`~pwf.errors.StoreError` when SQLite
refuses it or it is not a pwf database.
"""


def open_shared_log(
    url: str,
    *,
    create: bool = False,
    formats: tuple[str, ...] | None = None,
    busy_timeout_ms: int = 5_000,
) -> PostgresStore:
    """The shared log in PostgreSQL at ``url`` (with ``create``, its schema installed).

    ``formats``: the formats it may be in (default: this pwf's; ``pwf log
    migrate`` also opens ``pwf.store.v1``, ADR 0104).  ``busy_timeout_ms``:
    how long a write waits for the log's lock (ADR 0120).

    Raises:
        ImportError: psycopg (the ``postgres`` extra) is not installed.
        StoreError: PostgreSQL cannot be reached, or the database holds no pwf log.
    """
    from pwf.store.postgres import PostgresStore  # noqa: PLC0415 - an optional extra

    if formats is None:
        return PostgresStore(url, create=create, busy_timeout_ms=busy_timeout_ms)
    return PostgresStore(url, create=create, formats=formats, busy_timeout_ms=busy_timeout_ms)


def open_mirror(
    path: str | os.PathLike[str], log: PostgresStore, **options: Unpack[MirrorOptions]
) -> MirroredStore:
    """A host's local file on a shared log, caught up from it (ADR 0038).

    ``options`` are :class:`~pwf.store.mirror.MirroredStore`'s, with its
    defaults.  The store owns ``log`` and closes it when the file cannot be
    opened; the mirror's module loads only here, so a verb on one SQLite
    file never imports it.

    Raises:
        StoreError: the file belongs to another log, or is ahead of this one.
    """
    from pwf.store.mirror import MirroredStore  # noqa: PLC0415 - only a shared log's host needs it

    return MirroredStore(path, log, **options)


def sqlite_file(file: object) -> SqliteStore:
    """The SQLite file that holds the Merkle tree (the log's, or a shared log's local copy).

    Raises:
        InputError: ``file`` is not a SQLite file of pwf's.
    """
    if not isinstance(file, SqliteStore):
        raise InputError("this store keeps no Merkle tree a proof can be read from")
    return file
