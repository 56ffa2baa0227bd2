"""The ``events`` view made editable as format v1's table was, for tests that damage a log.

A test that tampers with a log says what it changes in the columns every
reader sees (``UPDATE events SET body = ? WHERE seq = 3``).  In format
``pwf.store.v2`` (ADR 0102) ``events`` is a view over ``_pwf_events``,
``_pwf_batches`` and ``_pwf_whole``; :func:`editable` gives one SQLite
connection ``INSTEAD OF`` triggers on it (``TEMP``: nothing is written to the
file's schema, and they end with the connection), and :func:`pg_editable`
gives a PostgreSQL connection the same for one transaction.  Either way a
change reaches the stored rows as v1's did and changes nothing else:

* an edited event is kept whole (``_pwf_whole``: its new bytes and
  ``prev_hash``, ``_pwf_events.data`` NULL), its tag, ids and content hash
  in ``_pwf_events``, its batch, ``at`` and cause in a ``_pwf_batches`` row
  of its own keyed at its seq; the events after it that shared its old
  batch row move first onto a copy of that row, so they do not change;
* a deleted event leaves ``_pwf_events`` and ``_pwf_whole`` (and its batch
  row, once no event has it), and the event after it keeps the ``prevHash``
  it showed (its ``link`` is set to the deleted event's hash);
* an inserted event is kept whole with a batch row of its own.

Every event's shown ``prevHash`` that a change would move is pinned first:
the next event's ``link`` (or, after a gap, its bytes kept whole).  A
content hash that is not 64 lower-case hex digits cannot be stored (the
column holds 32 bytes): the statement fails with that message and changes
nothing.

Imports nothing of pwf, nor psycopg: :func:`pg_editable` is handed its connection.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator

__all__ = ["HASH_REFUSED", "editable", "pg_editable"]

HASH_REFUSED: Final = "a content_hash of pwf.store.v2 is 64 lower-case hex digits"
"""The error of a statement that writes any other content hash."""
_UNHEX: Final = "pwf_tamper_unhex"
_MARK: Final = "X'22636f6e74656e7448617368223a22'"
"""``"contentHash":"`` as a blob literal: where an event's batch members end."""


def _unhex(text: str | None) -> bytes | None:
    """Hex text as bytes (SQLite 3.40 has no ``unhex``); NULL stays NULL."""
    return None if text is None else bytes.fromhex(text)


def _pin(seq: str, exclude: str | None = None) -> str:
    """Keep the ``prevHash`` the event at ``seq`` shows, whatever happens to the one before it.

    An event that shows the hash of the row before it gets that hash as
    its ``link``; one after a gap (which shows none) is kept whole.
    ``exclude`` names a seq (the edited one) that is left alone.
    """
    skip = "" if exclude is None else f" AND {seq} <> {exclude}"
    return f"""
  INSERT INTO _pwf_whole (seq, prev_hash, body)
    SELECT e.seq, NULL, v.body FROM _pwf_events e JOIN events v ON v.seq = e.seq
    WHERE e.seq = {seq}{skip} AND e.link IS NULL AND v.body IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM _pwf_whole w WHERE w.seq = e.seq)
      AND NOT EXISTS (SELECT 1 FROM _pwf_events p WHERE p.seq = e.seq - 1);
  UPDATE _pwf_events SET data = NULL
    WHERE seq = {seq}{skip} AND EXISTS (SELECT 1 FROM _pwf_whole w WHERE w.seq = {seq});
  UPDATE _pwf_events SET link = (SELECT p.content_hash FROM _pwf_events p WHERE p.seq = {seq} - 1)
    WHERE seq = {seq}{skip} AND link IS NULL
      AND EXISTS (SELECT 1 FROM _pwf_events p WHERE p.seq = {seq} - 1);"""  # noqa: S608 - the test's own fragments


def _refuse() -> str:
    """Fail the statement on a NEW row v2 cannot hold."""
    return f"""
  SELECT RAISE(ABORT, 'tamper: {HASH_REFUSED}')
    WHERE NEW.content_hash IS NULL OR length(NEW.content_hash) <> 64
      OR NEW.content_hash GLOB '*[^0-9a-f]*';
  SELECT RAISE(ABORT, 'tamper: an event needs its seq') WHERE NEW.seq IS NULL;"""


def _own_batch(before: str) -> str:
    """Give the NEW event a ``_pwf_batches`` row of its own at its seq.

    ``before`` is the seq it had (``NEW.seq`` for an insert): only that
    event may use a batch row keyed at its new seq.
    """
    body = "CAST(NEW.body AS BLOB)"
    head = f"coalesce(substr({body}, 1, instr({body}, {_MARK}) - 1), X'')"
    return f"""
  SELECT RAISE(ABORT, 'tamper: another event keeps the batch row at this seq')
    WHERE EXISTS (SELECT 1 FROM _pwf_events WHERE head = NEW.seq AND seq <> {before});
  INSERT OR REPLACE INTO _pwf_batches
    (seq, batch, at, request_id, client_id, idempotency_key, head)
    VALUES (NEW.seq, NEW.batch, NEW.at, NEW.request_id, NEW.client_id, NEW.idempotency_key,
            CASE WHEN instr({body}, {_MARK}) > 0 THEN {head} ELSE X'' END);"""  # noqa: S608 - the test's own fragments


_WHOLE: Final = """
  INSERT INTO _pwf_whole (seq, prev_hash, body)
    SELECT NEW.seq, NEW.prev_hash, CAST(NEW.body AS BLOB) WHERE NEW.body IS NOT NULL;"""
_LINK: Final = f"CASE WHEN NEW.body IS NULL THEN {_UNHEX}(NEW.prev_hash) END"
"""A bodiless event shows its ``prevHash`` through its link; a whole one through its bytes."""

_TRIGGERS: Final = (
    "CREATE TEMP TABLE IF NOT EXISTS pwf_tamper_note (old_head INTEGER, follower INTEGER)",
    f"""CREATE TEMP TRIGGER IF NOT EXISTS pwf_tamper_update INSTEAD OF UPDATE ON main.events
BEGIN{_refuse()}{_pin("OLD.seq + 1")}{_pin("NEW.seq + 1", exclude="OLD.seq")}
  DELETE FROM pwf_tamper_note;
  INSERT INTO pwf_tamper_note (old_head, follower)
    SELECT e.head, (SELECT min(f.seq) FROM _pwf_events f WHERE f.head = e.head AND f.seq > e.seq)
    FROM _pwf_events e WHERE e.seq = OLD.seq;
  INSERT INTO _pwf_batches (seq, batch, at, request_id, client_id, idempotency_key, head)
    SELECT n.follower, b.batch, b.at, b.request_id, b.client_id, b.idempotency_key, b.head
    FROM pwf_tamper_note n JOIN _pwf_batches b ON b.seq = n.old_head
    WHERE n.follower IS NOT NULL;
  UPDATE _pwf_events SET head = (SELECT follower FROM pwf_tamper_note)
    WHERE head = (SELECT old_head FROM pwf_tamper_note) AND seq > OLD.seq;{_own_batch("OLD.seq")}
  DELETE FROM _pwf_whole WHERE seq = OLD.seq;{_WHOLE}
  UPDATE _pwf_events SET seq = NEW.seq, head = NEW.seq, type = NEW.type, run_id = NEW.run_id,
      session_id = NEW.session_id, content_hash = {_UNHEX}(NEW.content_hash), link = {_LINK},
      data = NULL
    WHERE seq = OLD.seq;
  DELETE FROM _pwf_batches WHERE seq = (SELECT old_head FROM pwf_tamper_note)
    AND NOT EXISTS (SELECT 1 FROM _pwf_events e WHERE e.head = _pwf_batches.seq);
END""",  # noqa: S608 - the test's own fragments
    f"""CREATE TEMP TRIGGER IF NOT EXISTS pwf_tamper_delete INSTEAD OF DELETE ON main.events
BEGIN{_pin("OLD.seq + 1")}
  DELETE FROM pwf_tamper_note;
  INSERT INTO pwf_tamper_note (old_head) SELECT head FROM _pwf_events WHERE seq = OLD.seq;
  DELETE FROM _pwf_whole WHERE seq = OLD.seq;
  DELETE FROM _pwf_events WHERE seq = OLD.seq;
  DELETE FROM _pwf_batches WHERE seq = (SELECT old_head FROM pwf_tamper_note)
    AND NOT EXISTS (SELECT 1 FROM _pwf_events e WHERE e.head = _pwf_batches.seq);
END""",  # noqa: S608 - the test's own fragments
    f"""CREATE TEMP TRIGGER IF NOT EXISTS pwf_tamper_insert INSTEAD OF INSERT ON main.events
BEGIN{_refuse()}{_pin("NEW.seq + 1")}{_own_batch("NEW.seq")}
  INSERT INTO _pwf_events (seq, head, type, run_id, session_id, content_hash, link, data)
    VALUES (NEW.seq, NEW.seq, NEW.type, NEW.run_id, NEW.session_id,
            {_UNHEX}(NEW.content_hash), {_LINK}, NULL);{_WHOLE}
END""",  # noqa: S608 - the test's own fragments
)
"""The triggers, in SQLite (whose trigger bodies name tables unqualified: ``main``'s)."""


def editable(connection: sqlite3.Connection) -> sqlite3.Connection:
    """``connection`` with ``events`` editable as v1's table; returns it.

    Only this connection sees the triggers; calling it again changes nothing
    (SQLite refuses to register a function again while a statement is active).
    A file whose ``events`` is no view (a v1 log's table, or none) is left
    as it is.
    """
    found = connection.execute(
        "SELECT 1 FROM sqlite_temp_master WHERE type = 'trigger' AND name = 'pwf_tamper_insert'"
        " UNION ALL SELECT 2 FROM main.sqlite_master WHERE type = 'view' AND name = 'events'"
    ).fetchall()
    if found != [(2,)]:
        return connection
    connection.create_function(_UNHEX, 1, _unhex, deterministic=True)
    for statement in _TRIGGERS:
        connection.execute(statement)
    return connection


_PG_FUNCTION: Final = r"""CREATE FUNCTION pg_temp.pwf_tamper_events() RETURNS trigger
LANGUAGE plpgsql AS $tamper$
DECLARE
  old_head BIGINT;
  follower BIGINT;
  mark CONSTANT BYTEA := convert_to('"contentHash":"', 'UTF8');
BEGIN
  IF TG_OP <> 'DELETE' THEN
    IF NEW.seq IS NULL THEN
      RAISE EXCEPTION 'tamper: an event needs its seq';
    END IF;
    IF NEW.content_hash IS NULL OR NEW.content_hash !~ '^[0-9a-f]{64}$' THEN
      RAISE EXCEPTION 'tamper: a content_hash of pwf.store.v2 is 64 lower-case hex digits';
    END IF;
  END IF;
  IF TG_OP <> 'INSERT' THEN
    -- the next event keeps the prevHash it shows
    UPDATE _pwf_events SET link = (SELECT p.content_hash FROM _pwf_events p WHERE p.seq = OLD.seq)
      WHERE seq = OLD.seq + 1 AND link IS NULL;
    SELECT head INTO old_head FROM _pwf_events WHERE seq = OLD.seq;
  END IF;
  IF TG_OP = 'DELETE' THEN
    DELETE FROM _pwf_whole WHERE seq = OLD.seq;
    DELETE FROM _pwf_events WHERE seq = OLD.seq;
    DELETE FROM _pwf_batches b WHERE b.seq = old_head
      AND NOT EXISTS (SELECT 1 FROM _pwf_events e WHERE e.head = old_head);
    RETURN OLD;
  END IF;
  IF TG_OP = 'INSERT' OR NEW.seq <> OLD.seq THEN
    -- after a gap the next event shows no prevHash: it is kept whole
    INSERT INTO _pwf_whole (seq, prev_hash, body)
      SELECT e.seq, NULL, v.body FROM _pwf_events e JOIN events v ON v.seq = e.seq
      WHERE e.seq = NEW.seq + 1 AND e.link IS NULL AND v.body IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM _pwf_whole w WHERE w.seq = e.seq)
        AND NOT EXISTS (SELECT 1 FROM _pwf_events p WHERE p.seq = e.seq - 1);
    UPDATE _pwf_events SET data = NULL
      WHERE seq = NEW.seq + 1 AND EXISTS (SELECT 1 FROM _pwf_whole w WHERE w.seq = NEW.seq + 1);
  END IF;
  IF TG_OP = 'UPDATE' THEN
    SELECT min(f.seq) INTO follower FROM _pwf_events f WHERE f.head = old_head AND f.seq > OLD.seq;
    IF follower IS NOT NULL THEN
      INSERT INTO _pwf_batches (seq, batch, at, request_id, client_id, idempotency_key, head)
        SELECT follower, b.batch, b.at, b.request_id, b.client_id, b.idempotency_key, b.head
        FROM _pwf_batches b WHERE b.seq = old_head;
      UPDATE _pwf_events SET head = follower WHERE head = old_head AND seq > OLD.seq;
    END IF;
  END IF;
  IF EXISTS (SELECT 1 FROM _pwf_events WHERE head = NEW.seq
             AND seq <> CASE WHEN TG_OP = 'UPDATE' THEN OLD.seq ELSE NEW.seq END) THEN
    RAISE EXCEPTION 'tamper: another event keeps the batch row at this seq';
  END IF;
  INSERT INTO _pwf_batches (seq, batch, at, request_id, client_id, idempotency_key, head)
    VALUES (NEW.seq, NEW.batch, NEW.at, NEW.request_id, NEW.client_id, NEW.idempotency_key,
            CASE WHEN position(mark IN coalesce(NEW.body, '')) > 0
                 THEN substring(NEW.body FROM 1 FOR position(mark IN NEW.body) - 1)
                 ELSE '' END)
    ON CONFLICT (seq) DO UPDATE SET batch = EXCLUDED.batch, at = EXCLUDED.at,
      request_id = EXCLUDED.request_id, client_id = EXCLUDED.client_id,
      idempotency_key = EXCLUDED.idempotency_key, head = EXCLUDED.head;
  IF TG_OP = 'UPDATE' THEN
    DELETE FROM _pwf_whole WHERE seq = OLD.seq;
    UPDATE _pwf_events SET seq = NEW.seq, head = NEW.seq, type = NEW.type, run_id = NEW.run_id,
        session_id = NEW.session_id, content_hash = decode(NEW.content_hash, 'hex'),
        link = CASE WHEN NEW.body IS NULL THEN decode(NEW.prev_hash, 'hex') END, data = NULL
      WHERE seq = OLD.seq;
    DELETE FROM _pwf_batches b WHERE b.seq = old_head
      AND NOT EXISTS (SELECT 1 FROM _pwf_events e WHERE e.head = old_head);
  ELSE
    INSERT INTO _pwf_events (seq, head, type, run_id, session_id, content_hash, link, data)
      VALUES (NEW.seq, NEW.seq, NEW.type, NEW.run_id, NEW.session_id,
              decode(NEW.content_hash, 'hex'),
              CASE WHEN NEW.body IS NULL THEN decode(NEW.prev_hash, 'hex') END, NULL);
  END IF;
  IF NEW.body IS NOT NULL THEN
    INSERT INTO _pwf_whole (seq, prev_hash, body) VALUES (NEW.seq, NEW.prev_hash, NEW.body);
  END IF;
  RETURN NEW;
END
$tamper$"""
"""The triggers' work in PL/pgSQL, a function of the session only (``pg_temp``)."""
_PG_TRIGGER: Final = (
    "CREATE TRIGGER pwf_tamper INSTEAD OF INSERT OR UPDATE OR DELETE ON events"
    " FOR EACH ROW EXECUTE FUNCTION pg_temp.pwf_tamper_events()"
)


@contextlib.contextmanager
def pg_editable(connection: Any) -> Iterator[Any]:
    """A transaction on a psycopg ``connection`` in which ``events`` is editable as v1's table.

    The trigger is dropped before the transaction commits, so no other
    connection ever sees it; an error rolls the whole change back.
    """
    with connection.transaction():
        connection.execute(_PG_FUNCTION)
        connection.execute(_PG_TRIGGER)
        yield connection
        connection.execute("DROP TRIGGER pwf_tamper ON events")
        connection.execute("DROP FUNCTION pg_temp.pwf_tamper_events()")
