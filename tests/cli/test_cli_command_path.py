"""The command path from the command line: pwf request, pwf worker, pwf worker launch, pwf query.

Requests and worker messages go in as canonical lines on stdin and come out as
canonical response lines; the log and the projections are checked through the
store.  Direct mode is refused while a live ``pwf serve`` claim exists (ADR 0010).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import Result

from pwf import canonical
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import one_line
else:
    from _cli import one_line

Run = Callable[..., Result]

AT = 1_764_403_200_000
"""A fixed clock reading (ms since the epoch)."""

RUN_START_PAYLOAD = {
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSourceRef": "builtin:echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "definitionDigest": "d1",
    "definitionSnapshot": {},
    "input": {},
    "originSessionId": "s-1",
}


def _request(request_id: str, operation: str = "host.status", **members: Any) -> dict[str, Any]:
    """A client request as a dict; ``members`` add or replace wire members."""
    request = {
        "schema": "pi-workflows.client.v1",
        "type": "request",
        "requestId": request_id,
        "clientId": "client-1",
        "operation": operation,
        "idempotencyKey": f"key-{request_id}",
        "payload": {},
    }
    request.update(members)
    return request


def _line(message: dict[str, Any]) -> bytes:
    """One canonical protocol line, newline included."""
    return canonical.encode(message) + b"\n"


def _status(request_id: str) -> bytes:
    return _line(_request(request_id))


def _run_start() -> bytes:
    return _line(
        _request(
            "req-start",
            "run.start",
            runId="run-1",
            idempotencyKey="start-1",
            payload=RUN_START_PAYLOAD,
        )
    )


def _is_canonical(line: str) -> bool:
    return canonical.encode(json.loads(line)) == line.encode()


def _entries(path: Path) -> list[tuple[int, str, str | None]]:
    """Every event as (at, type, causing request id)."""
    with SqliteStore(path, read_only=True) as store:
        return [
            (entry.at, entry.type, entry.cause.request_id if entry.cause else None)
            for entry in store.entries()
        ]


def _claim(path: Path, *, host_id: str | None, expires_at: int | None, epoch: int = 4) -> None:
    """Write a host claim row the way a running ``pwf serve`` would (DOMAIN §5.1)."""
    connection = sqlite3.connect(path)
    try:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS host_state (id INTEGER PRIMARY KEY CHECK (id = 1),"
            " epoch INTEGER NOT NULL, host_id TEXT, token_hash BLOB, pid INTEGER,"
            " process_start_identity TEXT, started_at INTEGER, heartbeat_at INTEGER,"
            " expires_at INTEGER)"
        )
        claimed = (b"\0" * 32, 1, "linux-proc-start:1", 0, 0) if host_id else (None,) * 5
        connection.execute(
            "INSERT OR REPLACE INTO host_state VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)",
            (epoch, host_id, *claimed, expires_at),
        )
        connection.commit()
    finally:
        connection.close()


@pytest.fixture
def db(run: Run, tmp_path: Path) -> Path:
    """A fresh state database made by ``pwf init``."""
    path = tmp_path / "state.db"
    assert 0 == run("init", "--db", str(path)).exit_code
    return path


@pytest.fixture
def started(run: Run, db: Path) -> Path:
    """A database in which run-1 was started by a ``run.start`` request."""
    result = run("request", "--db", str(db), "--at", str(AT), stdin=_run_start())
    assert 0 == result.exit_code, result.stderr
    assert "accepted" == json.loads(result.stdout)["outcome"]
    return db


class TestRequest:
    """``pwf request`` answers each stdin line with one canonical response line."""

    def test_host_status_is_accepted(self, run: Run, db: Path) -> None:
        """A host.status request gets one canonical accepted response naming its request id."""
        result = run("request", "--db", str(db), "--at", str(AT), stdin=_status("req-1"))
        assert (0, "") == (result.exit_code, result.stderr)
        [line] = result.stdout.splitlines()
        response = json.loads(line)
        assert ("accepted", "req-1", "pi-workflows.client.v1", "response") == (
            response["outcome"],
            response["requestId"],
            response["schema"],
            response["type"],
        )
        assert _is_canonical(line)
        assert [(AT, "command.recorded", "req-1")] == _entries(db)

    def test_the_same_line_again_is_adopted(self, run: Run, db: Path) -> None:
        """Replaying a recorded request returns its stored response as adopted; nothing is added."""
        first = run("request", "--db", str(db), "--at", str(AT), stdin=_status("req-1"))
        events = _entries(db)
        again = run("request", "--db", str(db), "--at", str(AT + 5), stdin=_status("req-1"))
        assert 0 == again.exit_code
        stored, replayed = json.loads(first.stdout), json.loads(again.stdout)
        assert "adopted" == replayed["outcome"]
        assert {**stored, "outcome": "adopted"} == replayed
        assert _is_canonical(again.stdout.rstrip("\n"))
        assert events == _entries(db)

    def test_a_new_key_for_the_same_request_id_is_a_conflict(self, run: Run, db: Path) -> None:
        """A request id reused with another payload is a conflict response, not recorded."""
        run("request", "--db", str(db), "--at", str(AT), stdin=_status("req-1"))
        events = _entries(db)
        other = _line(_request("req-1", idempotencyKey="other"))
        result = run("request", "--db", str(db), "--at", str(AT), stdin=other)
        assert 0 == result.exit_code
        response = json.loads(result.stdout)
        assert ("conflict", "Request ID was reused with another payload") == (
            response["outcome"],
            response["error"],
        )
        assert events == _entries(db)

    def test_malformed_lines_are_reported_and_append_nothing(
        self, run: Run, db: Path, tmp_path: Path
    ) -> None:
        """Each bad line gets one numbered stderr line; the good lines are still answered."""
        spaced = json.dumps(_request("req-spaced")).encode() + b"\n"
        unknown = _line({**_request("req-unknown"), "extra": 1})
        stdin = _status("req-1") + spaced + unknown + _status("req-2")
        result = run("request", "--db", str(db), "--at", str(AT), stdin=stdin)
        assert 2 == result.exit_code
        errors = result.stderr.splitlines()
        assert 2 == len(errors)
        assert errors[0].startswith("line 2: Client protocol message must use canonical JSON")
        assert "line 3: Unknown client protocol field: extra" == errors[1]
        answered = [json.loads(line)["requestId"] for line in result.stdout.splitlines()]
        assert ["req-1", "req-2"] == answered
        clean = tmp_path / "clean.db"
        run("init", "--db", str(clean))
        run(
            "request",
            "--db",
            str(clean),
            "--at",
            str(AT),
            stdin=_status("req-1") + _status("req-2"),
        )
        assert _entries(clean) == _entries(db)
        assert {"req-1", "req-2"} == {request_id for _, _, request_id in _entries(db)}

    def test_at_directives_set_the_time_of_the_lines_after_them(self, run: Run, db: Path) -> None:
        """``#at MS`` sets the clock for the following lines; other ``#`` lines are comments."""
        stdin = (
            b"#at 1000\n"
            + _status("req-1")
            + b"# a comment, skipped\n"
            + _status("req-2")
            + b"#at 2000\n"
            + _status("req-3")
        )
        result = run("request", "--db", str(db), "--at", str(AT), stdin=stdin)
        assert (0, "", 3) == (result.exit_code, result.stderr, len(result.stdout.splitlines()))
        assert [1000, 1000, 2000] == [at for at, _, _ in _entries(db)]

    def test_at_option_sets_the_clock_until_a_directive(self, run: Run, db: Path) -> None:
        """``--at`` is the clock of the lines before the first ``#at``."""
        stdin = _status("req-1") + b"#at 0\n" + _status("req-2")
        result = run("request", "--db", str(db), "--at", "5000", stdin=stdin)
        assert 0 == result.exit_code
        assert [5000, 0] == [at for at, _, _ in _entries(db)]

    def test_without_at_the_wall_clock_is_used(self, run: Run, db: Path) -> None:
        """With no ``--at`` and no directive, an event carries the current time in ms."""
        before = time.time_ns() // 1_000_000
        run("request", "--db", str(db), stdin=_status("req-1"))
        after = time.time_ns() // 1_000_000
        [(at, _, _)] = _entries(db)
        assert before <= at <= after

    @pytest.mark.parametrize("directive", [b"#at", b"#at soon", b"#at 1 2", b"#at -5"])
    def test_a_bad_at_directive_is_a_refused_line(
        self, run: Run, db: Path, directive: bytes
    ) -> None:
        """A ``#at`` line without one whole number of ms is refused; later lines still run."""
        result = run("request", "--db", str(db), stdin=directive + b"\n" + _status("req-1"))
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith("line 1: #at takes one whole number")
        assert 1 == len(result.stdout.splitlines())

    def test_empty_lines_are_skipped_but_counted(self, run: Run, db: Path) -> None:
        """Empty lines are not requests, yet line numbers in errors count them."""
        result = run("request", "--db", str(db), stdin=b"\n\n{}\n")
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith("line 3: ")
        assert "" == result.stdout

    def test_an_overlong_line_is_refused_and_the_next_runs(self, run: Run, db: Path) -> None:
        """A line over 1 MiB is refused whole; the line after it is answered."""
        huge = b"x" * (2 * 1024 * 1024) + b"\n"
        result = run("request", "--db", str(db), "--at", str(AT), stdin=huge + _status("req-1"))
        assert 2 == result.exit_code
        assert "line 1: Client protocol message exceeds 1 MiB" == one_line(result.stderr)
        assert ["req-1"] == [json.loads(line)["requestId"] for line in result.stdout.splitlines()]

    def test_a_missing_database_is_one_line(self, run: Run, tmp_path: Path) -> None:
        """Without ``pwf init`` the command exits 2 with one line."""
        result = run("request", "--db", str(tmp_path / "none.db"), stdin=_status("req-1"))
        assert 2 == result.exit_code
        assert "pwf init" in one_line(result.stderr)


class TestRunStartAndLaunch:
    """A started run is visible in the projections and can be claimed for a worker."""

    def test_query_runs_json_lists_the_started_run(self, run: Run, started: Path) -> None:
        """``pwf query runs --json`` prints one canonical array with every column of run-1."""
        result = run("query", "runs", "--db", str(started), "--json")
        assert 0 == result.exit_code
        line = result.stdout.rstrip("\n")
        assert _is_canonical(line)
        [row] = json.loads(line)
        assert ("run-1", "queued", "queued", "s-1", "/p", AT, 0) == (
            row["run_id"],
            row["status"],
            row["queue_status"],
            row["origin_session_id"],
            row["project_path"],
            row["created_at"],
            row["paused"],
        )
        assert isinstance(row["input_hash"], str)
        assert 64 == len(row["input_hash"])

    def test_query_runs_table(self, run: Run, started: Path) -> None:
        """The text table has a header and one aligned row per run."""
        result = run("query", "runs", "--db", str(started))
        header, row = result.stdout.splitlines()
        assert header.split() == [
            "run_id",
            "status",
            "paused",
            "queue_status",
            "revision",
            "origin_session_id",
            "updated_at",
        ]
        assert ["run-1", "queued", "0", "queued"] == row.split()[:4]
        assert header.index("status") == row.index("queued")

    @pytest.mark.parametrize(
        ("filters", "expected"),
        [
            ((), ["run-1"]),
            (("--run", "run-1"), ["run-1"]),
            (("--run", "run-2"), []),
            (("--session", "s-1"), ["run-1"]),
            (("--session", "s-2"), []),
            (("--status", "queued"), ["run-1"]),
            (("--status", "running"), []),
            (("--limit", "1"), ["run-1"]),
        ],
    )
    def test_query_runs_filters(
        self, run: Run, started: Path, filters: tuple[str, ...], expected: list[str]
    ) -> None:
        """``--run``, ``--session``, ``--status`` and ``--limit`` narrow the listing."""
        result = run("query", "runs", "--db", str(started), "--json", *filters)
        assert expected == [row["run_id"] for row in json.loads(result.stdout)]

    def test_worker_launch_prints_a_canonical_envelope(self, run: Run, started: Path) -> None:
        """``pwf worker launch run-1`` claims the run and prints its launch envelope line."""
        result = run("worker", "launch", "run-1", "--db", str(started), "--at", str(AT + 1))
        assert (0, "") == (result.exit_code, result.stderr)
        [line] = result.stdout.splitlines()
        assert _is_canonical(line)
        envelope = json.loads(line)
        assert ("pi-workflows.worker-launch.v1", "run-1", 1, 1) == (
            envelope["schema"],
            envelope["runId"],
            envelope["generation"],
            envelope["protocolVersion"],
        )
        queue = json.loads(run("query", "runs", "--db", str(started), "--json").stdout)[0]
        assert (envelope["workerEpoch"], 1) == (
            queue["queue_owner_worker_epoch"],
            queue["queue_generation"],
        )

    def test_group_options_reach_launch(self, run: Run, started: Path) -> None:
        """``--db`` and ``--at`` given before ``launch`` apply to it."""
        result = run("worker", "--db", str(started), "--at", str(AT + 1), "launch", "run-1")
        assert 0 == result.exit_code
        assert AT + 1 == _entries(started)[-1][0]

    def test_launching_twice_is_refused(self, run: Run, started: Path) -> None:
        """A run that already has a live worker cannot be claimed again: exit 2, one line."""
        run("worker", "launch", "run-1", "--db", str(started), "--at", str(AT + 1))
        events = _entries(started)
        result = run("worker", "launch", "run-1", "--db", str(started), "--at", str(AT + 2))
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith("Error: ")
        assert events == _entries(started)

    def test_launching_an_unknown_run_is_refused(self, run: Run, db: Path) -> None:
        """An unknown run id exits 2 with one line and appends nothing."""
        result = run("worker", "launch", "run-9", "--db", str(db), "--at", str(AT))
        assert 2 == result.exit_code
        one_line(result.stderr)
        assert [] == _entries(db)

    def test_worker_ready_is_answered_and_replayed(self, run: Run, started: Path) -> None:
        """The launched worker's ready message is accepted; sent again, it gets the same answer."""
        launched = json.loads(
            run("worker", "launch", "run-1", "--db", str(started), "--at", str(AT + 1)).stdout
        )
        revision = json.loads(run("query", "runs", "--db", str(started), "--json").stdout)[0][
            "revision"
        ]
        ready = _line(
            {
                "schema": "pi-workflows.worker-message.v1",
                "launchSchema": "pi-workflows.worker-launch.v1",
                "messageId": "m-1",
                "kind": "worker.ready",
                "operation": "worker.ready",
                "runId": "run-1",
                "generation": launched["generation"],
                "workerEpoch": launched["workerEpoch"],
                "expectedRevision": revision,
                "payload": {},
            }
        )
        first = run("worker", "--db", str(started), "--at", str(AT + 2), stdin=ready)
        assert (0, "") == (first.exit_code, first.stderr)
        response = json.loads(first.stdout)
        assert ("pi-workflows.worker-response.v1", "m-1", "accepted") == (
            response["schema"],
            response["messageId"],
            response["outcome"],
        )
        assert _is_canonical(first.stdout.rstrip("\n"))
        events = _entries(started)
        again = run("worker", "--db", str(started), "--at", str(AT + 3), stdin=ready)
        assert first.stdout == again.stdout
        assert events == _entries(started)

    def test_a_malformed_worker_line_is_reported(self, run: Run, db: Path) -> None:
        """``pwf worker`` refuses a bad line with its number and exit 2."""
        result = run("worker", "--db", str(db), stdin=b"#at 5\n{}\n")
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith("line 2: ")
        assert [] == _entries(db)


class TestQuery:
    """``pwf query`` reads the projections of any database, empty ones included."""

    @pytest.mark.parametrize("name", ["runs", "interactions", "messages"])
    def test_an_empty_database_lists_nothing(self, run: Run, db: Path, name: str) -> None:
        """``--json`` prints an empty array; the table prints its header only."""
        assert "[]\n" == run("query", name, "--db", str(db), "--json").stdout
        assert 1 == len(run("query", name, "--db", str(db)).stdout.splitlines())


class TestServedClaim:
    """Direct mode refuses while a live ``pwf serve`` claim exists (ADR 0010)."""

    REFUSAL = "a live pwf host (epoch 4) owns this database; send requests to it instead"

    def test_a_live_claim_refuses_requests(self, run: Run, db: Path) -> None:
        """A claim expiring after now refuses ``pwf request`` with one line; nothing is appended."""
        _claim(db, host_id="host-a", expires_at=AT + 1)
        result = run("request", "--db", str(db), "--at", str(AT), stdin=_status("req-1"))
        assert 3 == result.exit_code
        assert f"Error: {self.REFUSAL}" == one_line(result.stderr)
        assert ("", []) == (result.stdout, _entries(db))

    def test_a_live_claim_refuses_worker_messages_and_launch(self, run: Run, started: Path) -> None:
        """``pwf worker`` and ``pwf worker launch`` are refused the same way."""
        _claim(started, host_id="host-a", expires_at=AT + 10)
        launch = run("worker", "launch", "run-1", "--db", str(started), "--at", str(AT + 1))
        loop = run("worker", "--db", str(started), "--at", str(AT + 1), stdin=b"{}\n")
        assert (3, 3) == (launch.exit_code, loop.exit_code)
        assert f"Error: {self.REFUSAL}" == one_line(launch.stderr)
        assert f"Error: {self.REFUSAL}" == one_line(loop.stderr)

    @pytest.mark.parametrize(
        ("host_id", "expires_at"),
        [("host-a", AT), ("host-a", AT - 1), (None, None)],
        ids=["expires-now", "expired", "released"],
    )
    def test_an_expired_or_released_claim_does_not_refuse(
        self, run: Run, db: Path, host_id: str | None, expires_at: int | None
    ) -> None:
        """``expires_at == now`` counts as expired, and a released claim is no claim."""
        _claim(db, host_id=host_id, expires_at=expires_at)
        result = run("request", "--db", str(db), "--at", str(AT), stdin=_status("req-1"))
        assert 0 == result.exit_code
        assert "accepted" == json.loads(result.stdout)["outcome"]

    def test_the_claim_is_judged_at_each_line_time(self, run: Run, db: Path) -> None:
        """Lines before the claim expires are refused; a script past its expiry would run."""
        _claim(db, host_id="host-a", expires_at=AT + 100)
        stdin = b"#at " + str(AT + 100).encode() + b"\n" + _status("req-1")
        assert 0 == run("request", "--db", str(db), "--at", str(AT), stdin=stdin).exit_code


def test_an_answer_over_1_mib_says_it_ran_and_was_recorded(
    run: Callable[..., Result], tmp_path: Path
) -> None:
    """The command ran and is recorded: exit 4 and the truth on stderr, also on a retry."""
    db = tmp_path / "s.db"
    assert 0 == run("init", "--db", str(db)).exit_code
    name = "w" * 400_000
    starts = b""
    for number in (1, 2, 3):
        request = {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": f"r-{number}",
            "clientId": "cli-A",
            "idempotencyKey": f"k-{number}",
            "operation": "run.start",
            "runId": f"run-{number}",
            "payload": {
                "projectPath": "/p",
                "workflowName": name,
                "workflowSourceRef": "builtin:echo",
                "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
                "definitionDigest": "d1",
                "definitionSnapshot": {},
                "input": {},
                "originSessionId": f"s-{number}",
            },
        }
        starts += b"#at 1000\n" + canonical.encode(request) + b"\n"
    started = run("request", "--db", str(db), stdin=starts)
    assert (0, 3) == (started.exit_code, started.stdout.count('"outcome":"accepted"'))
    listing = canonical.encode(
        {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": "list-1",
            "clientId": "cli-A",
            "idempotencyKey": "list-1",
            "operation": "run.list",
            "payload": {},
        }
    )
    for outcome in ("accepted", "adopted"):
        done = run("request", "--db", str(db), "--at", "2000", stdin=listing + b"\n")
        assert (4, "") == (done.exit_code, done.stdout)
        assert (
            f"line 1: request executed and recorded as {outcome}, but its answer exceeds 1 MiB"
            == one_line(done.stderr)
        )
    shown = run("log", "show", "--db", str(db), "--request", "list-1", "--json")
    assert 1 == len(shown.stdout.splitlines())
