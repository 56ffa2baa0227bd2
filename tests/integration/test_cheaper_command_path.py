"""The served command path's savings change nothing a transaction can see (ADR 0061).

A savepoint opened before anything was written inside the enclosing one
runs no statement of its own and still undoes exactly its block; a blob
already upserted in the transaction is not upserted again, until a rollback
may have taken it away; one look-up finds a request by id and by key, the id
first; a served group runs its requests without savepoints and, when one
fails after writing, runs again with them, so it still rolls back alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import threading
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Final

import pytest

from pwf import canonical
from pwf._sqlite import execute_many
from pwf.cli._options import open_store
from pwf.commands.payload import members as members_of
from pwf.errors import BlobConflictError
from pwf.events import Actor, CommandRecorded
from pwf.host import Host
from pwf.host.served import Identity, ServedHost
from pwf.projections.blobs import BLOB_CONFLICT
from pwf.protocol.client import ClientRequest, parse_request, payload_member
from pwf.readmodel import ReadModel
from pwf.server._writer import Writer
from pwf.store import log_writes
from pwf.store.sqlite import SqliteStore
from pwf.store.unit import OnceOnly, Repeatable

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator
    from pathlib import Path

    from tests._tally import tally

    from pwf.store.sqlite_transaction import SqliteTransaction
else:
    from _tally import tally

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
        with pytest.raises(BlobConflictError, match=BLOB_CONFLICT), tx.savepoint():
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


def _appending(n: int, *, fail: bool = False, wrote: bool = True) -> Any:
    """Work that appends one event to the group's transaction (unless ``wrote`` is false)."""

    def work(host: Any) -> str:
        if wrote:
            host.shared.append([_recorded(n)], at=AT, actor=ACTOR)
        if fail:
            raise _BlockFailedError(f"job {n}")
        return f"job {n}"

    return work


def _group_of(
    db: Path, jobs: list[tuple[Any, bool]]
) -> tuple[list[tuple[object, BaseException | None]], int, int]:
    """Queue ``jobs`` (work, whether through ``call``) behind a blocking one, as one group.

    Returns each job's (value, error), the groups committed and the groups redone.
    """
    read_model = ReadModel()
    with SqliteStore(db, create=True, hooks=[read_model]) as made:
        made.install(read_model.install)
    host = SimpleNamespace(shared=None)

    def opened() -> tuple[SqliteStore, Any]:
        return SqliteStore(db, hooks=[ReadModel()]), host

    async def scenario() -> tuple[list[tuple[object, BaseException | None]], int, int]:
        writer = Writer(opened)
        counts = tally(writer)
        entered, go = threading.Event(), threading.Event()

        def blocking(_host: object) -> str:
            entered.set()
            go.wait(30)
            return "first"

        loop = asyncio.get_running_loop()
        answers: list[asyncio.Future[tuple[object, BaseException | None]]] = []

        def queue(work: Any, *, through_call: bool) -> None:
            answer: asyncio.Future[tuple[object, BaseException | None]] = loop.create_future()
            answers.append(answer)
            if through_call:
                writer.call(work, lambda value, error: answer.set_result((value, error)))
                return
            future = writer.submit(work)
            future.add_done_callback(
                lambda done: answer.set_result(
                    (None, done.exception()) if done.exception() else (done.result(), None)
                )
            )

        try:
            queue(blocking, through_call=True)
            await asyncio.to_thread(entered.wait, 30)
            for work, through_call in jobs:
                queue(work, through_call=through_call)
            go.set()
            return [await answer for answer in answers][1:], counts["group"], counts["redone"]
        finally:
            await asyncio.to_thread(writer.close)

    return asyncio.run(scenario())


def _recorded_ids(db: Path) -> list[str]:
    with SqliteStore(db, read_only=True) as store:
        return [row[0] for row in store.reader().table("SELECT request_id FROM host_commands")[1]]


def test_a_group_of_requests_that_succeed_commits_once_without_redoing(tmp_path: Path) -> None:
    results, groups, redone = _group_of(
        tmp_path / "state.db", [(_appending(n), True) for n in range(3)]
    )
    assert [value for value, _ in results] == ["job 0", "job 1", "job 2"]
    assert (groups, redone) == (1, 0)
    assert ["req-0", "req-1", "req-2"] == _recorded_ids(tmp_path / "state.db")


def test_a_request_that_fails_after_writing_runs_the_group_again_in_savepoints(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    results, groups, redone = _group_of(
        db, [(_appending(0), True), (_appending(1, fail=True), True), (_appending(2), True)]
    )
    assert [value for value, _ in results] == ["job 0", None, "job 2"]
    assert isinstance(results[1][1], _BlockFailedError)
    assert (groups, redone) == (1, 1)
    assert ["req-0", "req-2"] == _recorded_ids(db)  # the failing one rolled back alone
    with SqliteStore(db, read_only=True) as store:
        assert store.verify().ok
        assert [1, 2] == [event.seq for event in store.read()]


def test_a_request_that_fails_before_writing_needs_no_second_run(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    results, groups, redone = _group_of(
        db,
        [
            (_appending(0), True),
            (_appending(1, fail=True, wrote=False), True),
            (_appending(2), True),
        ],
    )
    assert isinstance(results[1][1], _BlockFailedError)
    assert (groups, redone) == (1, 0)
    assert ["req-0", "req-2"] == _recorded_ids(db)


def test_work_that_may_not_run_twice_runs_in_savepoints(tmp_path: Path) -> None:
    """Submitted work (timers, the supervisor) and all after it in the group: savepoints."""
    db = tmp_path / "state.db"
    results, groups, redone = _group_of(
        db,
        [
            (_appending(0), True),
            (_appending(1), False),
            (_appending(2, fail=True), True),
            (_appending(3), True),
        ],
    )
    assert [value for value, _ in results] == ["job 0", "job 1", None, "job 3"]
    assert (groups, redone) == (1, 0)
    assert ["req-0", "req-1", "req-3"] == _recorded_ids(db)


def test_direct_mode_keeps_its_savepoint_journals_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pwf request`` and ``pwf worker`` open their store deciding: temp_store = MEMORY (2)."""
    monkeypatch.delenv("PWF_STORE", raising=False)
    db = tmp_path / "state.db"
    open_store(str(db), create=True).close()
    with open_store(str(db), deciding=True) as deciding, open_store(str(db)) as other:
        assert 2 == deciding.reader().table("PRAGMA temp_store")[1][0][0]
        assert 0 == other.reader().table("PRAGMA temp_store")[1][0][0]


def _start_line(number: int) -> bytes:
    return canonical.encode(
        {
            "clientId": "client-a",
            "idempotencyKey": f"k-{number}",
            "operation": "run.start",
            "payload": {
                "definitionDigest": "d1",
                "definitionSnapshot": {},
                "input": {"n": number},
                "originSessionId": f"s-{number}",
                "projectPath": "/p",
                "workflowName": "echo",
                "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
                "workflowSourceRef": "builtin:echo",
            },
            "requestId": f"r-{number}",
            "runId": f"run-{number}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


DIRECT_RUN_START: Final = (
    "BEGIN IMMEDIATE",
    "SELECT seq, content_hash, batch FROM _pwf_head",  # the chain's head
    "SELECT h.request_id",  # a retry or a conflict, by id and by key
    "SELECT run_id,",  # the run, if it exists
    "SELECT 1 FROM run_queue",  # the origin session's active run
    "INSERT INTO main._pwf_batches",  # the batch's actor, time and cause, once (ADR 0102)
    "INSERT INTO main._pwf_events",  # run.reserved
    "INSERT INTO blobs",  # its input
    "INSERT INTO blobs",  # its definition snapshot
    "INSERT INTO runs",
    "INSERT INTO run_queue",
    "INSERT INTO run_bindings",
    "INSERT INTO run_sources",
    "INSERT INTO main._pwf_events",  # command.recorded
    "INSERT INTO blobs",  # its receipt
    "INSERT INTO host_commands",
    "INSERT INTO _pwf_head",
    "UPDATE _pwf_checkpoint",
    "COMMIT",
)
"""The statements of a direct ``run.start`` of a new run, in order (ADR 0101, 0102): 19.

The decider runs bare (no savepoint) and answers without reading back its rows."""


def test_a_direct_run_start_runs_nineteen_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regression (a read-back, a select before an upsert, a projection not touched) fails."""
    monkeypatch.delenv("PWF_STORE", raising=False)
    db = tmp_path / "state.db"
    open_store(str(db), create=True).close()
    seen: list[str] = []
    with open_store(str(db), deciding=True) as store:
        host = Host(store)
        assert "accepted" == host.request(parse_request(_start_line(1)), AT).outcome
        connection: sqlite3.Connection = store.connection  # type: ignore[attr-defined]
        _statements(connection, seen)
        answer = host.request(parse_request(_start_line(2)), AT + 1)
        connection.set_trace_callback(None)
    assert ("accepted", 1) == (answer.outcome, answer.revision)
    # A trigger's statements are traced as the statement that fired them: counted once.
    top = [text for n, text in enumerate(seen) if n == 0 or text != seen[n - 1]]
    assert len(top) == len(DIRECT_RUN_START)
    for text, head in zip(top, DIRECT_RUN_START, strict=True):
        assert " ".join(text.split()).startswith(head), (text[:120], head)


def _failing_inside(calls: list[int]) -> Any:
    """Work that fails after writing inside a savepoint, goes on and appends again."""

    def work(tx: SqliteTransaction) -> str:
        calls.append(1)
        with contextlib.suppress(_BlockFailedError):
            _failing(tx, _recorded(1))
        tx.append([_recorded(2)], at=AT, actor=ACTOR)
        return "done"

    return work


@pytest.mark.parametrize(("mark", "runs"), [(Repeatable, 2), (OnceOnly, 1)])
def test_a_direct_decision_that_failed_after_writing_keeps_only_what_it_kept(
    store: SqliteStore, mark: type[Repeatable[str] | OnceOnly[str]], runs: int
) -> None:
    """Bare first, a repeatable one runs again with savepoints; once-only work runs once."""
    calls: list[int] = []
    assert "done" == store.run(mark(_failing_inside(calls)))
    assert runs == len(calls)
    assert ["req-2"] == _receipts(store)
    assert [1] == [event.seq for event in store.read()]
    assert store.verify().ok


def test_a_direct_decision_that_raises_after_writing_leaves_nothing(store: SqliteStore) -> None:
    def work(tx: Any) -> str:
        tx.append([_recorded(1)], at=AT, actor=ACTOR)
        raise _BlockFailedError

    with pytest.raises(_BlockFailedError):
        store.run(Repeatable(work))
    assert [] == _receipts(store)
    assert [] == list(store.read())


def _served_start(host: Host[Any], number: int, tx: Any) -> str:
    """One ``run.start`` decided in a group's transaction, as the served writer does."""
    host.shared = tx
    try:
        return host.decide(parse_request(_start_line(number)), AT + number)[0].outcome
    finally:
        host.shared = None


def test_a_served_group_runs_thirteen_statements_per_run_start_and_six_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request: its look-up, two reads, its batch row, two events, three blobs less the shared
    one, four projection rows and its record; the group: BEGIN, the head, the shared blob, the
    head's row, the checkpoints and COMMIT (ADR 0101, 0102)."""
    monkeypatch.delenv("PWF_STORE", raising=False)
    db = tmp_path / "state.db"
    open_store(str(db), create=True).close()
    counts: list[int] = []
    with open_store(str(db), deciding=True) as store:
        host = Host(store)
        assert "accepted" == host.request(parse_request(_start_line(0)), AT).outcome
        connection: sqlite3.Connection = store.connection  # type: ignore[attr-defined]
        for first, size in ((1, 1), (2, 4)):
            seen: list[str] = []
            _statements(connection, seen)
            outcomes = store.run_group(
                iter(
                    [
                        Repeatable(functools.partial(_served_start, host, number))
                        for number in range(first, first + size)
                    ]
                )
            )
            connection.set_trace_callback(None)
            assert [("accepted", None)] * size == [tuple(outcome) for outcome in outcomes]
            counts.append(sum(n == 0 or text != seen[n - 1] for n, text in enumerate(seen)))
    assert [6 + 13, 6 + 4 * 13] == counts


def _guard_statements(store: Any, now: int) -> list[str]:
    """The statements one direct-mode guard runs at ``now`` (ADR 0105)."""
    seen: list[str] = []
    connection: sqlite3.Connection = store.connection
    _statements(connection, seen)
    try:
        Host(store).refuse_if_served(now)
    finally:
        connection.set_trace_callback(None)
    return seen


def test_the_direct_guard_runs_one_statement_served_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pwf request`` checks before every line: one read of the claim, and none at all where
    ``host_state`` is missing (SQLite refuses to prepare the read; no ``sqlite_master`` look-up)."""
    monkeypatch.delenv("PWF_STORE", raising=False)
    db = tmp_path / "state.db"
    open_store(str(db), create=True).close()
    with open_store(str(db), deciding=True) as store:
        assert [] == _guard_statements(store, AT)  # never served: no host_state table
        served = ServedHost(store, Identity("h-1", 1, "start-1"))
        served.start("ab" * 32, 30_000, AT)
        assert served.release(AT + 1)
        [read] = _guard_statements(store, AT + 2)  # served once, no live claim
        assert read.startswith("SELECT epoch FROM host_state")


def test_a_one_event_append_inserts_its_rows_without_executemany(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision stages its events one by one: each run of rows is one row a table (ADR 0105).

    ``executemany`` over a generator costs more than a plain ``execute`` of one row; runs of
    several events (an import, a fold's copy) still take it.
    """
    many: list[str] = []

    def counted(connection: sqlite3.Connection, sql: str, rows: Any) -> None:
        many.append(sql.split("(", maxsplit=1)[0])
        execute_many(connection, sql, rows)

    monkeypatch.setattr(log_writes, "execute_many", counted)  # the name the writer calls
    with store.transaction() as tx:
        tx.append([_recorded(1)], at=AT, actor=ACTOR)
        tx.append([_recorded(2)], at=AT, actor=ACTOR)
    assert [] == many
    with store.transaction() as tx:
        tx.append([_recorded(3), _recorded(4)], at=AT, actor=ACTOR)
    assert ["INSERT INTO main._pwf_events "] == many  # one batch row, two event rows
    assert [1, 2, 3, 4] == [event.seq for event in store.read()]
    assert store.verify().ok


_SNAPSHOT: Final = {
    "nodes": [
        {"id": f"n-{n}", "prompt": "Summarise the release. " * 4, "next": n + 1} for n in range(20)
    ],
    "entry": "n-0",
    "10": "an array index key, sorted first",
    "2": [1.5, -0.0, 2**53, 1e21],
    "\u00e9t\u00e9": "\U0001f600",
}
"""A definition snapshot with the shapes canonical JSON writes its own way (ADR 0002)."""


def _large_start(number: int, snapshot: object = _SNAPSHOT) -> ClientRequest:
    payload = dict(members_of(parse_request(_start_line(number)).payload))
    return ClientRequest(
        request_id=f"r-{number}",
        client_id="client-a",
        operation="run.start",
        idempotency_key=f"k-{number}",
        payload={**payload, "definitionSnapshot": snapshot, "launchOptions": {"model": "m"}},
        run_id=f"run-{number}",
    )


def test_a_parsed_request_gives_its_payload_members_as_the_lines_bytes() -> None:
    """The very bytes ``canonical.encode`` writes for each member; None where unknown (ADR 0105)."""
    built = _large_start(1)
    parsed = parse_request(_line_of(built))
    for name in ("definitionSnapshot", "input", "launchOptions", "workflowSource"):
        member = payload_member(parsed, name)
        assert member is not None
        assert canonical.encode(members_of(built.payload)[name]) == bytes(member)
    assert payload_member(parsed, "parentRunId") is None  # absent
    assert payload_member(built, "input") is None  # built in process: no line
    lone = parse_request(_line_of(_large_start(2, {"\ud800": 1})))  # msgspec reads no such text
    assert payload_member(lone, "definitionSnapshot") is None


def _line_of(request: ClientRequest) -> bytes:
    """The canonical line of a request built in process."""
    return canonical.encode(
        {
            "clientId": request.client_id,
            "idempotencyKey": request.idempotency_key,
            "operation": request.operation,
            "payload": request.payload,
            "requestId": request.request_id,
            "runId": request.run_id,
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


def _reserved_body(db: Path, request: ClientRequest) -> bytes:
    with open_store(str(db), create=True) as store:
        assert "accepted" == Host(store).request(request, AT).outcome
        [reserved] = [event for event in store.read() if b'"type":"run.reserved"' in event.body]
        return reserved.body


def test_a_run_start_from_a_line_does_not_encode_its_snapshot_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line's bytes of the snapshot, input and options go into ``run.reserved`` as they are.

    The stored event is byte for byte the one a request built in process stores.
    """
    monkeypatch.delenv("PWF_STORE", raising=False)
    built = _large_start(1)
    parsed = parse_request(_line_of(built))
    encoded: list[int] = []
    real = canonical.encode

    def counted(value: object) -> bytes:
        encoded.append(id(value))
        return real(value)

    monkeypatch.setattr(canonical, "encode", counted)
    from_line = _reserved_body(tmp_path / "line.db", parsed)
    parsed_payload = members_of(parsed.payload)
    for name in ("definitionSnapshot", "input", "launchOptions"):
        assert id(parsed_payload[name]) not in encoded, name
    encoded.clear()
    assert from_line == _reserved_body(tmp_path / "built.db", built)
    assert id(members_of(built.payload)["definitionSnapshot"]) in encoded  # no line: encoded
    lone = _large_start(2, {"\ud800": [1]})  # its line's members are encoded again: same bytes
    assert _reserved_body(tmp_path / "lone-line.db", parse_request(_line_of(lone))) == (
        _reserved_body(tmp_path / "lone-built.db", lone)
    )
