"""What the reliability tests share: running pwf, reading a log's state, checking it is sound.

Commands and writers run as processes forked from one parent that imported
pwf already (``_forked.py``, ADR 0068): each runs ``pwf.cli.main``, as the
``pwf`` console script does, or the writer, in a process of its own that the
tests kill, race and wait for.  When a limit must be set first (a file-size
limit, dropped capabilities), this interpreter runs a small wrapper that sets
it and then calls ``pwf.cli.main``.  The log is
always judged through pwf's own checks: the hash chain (``SqliteStore.verify``)
and live projections against a rebuild (``pwf.verify.check``, what
``pwf verify`` runs).
"""

from __future__ import annotations

import os
import selectors
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final, NamedTuple

from pwf import canonical
from pwf._sqlite import quote
from pwf.cli._options import open_store
from pwf.events import RunClaimed, WorkerMessageRecorded, open_body
from pwf.store.sqlite import SqliteStore
from pwf.verify import check

if TYPE_CHECKING:
    from tests._dbfile import rows
    from tests.reliability._forked import Forked, spawn
else:
    from _forked import Forked, spawn

    from _dbfile import rows

__all__ = [
    "AT",
    "START",
    "WRITER",
    "Ack",
    "LogState",
    "assert_sound",
    "confined",
    "contents",
    "init",
    "log_state",
    "missing",
    "one_line",
    "parse_acks",
    "pwf",
    "request_line",
    "spawn_writer",
    "stop",
    "wait_line",
]

AT: Final = 1_785_700_000_000
"""The clock of scripted requests (ms since the epoch): time is an input."""

WRITER: Final = Path(__file__).with_name("_writer.py")
TIMEOUT: Final = 300
"""Seconds any one subprocess may take: generous, a loaded CI machine is slow, not stuck."""

START: Final = {
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSourceRef": "builtin:echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "definitionDigest": "d1",
    "definitionSnapshot": {},
    "input": {},
}
"""A ``run.start`` payload without its ``originSessionId`` (one active run per session)."""

CONFINED: Final = Path(__file__).with_name("_confined.py")


def _env() -> dict[str, str]:
    """The environment for subprocesses, without a $PWF_DB from outside."""
    return {key: value for key, value in os.environ.items() if key != "PWF_DB"}


def pwf(
    *args: str, stdin: bytes = b"", busy_timeout_ms: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run the real ``pwf`` command line in a forked process, capture everything.

    ``busy_timeout_ms`` sets its busy timeout.
    """
    environment = _env()
    if busy_timeout_ms is not None:
        environment["PWF_BUSY_TIMEOUT_MS"] = str(busy_timeout_ms)
    process = spawn("pwf", *args, env=environment, stdin=subprocess.PIPE)
    try:
        out, err = process.communicate(stdin, timeout=TIMEOUT)
    finally:
        stop(process)
    return subprocess.CompletedProcess(["pwf", *args], process.wait(), out, err)


def confined(
    *args: str, stdin: bytes, file_limit: int = -1, drop_capabilities: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """Run ``pwf ARGS`` under a file-size limit and/or without root's file-permission bypass."""
    drop = "1" if drop_capabilities else "0"
    return subprocess.run(
        [sys.executable, str(CONFINED), str(file_limit), drop, *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
        env=_env(),
    )


def init(db: Path) -> None:
    """Create a state database as ``pwf init`` does."""
    open_store(str(db), create=True).close()


def request_line(  # noqa: PLR0913 - one keyword per request member a test pins
    operation: str,
    payload: object,
    *,
    rid: str,
    key: str | None = None,
    client: str = "cli-R",
    run_id: str | None = None,
) -> bytes:
    """One canonical client request line, without its newline."""
    members: dict[str, object] = {
        "schema": "pi-workflows.client.v1",
        "type": "request",
        "requestId": rid,
        "clientId": client,
        "operation": operation,
        "idempotencyKey": key or rid,
        "payload": payload,
    }
    if run_id is not None:
        members["runId"] = run_id
    return canonical.encode(members)


class LogState(NamedTuple):
    """What must not move when nothing was appended: length and head (seq, batch, hash)."""

    events: int
    seq: int
    batch: int
    content_hash: str | None


def log_state(db: Path) -> LogState:
    """The log's length and head, read through a read-only store."""
    with SqliteStore(db, read_only=True) as store:
        head = store.head()
        [(count,)] = rows(db, "SELECT count(*) FROM events")
    return LogState(count, head.seq, head.batch, head.content_hash)


def assert_sound(db: Path) -> int:
    """The chain verifies and the live projections equal a rebuild; returns the log's length.

    ``check`` (``pwf verify``) walks the whole chain, deep, before it folds
    the log, and reports that walk, so the chain is walked once (ADR 0058).
    """
    with open_store(str(db), read_only=True) as store:
        found = check(store)
        assert found.chain.ok, found.chain
        assert found.ok, (found.chain, found.difference)
        [(count,)] = rows(db, "SELECT count(*) FROM events")
    assert count == found.chain.events, "the log has gaps"
    return int(count)


def contents(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Everything in the file that pwf reads, as plain values, to compare two files by.

    The header's ``application_id`` and ``user_version``, the schema, and
    every table's rows in a stable order (all columns): the log, its head,
    the checkpoints and every projection.  A file whose contents equal those
    of a file :func:`assert_sound` passed would pass it too, since what it
    checks is computed from these alone; comparing costs a tenth of
    checking (ADR 0064).
    """
    connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        found = {
            "header": connection.execute(
                "SELECT * FROM pragma_application_id, pragma_user_version"
            ).fetchall(),
            "schema": connection.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
            ).fetchall(),
        }
        for kind, name, _table, _sql in found["schema"]:
            if kind != "table" or str(name).startswith("sqlite_"):
                continue
            table = quote(str(name))
            columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
            order = ", ".join(quote(column) for column in columns)
            found[f"table {name}"] = connection.execute(
                f"SELECT * FROM {table} ORDER BY {order}"  # noqa: S608 - names from sqlite_master
            ).fetchall()
    finally:
        connection.close()
    return found


def one_line(text: bytes) -> str:
    """The single line an error must be; fails on tracebacks and multi-line output."""
    decoded = text.decode("utf-8", errors="replace")
    lines = decoded.splitlines()
    assert len(lines) == 1, decoded
    assert "Traceback" not in decoded
    return lines[0]


class Ack(NamedTuple):
    """One answer a writer was given after its transaction committed."""

    kind: str
    ident: str
    scope: str
    key: str
    outcome: str


def parse_acks(out: bytes) -> list[Ack]:
    """The complete ack lines of a writer's stdout (a line cut by a kill acknowledged nothing)."""
    acks: list[Ack] = []
    for line in out.split(b"\n")[:-1]:
        words = line.decode().split()
        if words == ["ready"]:
            continue
        if words[0] == "request":
            acks.append(Ack(*words))
        else:
            acks.append(Ack(words[0], words[1], words[2], "", words[3]))
    return acks


def _found(store: SqliteStore, ack: Ack) -> bool:
    """Whether the log holds what ``ack`` acknowledged, looked up by indexed columns."""
    if ack.kind == "request" and ack.outcome == "adopted":
        return any(store.find(client_id=ack.scope, idempotency_key=ack.key))
    if ack.kind == "request":
        return any(store.find(request_id=ack.ident))
    wanted = "worker.message_recorded" if ack.kind == "worker" else "run.claimed"
    for stored in store.find(type=wanted, run_id=ack.scope):
        event = open_body(stored.body).event
        if isinstance(event, WorkerMessageRecorded) and event.message_id == ack.ident:
            return True
        if isinstance(event, RunClaimed) and event.worker_epoch == ack.ident:
            return True
    return False


def missing(db: Path, acks: list[Ack]) -> list[Ack]:
    """The acknowledged answers the log does not hold: events lost."""
    with SqliteStore(db, read_only=True) as store:
        return [ack for ack in acks if not _found(store, ack)]


def spawn_writer(  # noqa: PLR0913 - one keyword per writer argument
    db: Path,
    prefix: str,
    *,
    steps: int,
    gate: str,
    clock: int,
    errors: Path,
    busy_timeout_ms: int | None = None,
) -> Forked:
    """Start ``_writer.py`` in a forked process (``gate``: ``0``, ``1`` or ``step``, see there);
    its stdout is read unbuffered, so nothing it printed is lost to a buffer.
    ``busy_timeout_ms`` sets its busy timeout."""
    environment = _env()
    if busy_timeout_ms is not None:
        environment["PWF_BUSY_TIMEOUT_MS"] = str(busy_timeout_ms)
    with errors.open("wb") as stderr:
        return spawn(
            "writer",
            str(db),
            prefix,
            str(steps),
            gate,
            str(clock),
            env=environment,
            stdin=subprocess.PIPE,
            stderr=stderr,
        )


def wait_line(stream: IO[bytes], timeout: float = TIMEOUT) -> bytes:
    """Read one line from an unbuffered pipe, failing after ``timeout`` seconds of silence."""
    line = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            assert selector.select(timeout), f"no line within {timeout} s (got {line!r})"
            byte = stream.read(1)
            if not byte:
                break
            line += byte
    return line


def stop(process: subprocess.Popen[bytes] | Forked) -> None:
    """Kill a subprocess that is still running and reap it (cleanup after a failure)."""
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=TIMEOUT)
