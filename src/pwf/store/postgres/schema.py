"""The shared log's tables in PostgreSQL, their idempotent install and the format check.

Imports psycopg, pwf's errors and the log's table common to both backends (:mod:`pwf.store.schema`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.errors import NotPwfDatabaseError, StoreError
from pwf.store.schema import EVENT_INDEXES, FORMAT, FORMAT_V1, LOG_DDL, events_view

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

__all__ = [
    "EVENTS_VIEW",
    "FORMAT",
    "INDEXES",
    "LOCK_KEY",
    "SCHEMA",
    "TABLES",
    "found_format",
    "install",
    "read_format",
]

LOCK_KEY: Final = 0x707766_6C6F67
"""The advisory lock every append takes ("pwflog"); one log per database."""

EVENTS_VIEW: Final = events_view(
    hex_of="encode({}, 'hex')",
    text_start="convert_to(",
    text_end=", 'UTF8')",
    body_cast="{}",
).replace("CREATE VIEW", "CREATE OR REPLACE VIEW")
"""The ``events`` view in PostgreSQL's spelling (ADR 0102)."""

TABLES: Final = tuple(
    ddl.format(schema="", integer="BIGINT", blob="BYTEA", strict="") for ddl in LOG_DDL
)
"""The log's three tables (ADR 0102)."""
INDEXES: Final = tuple(index.format(schema="") for index in EVENT_INDEXES)
"""The log's indexes."""

SCHEMA: Final = (
    *TABLES,
    *INDEXES,
    EVENTS_VIEW.format(schema=""),
    """CREATE TABLE IF NOT EXISTS _pwf_recorded (
  request_id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  seq BIGINT NOT NULL,
  UNIQUE (client_id, idempotency_key)
)""",
    "CREATE TABLE IF NOT EXISTS _pwf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS _pwf_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq BIGINT NOT NULL,
  content_hash TEXT,
  batch BIGINT NOT NULL
)""",
    (
        "INSERT INTO _pwf_head (id, seq, content_hash, batch) VALUES (1, 0, NULL, 0)"
        " ON CONFLICT (id) DO NOTHING"
    ),
    "INSERT INTO _pwf_meta (key, value) VALUES ('format', %s) ON CONFLICT (key) DO NOTHING",
    (
        "INSERT INTO _pwf_meta (key, value) VALUES ('log_id', gen_random_uuid()::text)"
        " ON CONFLICT (key) DO NOTHING"
    ),
)
"""Idempotent: ``pwf init --store`` may run any number of times, from any host."""


def install(connection: psycopg.Connection[TupleRow], where: str) -> None:
    """Create the schema under the log's lock, unless another program's table is in the way.

    Raises:
        StoreError: the database holds an ``events`` table that is not a pwf log's,
            or a pwf log of another format (:func:`read_format`'s line).
    """
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        found = connection.execute(
            "SELECT to_regclass('events') IS NOT NULL, to_regclass('_pwf_meta') IS NOT NULL"
        ).fetchone()
        if found is not None and found[0] and not found[1]:
            raise StoreError(f"{where}: holds another program's events table; not a pwf log")
        if found_format(connection)[0] not in (None, FORMAT):  # a log of another format
            read_format(connection, where)
        for statement in SCHEMA:
            params = (FORMAT,) if "%s" in statement else None
            connection.execute(statement, params)
        from pwf.store.postgres.reads import HEAD, head_of  # noqa: PLC0415 - install only
        from pwf.store.postgres.tree import build  # noqa: PLC0415 - install only

        build(connection, head_of(connection.execute(HEAD).fetchone()))  # ADR 0083


def found_format(connection: psycopg.Connection[TupleRow]) -> tuple[str | None, str]:
    """The database's format row (None: it has none) and the log's id ("" when it has none)."""
    rows: dict[str, str] = {}
    if connection.execute("SELECT to_regclass('_pwf_meta')").fetchone() != (None,):
        found = connection.execute("SELECT key, value FROM _pwf_meta").fetchall()
        rows = {str(key): str(value) for key, value in found}
    return rows.get("format"), rows.get("log_id", "")


def read_format(
    connection: psycopg.Connection[TupleRow], where: str, formats: tuple[str, ...] = (FORMAT,)
) -> tuple[str, str]:
    """The log's format and id, once its format row says it is a pwf log of one of ``formats``.

    Raises:
        NotPwfDatabaseError: the log is in format ``pwf.store.v1`` (it is to be migrated).
        StoreError: the database holds no pwf log, or one of another format.
    """
    found, log_id = found_format(connection)
    if found is not None and found in formats:
        return found, log_id
    if found == FORMAT_V1:
        raise NotPwfDatabaseError(
            f"{where}: a shared log in format {FORMAT_V1}; this pwf reads {FORMAT}:"
            " run `pwf log migrate --store URL --backup FILE` to upgrade it"
            " (FILE keeps the old log, ADR 0104)"
        )
    raise StoreError(f"{where}: not a pwf log (expected format {FORMAT}; run `pwf init --store`)")
