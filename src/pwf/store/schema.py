"""The log's tables in every backend: rows, batches, the ``events`` view, the format mark.

Imports nothing of pwf.  SQLite (:mod:`pwf.store.sqlite_schema`) and
PostgreSQL (:mod:`pwf.store.postgres.schema`) keep the same tables, indexes
and view; only the names of their integer and byte types, the spelling of a
hash as hex and how bytes are joined differ, and SQLite's tables are
``STRICT``.  In format ``pwf.store.v2`` (ADR 0102) each fact is stored once:

* ``_pwf_batches``, one row per batch (keyed by its first seq): its batch
  number, ``at``, the cause's ids and ``head``, the members every event of
  the batch starts with (a new row wherever they change, so the row's
  columns are every one of its events' own);
* ``_pwf_events``, one row per event: its seq, the seq of its
  ``_pwf_batches`` row, its tag and the ids it is looked up by, its content
  hash as 32 bytes, ``link`` (the hash it follows, only when that is not the
  row before's) and its ``data`` member's bytes;
* ``_pwf_whole``, the rare event whose bytes the parts do not give back
  (:func:`pwf.store.packing.split`), kept whole with the hash it follows;
* ``_pwf_pruned``, the Merkle leaf hash of each event a prune took the
  bytes of and the seq of that prune's ``log.pruned`` (ADR 0103): its row
  in ``_pwf_events`` keeps its seq, hashes and place, and ``data`` is NULL.

The view ``events`` gives every reader the columns and the exact bytes
format ``pwf.store.v1`` stored, so what reads the log did not change.  A row
with neither ``data`` nor a ``_pwf_whole`` row has no body: it was pruned.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BATCH_INSERT",
    "EVENTS_VIEW",
    "EVENT_INDEXES",
    "FORMAT",
    "FORMAT_V1",
    "INDEXED_COLUMNS_DDL",
    "LOG_DDL",
    "ROW_INSERT",
    "WHOLE_INSERT",
    "events_view",
]

FORMAT: Final = "pwf.store.v2"
"""The format row of every pwf log this pwf writes, in either backend."""
FORMAT_V1: Final = "pwf.store.v1"
"""The format before ADR 0102: one ``events`` table holding each event's bytes whole."""

INDEXED_COLUMNS_DDL: Final = """  type TEXT NOT NULL,
  at {integer} NOT NULL,
  run_id TEXT,
  session_id TEXT,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT"""
"""Columns an event is looked up by, as ``events`` shows them; ``{integer}`` is the backend's."""

LOG_DDL: Final = (
    """CREATE TABLE IF NOT EXISTS {schema}_pwf_events (
  seq {integer} PRIMARY KEY CHECK (seq >= 1),
  head {integer} NOT NULL,
  type TEXT NOT NULL,
  run_id TEXT,
  session_id TEXT,
  content_hash {blob} NOT NULL CHECK (length(content_hash) = 32),
  link {blob} CHECK (length(link) = 32),
  data {blob}
){strict}""",
    """CREATE TABLE IF NOT EXISTS {schema}_pwf_batches (
  seq {integer} PRIMARY KEY CHECK (seq >= 1),
  batch {integer} NOT NULL CHECK (batch >= 1),
  at {integer} NOT NULL,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT,
  head {blob} NOT NULL
){strict}""",
    """CREATE TABLE IF NOT EXISTS {schema}_pwf_whole (
  seq {integer} PRIMARY KEY CHECK (seq >= 1),
  prev_hash TEXT,
  body {blob} NOT NULL
){strict}""",
    """CREATE TABLE IF NOT EXISTS {schema}_pwf_pruned (
  seq {integer} PRIMARY KEY CHECK (seq >= 1),
  leaf {blob} NOT NULL CHECK (length(leaf) = 32),
  taken {integer} NOT NULL CHECK (taken >= 0)
){strict}""",
)
"""The log's four tables; ``{schema}`` is empty or ``name.``, the rest the backend's."""

EVENT_INDEXES: Final = (
    "CREATE INDEX IF NOT EXISTS {schema}_pwf_events_head ON _pwf_events (head)",
    "CREATE INDEX IF NOT EXISTS {schema}_pwf_events_type ON _pwf_events (type, seq)",
    (
        "CREATE INDEX IF NOT EXISTS {schema}_pwf_events_run ON _pwf_events (run_id, seq)"
        " WHERE run_id IS NOT NULL"
    ),
    (
        "CREATE INDEX IF NOT EXISTS {schema}_pwf_events_session ON _pwf_events (session_id, seq)"
        " WHERE session_id IS NOT NULL"
    ),
    "CREATE INDEX IF NOT EXISTS {schema}_pwf_batches_batch ON _pwf_batches (batch)",
    (
        "CREATE INDEX IF NOT EXISTS {schema}_pwf_batches_request ON _pwf_batches (request_id)"
        " WHERE request_id IS NOT NULL"
    ),
)
"""The log's indexes, the same text in both backends; ``{schema}`` as in :data:`LOG_DDL`."""

_BODY: Final = (
    '{head} || {text_start}\'"contentHash":"\' || {hex_hash} || \'","data":\'{text_end}'
    ' || e.data || {text_start}\',"eventId":"evt-\' || e.seq || \'","prevHash":\''
    " || coalesce('\"' || {hex_prev} || '\"', 'null')"
    ' || \',"schema":"pwf.event.v1","seq":\' || e.seq || \',"type":"\' || e.type || \'"}}\''
    "{text_end}"
)


_PRINTF: Final = (
    'printf(\'%s"contentHash":"%s","data":%s,"eventId":"evt-%d","prevHash":%s,'
    '"schema":"pwf.event.v1","seq":%d,"type":"%s"}}\', {head}, {hex_hash}, e.data,'
    " e.seq, coalesce('\"' || {hex_prev} || '\"', 'null'), e.seq, e.type)"
)
"""The body as one ``printf`` of its parts (SQLite): the same bytes as :data:`_BODY`."""


def events_view(
    *, hex_of: str, text_start: str, text_end: str, body_cast: str, formatted: bool = False
) -> str:
    """The ``events`` view in a backend's spelling.

    ``hex_of`` spells lower-case hex of a byte expression (``{}`` stands for
    it); ``text_start`` and ``text_end`` wrap text that is joined to bytes;
    ``body_cast`` wraps the joined body (``{}``) as bytes.  ``formatted``
    writes the body with one ``printf`` instead of a chain of ``||`` (SQLite:
    one allocation instead of twelve, a sixth less time a row).
    """
    prev = "coalesce(e.link, p.content_hash)"
    body = (_PRINTF if formatted else _BODY).format(
        head="b.head",
        text_start=text_start,
        text_end=text_end,
        hex_hash=hex_of.format("e.content_hash"),
        hex_prev=hex_of.format(prev),
    )
    return (
        "CREATE VIEW {schema}events AS SELECT"  # noqa: S608 - pwf's own fragments
        " e.seq AS seq, b.batch AS batch, e.type AS type, b.at AS at,"
        " e.run_id AS run_id, e.session_id AS session_id, b.request_id AS request_id,"
        " b.client_id AS client_id, b.idempotency_key AS idempotency_key,"
        f" {hex_of.format('e.content_hash')} AS content_hash,"
        f" CASE WHEN w.seq IS NULL THEN {hex_of.format(prev)} ELSE w.prev_hash END AS prev_hash,"
        " CASE WHEN w.seq IS NOT NULL THEN w.body WHEN e.data IS NULL THEN NULL"
        f" ELSE {_braces(body_cast.format(body))} END AS body"
        " FROM _pwf_events e JOIN _pwf_batches b ON b.seq = e.head"
        " LEFT JOIN _pwf_whole w ON w.seq = e.seq"
        " LEFT JOIN _pwf_events p ON p.seq = e.seq - 1"
    )


def _braces(text: str) -> str:
    """``text`` as literal text of a string that ``str.format`` fills later."""
    return text.replace("{", "{{").replace("}", "}}")


EVENTS_VIEW: Final = events_view(
    hex_of="nullif(lower(hex({})), '')",
    text_start="",
    text_end="",
    body_cast="CAST({} AS BLOB)",
    formatted=True,
)
"""The ``events`` view in SQLite; ``{schema}`` as in :data:`LOG_DDL`."""

ROW_INSERT: Final = (
    "INSERT INTO {schema}_pwf_events"
    " (seq, head, type, run_id, session_id, content_hash, link, data) VALUES ({marks})"
)
BATCH_INSERT: Final = (
    "INSERT INTO {schema}_pwf_batches"
    " (seq, batch, at, request_id, client_id, idempotency_key, head) VALUES ({marks})"
)
WHOLE_INSERT: Final = "INSERT INTO {schema}_pwf_whole (seq, prev_hash, body) VALUES ({marks})"
"""Statements that write the log's tables; ``{marks}`` are the backend's placeholders."""
