"""The shared event log in PostgreSQL (psycopg 3); imports canonical, events, errors, the store.

The ``events`` table holds what SQLite's does (ADR 0037): each event's exact
canonical bytes, its content hash, prev hash, batch and indexed columns,
checked with the same rules.  ``_pwf_recorded`` holds the keys of every
``command.recorded`` event with the uniqueness of ``host_commands`` (request
id; client id + idempotency key), so no two hosts can both record one
request, whatever their local projections said.
psycopg is an optional dependency (the ``postgres`` extra): only this
package and :mod:`pwf.store.mirror` import it.

The package's modules, by job (ADR 0060):

* :mod:`~pwf.store.postgres.store`: :class:`PostgresStore`, the calls a store offers;
* :mod:`~pwf.store.postgres.schema`: the tables, their install and the format row;
* :mod:`~pwf.store.postgres.append`: write transactions under the advisory lock,
  the head's compare-and-set and the flush barrier;
* :mod:`~pwf.store.postgres.reads`: the head, catch-up reads, streams, lookups, verify;
* :mod:`~pwf.store.postgres.snapshot`: one snapshot of the log copied into a SQLite file (a backup);
* :mod:`~pwf.store.postgres.edge`: URLs and psycopg's errors turned into pwf's.
"""

from __future__ import annotations

from pwf.store.postgres.append import PostgresTransaction
from pwf.store.postgres.edge import is_postgres_url, shown_url, translate_error
from pwf.store.postgres.reads import PREFETCH
from pwf.store.postgres.schema import FORMAT, LOCK_KEY, SCHEMA
from pwf.store.postgres.store import PostgresStore

__all__ = [
    "FORMAT",
    "LOCK_KEY",
    "PREFETCH",
    "SCHEMA",
    "PostgresStore",
    "PostgresTransaction",
    "is_postgres_url",
    "shown_url",
    "translate_error",
]
