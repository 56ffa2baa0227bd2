"""Hostile and malformed input through ``pwf request`` and ``pwf worker``.

Every line gets either one canonical response line or one ``line N: why``
on stderr; nothing is ever a traceback, and a refused line appends nothing.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from pwf import canonical
from pwf.cli import cli

if TYPE_CHECKING:
    from pathlib import Path

AT = 1_764_403_200_000
START = {
    "definitionDigest": "d1",
    "input": {},
    "originSessionId": "s-1",
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "workflowSourceRef": "builtin:echo",
}


def _request(**members: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "schema": "pi-workflows.client.v1",
        "type": "request",
        "requestId": "r-1",
        "clientId": "cli-A",
        "operation": "host.status",
        "idempotencyKey": "k-1",
        "payload": {},
    }
    request.update(members)
    return request


def _text(request: dict[str, Any]) -> bytes:
    return canonical.encode(request)


def _padded(size: int) -> bytes:
    """A canonical request line of exactly ``size`` bytes."""
    empty = len(_text(_request(payload={"pad": ""})))
    return _text(_request(payload={"pad": "x" * (size - empty)}))


DEEP = (
    b'{"clientId":"c","idempotencyKey":"k","operation":"host.status","payload":%s,'
    b'"requestId":"r","schema":"pi-workflows.client.v1","type":"request"}'
)
REFUSED: dict[str, bytes] = {
    "nul byte": _text(_request()).replace(b'"k-1"', b'"k\x00"'),
    "invalid utf-8": _text(_request()).replace(b"k-1", b"k\xff1"),
    "byte order mark": b"\xef\xbb\xbf" + _text(_request()),
    "not json": b"{not json}",
    "huge number": _text(_request()).replace(b'"payload":{}', b'"payload":{"n":1e400}'),
    "float spelled long": _text(_request()).replace(b'"payload":{}', b'"payload":{"n":1.0}'),
    "duplicate keys": _text(_request()).replace(b'"payload":{}', b'"payload":{"a":1,"a":2}'),
    "whitespace": _text(_request()).replace(b'"payload":{}', b'"payload": {}'),
    "unknown member": _text(_request(extra=1)),
    "wrong schema": _text(_request(schema="pi-workflows.client.v2")),
    "revision as text": _text(_request(expectedRevision="1")),
    "revision negative": _text(_request(expectedRevision=-1)),
    "boolean revision": _text(_request(expectedRevision=True)),
    "id too long": _text(_request(clientId="é" * 129)),
    "empty request id": _text(_request(requestId="")),
    "unknown operation": _text(_request(operation="drop.tables")),
    "no payload": _text({k: v for k, v in _request().items() if k != "payload"}),
    "array line": b"[]",
    "one byte over 1 MiB": _padded(1_048_577),
    # DOMAIN §6 / issue 13: the frame decoder counts the newline, so a framed
    # message holds at most 1 048 575 bytes; a 1 048 576-byte line is refused.
    "exactly 1 MiB": _padded(1_048_576),
    "nested 10000 deep": DEEP % (b"[" * 10_000 + b"]" * 10_000),
    "nested 129 deep": DEEP % (b"[" * 128 + b"]" * 128),
}
ANSWERED: dict[str, tuple[bytes, str]] = {
    "one byte under 1 MiB": (_padded(1_048_575), "accepted"),
    # DOMAIN §3.1: the original accepts lone surrogates in every string (ADR 0027).
    "lone surrogate in an input": (
        _text(_request(operation="run.start", runId="run-x", payload={**START, "input": "\ud800"})),
        "accepted",
    ),
    "lone surrogate in an id": (_text(_request(idempotencyKey="k-\udc00")), "accepted"),
    "nested 128 deep": (DEEP % (b"[" * 127 + b"]" * 127), "accepted"),
    "sql in a run id": (
        _text(_request(operation="run.status", runId="x'; DROP TABLE runs;--", payload=None)),
        "notFound",
    ),
    "wrong-typed field": (
        _text(_request(operation="run.start", runId="run-y", payload={**START, "workflowName": 5})),
        "rejected",
    ),
    "relative project path": (
        _text(
            _request(operation="run.start", runId="run-z", payload={**START, "projectPath": "p"})
        ),
        "rejected",
    ),
    "payload not an object": (
        _text(_request(operation="interaction.submit", runId="run-1", payload=None)),
        "rejected",
    ),
    "payload of the wrong kind": (
        _text(_request(operation="run.start", runId="run-w", payload=[1, 2])),
        "rejected",
    ),
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    result = CliRunner().invoke(cli, ["init", "--db", str(path)], catch_exceptions=False)
    assert 0 == result.exit_code
    return path


def _events(path: Path) -> list[bytes]:
    connection = sqlite3.connect(path)
    try:
        return [row[0] for row in connection.execute("SELECT body FROM events ORDER BY seq")]
    finally:
        connection.close()


def _pwf(*args: str, stdin: bytes) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout_bytes, result.stderr


class TestRefusedRequestLines:
    @pytest.mark.parametrize("name", sorted(REFUSED))
    def test_refused_with_one_line_and_nothing_appended(self, db: Path, name: str):
        """A hostile line is one stderr line, exit 2, and the log does not move."""
        before = _events(db)
        code, out, err = _pwf(
            "request", "--db", str(db), "--at", str(AT), stdin=REFUSED[name] + b"\n"
        )
        assert (2, b"") == (code, out)
        assert 1 == len(err.splitlines()), err
        assert err.startswith("line 1: "), err
        assert "Traceback" not in err
        assert before == _events(db)

    def test_good_lines_around_hostile_ones_still_run(self, db: Path):
        """Every hostile line is refused on its own; the good ones between them are answered."""
        good = _text(_request(requestId="good", idempotencyKey="good")) + b"\n"
        stdin = b"".join(line + b"\n" + good for line in REFUSED.values())
        code, out, err = _pwf("request", "--db", str(db), "--at", str(AT), stdin=stdin)
        assert 2 == code
        assert len(REFUSED) == len(err.splitlines())
        outcomes = [canonical.parse_line(line)["outcome"] for line in out.splitlines()]  # type: ignore[index]
        assert ["accepted"] + ["adopted"] * (len(REFUSED) - 1) == outcomes


class TestAnsweredRequestLines:
    @pytest.mark.parametrize("name", sorted(ANSWERED))
    def test_answered_with_a_canonical_response(self, db: Path, name: str):
        """Odd but well-formed requests get a response line with the expected outcome."""
        line, outcome = ANSWERED[name]
        code, out, err = _pwf("request", "--db", str(db), "--at", str(AT), stdin=line + b"\n")
        response = canonical.parse_line(out.rstrip(b"\n"))
        assert (0, "", outcome) == (code, err, response["outcome"])  # type: ignore[index]

    def test_raised_refusals_append_nothing(self, db: Path):
        """A payload the handler refuses (wrong type, relative path) is answered, not recorded."""
        before = _events(db)
        for name in ("wrong-typed field", "relative project path", "payload of the wrong kind"):
            _pwf("request", "--db", str(db), "--at", str(AT), stdin=ANSWERED[name][0] + b"\n")
        assert before == _events(db)

    def test_tables_survive_sql_looking_ids(self, db: Path):
        """Ids are bound, never spliced: the runs table is still there."""
        _pwf("request", "--db", str(db), stdin=ANSWERED["sql in a run id"][0] + b"\n")
        connection = sqlite3.connect(db)
        try:
            assert [(0,)] == connection.execute("SELECT count(*) FROM runs").fetchall()
        finally:
            connection.close()


class TestRefusedWorkerLines:
    @pytest.mark.parametrize(
        "line",
        [
            b"{}",
            b"\xff",
            b'{"schema":"pi-workflows.worker-message.v1"}',
            canonical.encode(
                {
                    "schema": "pi-workflows.worker-message.v1",
                    "launchSchema": "pi-workflows.worker-launch.v1",
                    "messageId": "m-1",
                    "kind": "worker.ready",
                    "operation": "worker.ready",
                    "runId": "run-1",
                    "generation": 0,
                    "workerEpoch": "w-1",
                    "expectedRevision": 0,
                    "payload": {},
                }
            ),
            b'{"payload":' + b"[" * 5000 + b"]" * 5000 + b"}",
        ],
    )
    def test_refused_with_one_line_and_nothing_appended(self, db: Path, line: bytes):
        """Malformed worker lines are refused one by one, appending nothing."""
        before = _events(db)
        code, out, err = _pwf("worker", "--db", str(db), "--at", str(AT), stdin=line + b"\n")
        assert (2, b"") == (code, out)
        assert 1 == len(err.splitlines()), err
        assert err.startswith("line 1: "), err
        assert before == _events(db)

    def test_unknown_epoch_is_claim_lost_and_not_stored(self, db: Path):
        """A well-formed message from no active worker gets claimLost and leaves no trace."""
        message = {
            "schema": "pi-workflows.worker-message.v1",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": "m-1",
            "kind": "worker.ready",
            "operation": "worker.ready",
            "runId": "run-1",
            "generation": 1,
            "workerEpoch": "w-1",
            "expectedRevision": 0,
            "payload": {},
        }
        before = _events(db)
        code, out, _ = _pwf("worker", "--db", str(db), stdin=canonical.encode(message) + b"\n")
        response = canonical.parse_line(out.rstrip(b"\n"))
        assert (0, "claimLost", "Worker epoch is stale") == (
            code,
            response["outcome"],  # type: ignore[index]
            response["error"],  # type: ignore[index]
        )
        assert before == _events(db)


class TestWorkerFrameLimit:
    """``pwf worker`` applies the frame decoder's rule: at most 1 048 575 bytes a message."""

    @staticmethod
    def _message(size: int) -> bytes:
        message: dict[str, Any] = {
            "schema": "pi-workflows.worker-message.v1",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": "m-1",
            "kind": "worker.ready",
            "operation": "worker.ready",
            "runId": "run-1",
            "generation": 1,
            "workerEpoch": "w-1",
            "expectedRevision": 0,
            "payload": {"pad": ""},
        }
        empty = len(canonical.encode(message))
        message["payload"] = {"pad": "x" * (size - empty)}
        line = canonical.encode(message)
        assert size == len(line)
        return line

    def test_exactly_1_mib_is_refused(self, db: Path):
        """A 1 048 576-byte worker line is refused on stderr and appends nothing."""
        before = _events(db)
        code, out, err = _pwf("worker", "--db", str(db), stdin=self._message(1_048_576) + b"\n")
        assert (2, b"", "line 1: Client protocol message exceeds 1 MiB\n") == (code, out, err)
        assert before == _events(db)

    def test_one_byte_under_is_answered(self, db: Path):
        """A 1 048 575-byte worker line reaches the host and gets a response."""
        code, out, err = _pwf("worker", "--db", str(db), stdin=self._message(1_048_575) + b"\n")
        response = canonical.parse_line(out.rstrip(b"\n"))
        assert (0, "", "claimLost") == (code, err, response["outcome"])  # type: ignore[index]


def test_request_exactly_1_mib_names_the_limit(db: Path) -> None:
    """The refusal of a 1 048 576-byte request line is the original's size error."""
    code, out, err = _pwf("request", "--db", str(db), stdin=_padded(1_048_576) + b"\n")
    assert (2, b"", "line 1: Client protocol message exceeds 1 MiB\n") == (code, out, err)
