"""Ids holding lone surrogates on the shared log in PostgreSQL (issue item 3, ADR 0071).

PostgreSQL text holds valid UTF-8 only, so a lone surrogate cannot be kept
in its columns as SQLite keeps it; the ids must still stay apart, for the
hosts that share the log as for one host alone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import psycopg

from pwf import canonical

if TYPE_CHECKING:
    from tests.integration._served import line
    from tests.postgres.conftest import Hosts
else:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
    from _served import line

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


def _answers(out: bytes) -> list[dict[str, Any]]:
    return [canonical.decode(raw) for raw in out.splitlines()]  # type: ignore[misc]


def test_hosts_on_a_shared_log_keep_ids_that_differ_in_a_lone_surrogate_apart(
    hosts: Hosts,
) -> None:
    """Two hosts, four runs whose ids differ in one code unit, retries adopted on the other host."""
    first = hosts("a", "request", "--at", "1000", stdin=_start("\ud800") + b"\n" + _start("\udc01"))
    assert 0 == first.exit_code, first.output
    second = hosts(
        "b",
        "request",
        "--at",
        "1000",
        stdin=b"\n".join([_start("\ud801"), _start("\ufffd"), _start("\ud800")]) + b"\n",
    )
    assert 0 == second.exit_code, second.output
    answers = _answers(first.stdout_bytes) + _answers(second.stdout_bytes)
    assert ["accepted"] * 4 + ["adopted"] == [answer["outcome"] for answer in answers], answers
    assert [f"r-{cut}" for cut in ("\ud800", "\udc01", "\ud801", "\ufffd", "\ud800")] == [
        answer["requestId"] for answer in answers
    ]
    for host in ("a", "b"):
        runs = json.loads(hosts(host, "query", "runs", "--json").output)
        assert sorted(f"run-{cut}" for cut in ("\ud800", "\udc01", "\ud801", "\ufffd")) == sorted(
            row["run_id"] for row in runs
        )
        assert 0 == hosts(host, "log", "verify").exit_code
        verified = hosts(host, "verify")
        assert 0 == verified.exit_code, verified.output
    with psycopg.connect(hosts.url) as connection:
        recorded = connection.execute("SELECT count(DISTINCT request_id) FROM _pwf_recorded")
        assert (4,) == recorded.fetchone()
