"""The served command path's savings change nothing a transaction can see (ADR 0061).

A savepoint opened before anything was written inside the enclosing one
runs no statement of its own and still undoes exactly its block; a blob
already upserted in the transaction is not upserted again, until a rollback
may have taken it away; one look-up finds a request by id and by key, the id
first.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf import canonical
from pwf.events import Actor, CommandRecorded
from pwf.host import Host
from pwf.protocol.client import parse_request
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pwf.store.sqlite_transaction import SqliteTransaction

ACTOR = Actor(type="host", id="h")
AT = 1_764_403_200_000


def _recorded(n: int, receipt: object = None, error: str | None = None) -> CommandRecorded:
    return CommandRecorded(
        request_id=f"req-{n}",
        client_id="client-a",
        operation="run.status",
        idempotency_key=f"idem-{n}",
        fingerprint=hashlib.sha256(f"request {n}".encode()).hexdigest(),
        outcome="accepted",
        receipt=canonical.raw(receipt if receipt is not None else {"n": n}),
        error=error,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    read_model = ReadModel()
    with SqliteStore(tmp_path / "state.db", create=True, hooks=[read_model]) as opened:
        opened.install(read_model.install)
        yield opened


class _BlockFailedError(Exception):
    pass


def _failing(tx: SqliteTransaction, *events: CommandRecorded) -> None:
    """Append ``events`` inside a savepoint, then fail: the block's writes roll back."""
    with tx.savepoint():
        for event in events:
            tx.append([event], at=AT, actor=ACTOR)
        raise _BlockFailedError


def _statements(connection: sqlite3.Connection, into: list[str]) -> None:
    connection.set_trace_callback(into.append)


def _blob_count(store: SqliteStore) -> int:
    return int(store.reader().table("SELECT count(*) FROM blobs")[1][0][0])


def _receipts(store: SqliteStore) -> list[str]:
    return [row[0] for row in store.reader().table("SELECT request_id FROM host_commands")[1]]


def test_a_savepoint_with_nothing_written_before_it_runs_no_statement(
    store: SqliteStore,
) -> None:
    seen: list[str] = []
    with store.transaction() as tx:
        _statements(tx.connection, seen)
        with tx.savepoint():
            with tx.savepoint():  # nothing written since the enclosing one: no statement
                tx.append([_recorded(1)], at=AT, actor=ACTOR)
            with tx.savepoint():  # something was: a savepoint of its own
                tx.append([_recorded(2)], at=AT, actor=ACTOR)
        tx.connection.set_trace_callback(None)
    assert [text for text in seen if text.startswith(("SAVEPOINT", "RELEASE"))] == [
        "SAVEPOINT pwf_0",
        "SAVEPOINT pwf_1",
        "RELEASE pwf_1",
        "RELEASE pwf_0",
    ]
    assert ["req-1", "req-2"] == sorted(_receipts(store))


def test_a_failing_block_of_a_statementless_savepoint_leaves_nothing(store: SqliteStore) -> None:
    with store.transaction() as tx, tx.savepoint():
        with pytest.raises(_BlockFailedError):
            _failing(tx, _recorded(1))
        assert 0 == tx.head.seq  # the head is back where the block found it
        with pytest.raises(_BlockFailedError):  # rolled back to, still statementless
            _failing(tx, _recorded(2))
        tx.append([_recorded(3)], at=AT, actor=ACTOR)
    assert ["req-3"] == _receipts(store)
    assert [1] == [event.seq for event in store.read()]
    assert store.verify().ok


def test_a_failing_block_after_writes_keeps_what_came_before_it(store: SqliteStore) -> None:
    with store.transaction() as tx, tx.savepoint():
        tx.append([_recorded(1)], at=AT, actor=ACTOR)
        with pytest.raises(_BlockFailedError):
            _failing(tx, _recorded(2))
        tx.append([_recorded(3)], at=AT, actor=ACTOR)
    assert ["req-1", "req-3"] == sorted(_receipts(store))
    assert store.verify().ok


def test_a_blob_is_upserted_once_per_transaction(store: SqliteStore) -> None:
    seen: list[str] = []
    shared = {"same": "receipt"}
    with store.transaction() as tx:
        _statements(tx.connection, seen)
        for n in range(3):
            tx.append([_recorded(n, shared)], at=AT, actor=ACTOR)
        tx.connection.set_trace_callback(None)
    assert 1 == sum(text.startswith("INSERT INTO blobs") for text in seen)
    assert 1 == _blob_count(store)
    seen.clear()
    with store.transaction() as tx:  # a new transaction knows nothing: stored again (a no-op)
        _statements(tx.connection, seen)
        tx.append([_recorded(9, shared)], at=AT, actor=ACTOR)
        tx.connection.set_trace_callback(None)
    assert 1 == sum(text.startswith("INSERT INTO blobs") for text in seen)


def test_a_blob_rolled_back_with_its_savepoint_is_stored_again(store: SqliteStore) -> None:
    shared = {"rolled": "back"}
    with store.transaction() as tx, tx.savepoint():
        with pytest.raises(_BlockFailedError):
            _failing(tx, _recorded(1, shared))
        tx.append([_recorded(2, shared)], at=AT, actor=ACTOR)
    assert 1 == _blob_count(store)
    with store.transaction() as tx:
        with pytest.raises(_BlockFailedError):
            _failing(tx, _recorded(3, {"other": 1}), _recorded(4, {"other": 1}))
        tx.append([_recorded(5, {"other": 1})], at=AT, actor=ACTOR)
    assert 2 == _blob_count(store)
    assert store.verify().ok


def test_a_stored_blob_of_another_media_type_still_conflicts(store: SqliteStore) -> None:
    """A JSON string's bytes and a text with the same UTF-8 are one hash: refused."""
    with store.transaction() as tx:
        tx.append([_recorded(1, "same bytes")], at=AT, actor=ACTOR)
        with pytest.raises(sqlite3.IntegrityError, match=r"blobs\.media_type"), tx.savepoint():
            tx.append([_recorded(2, {"n": 2}, error='"same bytes"')], at=AT, actor=ACTOR)
    assert ["req-1"] == _receipts(store)


def _request(request_id: str, key: str, run: str) -> bytes:
    return canonical.encode(
        {
            "clientId": "client-a",
            "idempotencyKey": key,
            "operation": "run.status",
            "payload": {},
            "requestId": request_id,
            "runId": run,
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


def test_the_request_id_decides_before_the_key(store: SqliteStore) -> None:
    """DOMAIN §7.2: by request id first, then by client and key, in one look-up."""
    host = Host(store)

    def ask(line: bytes) -> tuple[str, str | None]:
        response = host.request(parse_request(line), AT)
        return response.outcome, response.error

    assert "notFound" == ask(_request("r-1", "k-1", "run-1"))[0]
    assert "notFound" == ask(_request("r-2", "k-2", "run-2"))[0]
    # r-1's row exists with another fingerprint (its key differs): the id decides.
    assert ("conflict", "Request ID was reused with another payload") == ask(
        _request("r-1", "k-2", "run-2")
    )
    # A new id with k-2 and another payload: the key's row decides.
    assert ("conflict", "Idempotency key was reused with another payload") == ask(
        _request("r-3", "k-2", "run-3")
    )
    # A new id with k-1 and k-1's payload: answered from the key's row.
    assert "notFound" == ask(_request("r-4", "k-1", "run-1"))[0]
    # r-2 again, the same payload: answered from the id's row, though k-1 has a row too.
    assert "notFound" == ask(_request("r-2", "k-2", "run-2"))[0]
    assert ["r-1", "r-2"] == sorted(_receipts(store))  # nothing recorded twice
