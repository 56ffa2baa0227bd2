"""Ids holding lone surrogates keep their identity (issue item 3, ADR 0071).

The original compares ids as JavaScript strings, UTF-16 code units: ``"r-\\ud800"``
and ``"r-\\ud801"`` are two ids, and neither is ``"r-\\ufffd"``.  Each test sends
ids that differ only in a lone surrogate, in direct mode (``pwf request``) and
to a served host (``pwf serve`` and ``pwf call``), and checks that both are
accepted as different ids, that every answer echoes the id exactly as it was
sent, that lookups by id find the one run, and that the log verifies and
the projections equal a rebuild.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from click.testing import CliRunner

from pwf import canonical
from pwf.cli import cli

if TYPE_CHECKING:
    from tests.integration._served import Served, init, line, pwf, short_dir
else:
    from _served import Served, init, line, pwf, short_dir

HIGH: Final = "\ud800"
LOW: Final = "\udc01"
OTHER: Final = "\ud801"
START: dict[str, object] = {
    "definitionDigest": "d1",
    "definitionSnapshot": {},
    "input": {},
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "workflowSourceRef": "builtin:echo",
}


def _start(cut: str) -> bytes:
    payload = {**START, "originSessionId": f"s-{cut}"}
    return line(
        "run.start", payload, rid=f"r-{cut}", key=f"k-{cut}", client=f"c-{cut}", run_id=f"run-{cut}"
    )


def _status(cut: str, rid: str) -> bytes:
    return line("run.status", None, rid=rid, client=f"c-{cut}", run_id=f"run-{cut}")


LINES: Final = (
    _start(HIGH),
    _start(OTHER),
    _start(LOW),
    _start("\ufffd"),
    _start(HIGH),  # the same request again: adopted, not a conflict
    _status(HIGH, f"s-{HIGH}"),
    _status(OTHER, f"s-{OTHER}"),
    line("run.list", None, rid=f"l-{LOW}", client=f"c-{LOW}"),
    line("view.run.get", None, rid=f"g-{LOW}", client=f"c-{LOW}", run_id=f"run-{LOW}"),
)
"""Three runs whose ids differ only in a lone surrogate, one with U+FFFD, a retry, four reads."""


def _answers(out: bytes) -> list[dict[str, Any]]:
    answers = [canonical.decode(raw) for raw in out.splitlines()]
    assert all(isinstance(answer, dict) for answer in answers)
    return answers  # type: ignore[return-value]


def _check_answers(out: bytes) -> None:
    """Every answer names its own request and run, exactly as sent."""
    answers = _answers(out)
    assert [
        "accepted",
        "accepted",
        "accepted",
        "accepted",
        "adopted",
        "accepted",
        "accepted",
        "accepted",
        "accepted",
    ] == [answer["outcome"] for answer in answers], answers
    sent = [canonical.decode(raw) for raw in LINES]
    assert [request["requestId"] for request in sent] == [  # type: ignore[index]
        answer["requestId"] for answer in answers
    ]
    assert b'"requestId":"r-\\ud800"' in out.splitlines()[0]
    assert f"run-{HIGH}" == answers[5]["receipt"]["runId"]
    assert f"run-{OTHER}" == answers[6]["receipt"]["runId"]
    assert b'"runId":"run-\\ud801"' in out.splitlines()[6]
    listed = {run["runId"]: run["originSessionId"] for run in answers[7]["receipt"]["runs"]}
    assert {f"run-{cut}": f"s-{cut}" for cut in (HIGH, OTHER, LOW, "\ufffd")} == listed
    assert f"run-{LOW}" == answers[8]["receipt"]["runId"]


def _check_database(db: Path, tmp: Path) -> None:
    """Four runs by four ids; lookups find each; the log verifies; rebuild equals live."""
    runs = json.loads(_cli("query", "runs", "--db", str(db), "--json"))
    assert sorted(f"run-{cut}" for cut in (HIGH, OTHER, LOW, "\ufffd")) == sorted(
        row["run_id"] for row in runs
    )
    found = json.loads(_cli("query", "runs", "--db", str(db), "--run", f"run-{OTHER}", "--json"))
    assert [(f"run-{OTHER}", f"s-{OTHER}")] == [
        (row["run_id"], row["origin_session_id"]) for row in found
    ]
    explained = json.loads(_cli("explain", "run", f"run-{LOW}", "--db", str(db), "--json"))
    assert f"run-{LOW}" == explained["id"]
    # An id given as the WTF-8 bytes of its code units, as a shell passes them.
    argument = b"run-\xed\xa0\x80".decode("utf-8", "surrogateescape")
    explained = json.loads(_cli("explain", "run", argument, "--db", str(db), "--json"))
    assert f"run-{HIGH}" == explained["id"]
    assert b"ok" in _cli("log", "verify", "--db", str(db))
    _cli("verify", "--db", str(db))
    digest = _cli("digest", str(db))
    replayed = tmp / "replayed.db"
    _cli("replay", "--db", str(db), "--until", "1000000", "--out", str(replayed))
    assert digest.split(b"\n")[-2:] == _cli("digest", str(replayed)).split(b"\n")[-2:]
    _cli("diff", str(db), str(replayed))
    _cli("rebuild", "--db", str(db))
    assert digest == _cli("digest", str(db))
    # Human output shows a lone surrogate as U+FFFD, as Node prints it (ADR 0027 D6).
    assert "run-\ufffd" in _cli("query", "runs", "--db", str(db)).decode()
    assert "run-\ufffd" in _cli("status", "--db", str(db), "--now", "1000").decode()


def _cli(*args: str, stdin: bytes | None = None) -> bytes:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    assert (0, "") == (result.exit_code, result.stderr), (args, result.stdout, result.stderr)
    return result.stdout_bytes


def test_direct_mode_keeps_ids_that_differ_in_a_lone_surrogate_apart(tmp_path: Path) -> None:
    """``pwf request``: two ids that differ in one code unit are two requests and two runs."""
    db = tmp_path / "state.db"
    _cli("init", "--db", str(db))
    out = _cli("request", "--db", str(db), "--at", "1000", stdin=b"\n".join(LINES) + b"\n")
    _check_answers(out)
    _check_database(db, tmp_path)


@pytest.mark.slow
def test_a_served_host_keeps_ids_that_differ_in_a_lone_surrogate_apart() -> None:
    """``pwf serve`` and ``pwf call``: the same as in direct mode."""
    with short_dir() as directory:
        db = directory / "state.db"
        init(db)
        served = Served(db)
        try:
            result = pwf("call", "--db", str(db), stdin=b"\n".join(LINES) + b"\n")
            assert 0 == result.returncode, result.stderr
            _check_answers(result.stdout)
        finally:
            assert 0 == served.terminate(), served.stderr()
        _check_database(db, directory)


def test_the_columns_hold_the_exact_text(tmp_path: Path) -> None:
    """An id's column holds its UTF-16 code units as WTF-8; other ids keep their UTF-8 bytes."""
    db = tmp_path / "state.db"
    _cli("init", "--db", str(db))
    _cli("request", "--db", str(db), "--at", "1000", stdin=LINES[0] + b"\n" + LINES[3] + b"\n")
    connection = sqlite3.connect(db)
    try:
        found = connection.execute(
            "SELECT hex(run_id), hex(request_id) FROM events"
            " WHERE type = 'run.reserved' ORDER BY seq"
        ).fetchall()
        runs = connection.execute("SELECT hex(run_id) FROM runs ORDER BY rowid").fetchall()
    finally:
        connection.close()
    assert [
        ((b"run-\xed\xa0\x80").hex().upper(), (b"r-\xed\xa0\x80").hex().upper()),
        ("run-\ufffd".encode().hex().upper(), "r-\ufffd".encode().hex().upper()),
    ] == found
    assert [((b"run-\xed\xa0\x80").hex().upper(),), ("run-\ufffd".encode().hex().upper(),)] == runs


GOLDEN: Final = Path(__file__).resolve().parents[1] / "golden"


def _messages_at_version_2(db: Path) -> None:
    """Give the file ``workflow_messages``' columns of ADR 0085 (it holds no message).

    Otherwise ``pwf verify`` names that projection's version first, not the
    rows of ``host_commands`` this test is about.
    """
    connection = sqlite3.connect(db)
    try:
        assert connection.execute("SELECT count(*) FROM workflow_messages").fetchone() == (0,)
        for column in ("latest_turn_id TEXT", "latest_turn_state TEXT"):
            connection.execute(f"ALTER TABLE workflow_messages ADD COLUMN {column}")
        for column in ("latest_turn_started_at INTEGER", "latest_turn_ended_at INTEGER"):
            connection.execute(f"ALTER TABLE workflow_messages ADD COLUMN {column}")
        connection.execute(
            "UPDATE _pwf_checkpoint SET version = 2 WHERE projection = 'workflow_messages'"
        )
        connection.commit()
    finally:
        connection.close()


def _runs_at_version_2(db: Path) -> None:
    """Give the file the ``runs`` read model's kept totals of ADR 0094, as its rows make them."""
    from pwf.projections.run_totals import TOTALS_DDL  # noqa: PLC0415

    connection = sqlite3.connect(db)
    try:
        for statement in TOTALS_DDL:
            connection.execute(statement)
        connection.execute(
            "UPDATE runs_totals SET queue_rows = (SELECT count(*) FROM run_queue),"
            " listed = (SELECT count(*) FROM run_queue JOIN runs USING (run_id)),"
            " revisions = (SELECT coalesce(sum(revision), 0) FROM runs)"
        )
        connection.execute("UPDATE _pwf_checkpoint SET version = 2 WHERE projection = 'runs'")
        connection.commit()
    finally:
        connection.close()


def test_a_database_written_before_verifies_its_log_and_is_rebuilt_once(tmp_path: Path) -> None:
    """``main-before-0071.db.gz``: ``run-\\ud800`` started by ``r-\\ud800``, bound as U+FFFD.

    Written by pwf at commit 5f58e4a (main before ADR 0071): ``pwf init`` and
    ``pwf request --at 1000`` of ``LINES[0]``, then vacuumed;
    ``main-before-0071.digest`` is what ``pwf digest`` printed for it then.
    Migrated to this pwf's format, its log verifies and digests as it did;
    ``pwf verify`` names the rows a rebuild now writes by their code units,
    ``pwf rebuild`` writes them, and then a retry is adopted and the id
    that differs in one code unit is new.
    """
    db = tmp_path / "legacy.db"
    db.write_bytes(gzip.decompress((GOLDEN / "main-before-0071.db.gz").read_bytes()))
    _cli("log", "migrate", "--db", str(db))  # to format pwf.store.v2 (ADR 0102): one more event
    assert b"ok: 3 events" in _cli("log", "verify", "--db", str(db))
    recorded = (GOLDEN / "main-before-0071.digest").read_bytes()
    assert recorded == _cli("digest", str(db))
    _messages_at_version_2(db)
    _runs_at_version_2(db)
    result = CliRunner().invoke(cli, ["verify", "--db", str(db), "--json"])
    assert 1 == result.exit_code, result.output
    found = json.loads(result.stdout)
    assert ("host_commands", [{"request_id": "r-\ufffd"}, {"request_id": f"r-{HIGH}"}]) == (
        found["table"],
        [row["key"] for row in found["rows"]],
    )
    _cli("rebuild", "--db", str(db))
    assert b"ok: chain intact" in _cli("verify", "--db", str(db))
    out = _cli("request", "--db", str(db), "--at", "2000", stdin=LINES[0] + b"\n" + LINES[1])
    assert ["adopted", "accepted"] == [answer["outcome"] for answer in _answers(out)]
    assert b"ok: chain intact" in _cli("verify", "--db", str(db))


def test_a_prune_removes_runs_by_their_code_units_and_proves_it(tmp_path: Path) -> None:
    """Two cancelled runs that differ in one code unit are pruned; the third, queued, stays."""
    db, backup = tmp_path / "state.db", tmp_path / "backup.db"
    _cli("init", "--db", str(db))
    cancels = [
        line("run.cancel", {}, rid=f"x-{cut}", client=f"c-{cut}", run_id=f"run-{cut}", revision=1)
        for cut in (HIGH, OTHER)
    ]
    out = _cli("request", "--db", str(db), "--at", "1000", stdin=b"\n".join([*LINES[:3], *cancels]))
    assert ["accepted"] * 5 == [answer["outcome"] for answer in _answers(out)]
    _cli(
        "state",
        "prune",
        "--db",
        str(db),
        "--before",
        "2030-01-01",
        "--apply",
        "--backup",
        str(backup),
    )
    assert [f"run-{LOW}"] == [
        row["run_id"] for row in json.loads(_cli("query", "runs", "--db", str(db), "--json"))
    ]
    proof = _cli("log", "verify", "--db", str(db), "--backup", str(backup))
    assert b"holds each of the 6 events log.pruned took" in proof
    _cli("verify", "--db", str(db))
