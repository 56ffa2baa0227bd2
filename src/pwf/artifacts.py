"""Generated artifacts: event and operation schemas, DDL, the operations reference; drift checks.

Imports events, projections, protocol, readmodel and the SQLite store.  Schemas
come from the msgspec Structs (the only schema source): ``events/*.schema.json``
from the events, ``schemas/*.schema.json`` from each client operation's payload
and receipt types (ADR 0081).  DDL is exported as SQLite itself stores it.
``docs/operations.md`` shows one request line of every operation and the
answer ``pwf request`` gives it, produced by running the lines on a fresh
database.  Files are never deleted: the log is forever, so the schema of a
retired event type stays.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from pwf import canonical
from pwf.events import EVENT_TYPES, Envelope
from pwf.projections import PROJECTIONS
from pwf.protocol.client import CLIENT_SCHEMA, OPERATIONS, VIEW_OPERATIONS
from pwf.protocol.schemas import OPERATION_TYPES, operation_schema
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SCHEMA

__all__ = [
    "EXAMPLES",
    "EXAMPLE_AT",
    "EXAMPLE_DIRECTORY",
    "EXAMPLE_SEED",
    "Example",
    "example_lines",
    "expected_artifacts",
    "normalised_answer",
    "run_examples",
    "sync_artifacts",
]


def _schema_text(cls: type) -> str:
    return json.dumps(msgspec.json.schema(cls), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _ddl_text(statements: tuple[str, ...]) -> str:
    connection = sqlite3.connect(":memory:")
    try:
        for statement in SCHEMA:
            connection.execute(statement)
        before = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        for statement in statements:
            connection.execute(statement)
        rows = connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name"
        ).fetchall()
    finally:
        connection.close()
    wanted = [sql for name, sql in rows if statements is SCHEMA or name not in before]
    return "".join(f"{sql};\n" for sql in wanted)


# --------------------------------------------------------------------------- operations reference

EXAMPLE_AT: Final = 1_785_600_000_000
"""The time every example runs at (``--at``): 2026-08-01T16:00:00Z."""

EXAMPLE_SEED: Final = "docs"
"""``PWF_SEED`` for the examples, so the coordinator epoch they mint is the same on every run."""

EXAMPLE_DIRECTORY: Final = "/tmp/pwf-docs"  # noqa: S108 - a path in the docs, replaced when run
"""The directory the examples' absolute paths (the backup) name."""

SESSION: Final = "session-1"
RUN: Final = "run-1"
EPOCH: Final = "session-epoch-204960c3-7552-34b2-0bba-33ef39ec8d85"
"""The coordinator epoch ``view.session.watch`` mints under :data:`EXAMPLE_SEED` at its seq."""

VARYING: Final = ("sizeBytes", "databaseBytesBefore", "databaseBytesAfter")
"""Receipt members that count the file's bytes, which differ between SQLite builds."""


class Example(NamedTuple):
    """One operation's example request: its payload and request members."""

    operation: str
    payload: object
    run_id: str | None = None
    note: str = ""


def _session(**members: object) -> dict[str, object]:
    return {"coordinatorEpoch": EPOCH, "targetSessionId": SESSION, **members}


EXAMPLES: Final[tuple[Example, ...]] = (
    Example("host.status", {}),
    Example(
        "run.start",
        {
            "definitionDigest": "sha256:9f2c",
            "definitionSnapshot": {"nodes": ["draft"]},
            "input": {"version": "2.1.0"},
            "originSessionId": SESSION,
            "projectPath": "/srv/project",
            "workflowName": "release-notes",
            "workflowSource": {"id": "release-notes", "kind": "builtin", "revision": "2.1.0"},
            "workflowSourceRef": "builtin:release-notes",
        },
        RUN,
        "The same line again is `adopted`; another payload with the same `runId` is rejected.",
    ),
    Example("run.status", {}, RUN),
    Example("run.list", {"limit": 10}),
    Example(
        "view.runs.page",
        {"cursor": 0, "revision": "1:1:1785600000000:0:0"},
        note="`revision` is the list's, from the last page or watch; a stale one answers `conflict`"
        " with a fresh first page and its revision.",
    ),
    Example(
        "view.run.get", {}, RUN, "The receipt is HOST §2.14's run view (docs/served-views.md)."
    ),
    Example("view.page", {"cursor": 0, "kind": "updates"}, RUN),
    Example(
        "view.content",
        {"offset": 0, "path": "artifacts/sha256/" + "0" * 64 + ".json"},
        RUN,
        "`path` names a large value a run view listed; an unknown one is `notFound`.",
    ),
    Example(
        "view.session.watch",
        {"coordinator": True, "sessionId": SESSION, "subscriptionId": "sub-session"},
        note="With `coordinator` true the request's connection (direct mode: its `clientId`)"
        " becomes the session's coordinator; the epoch is then named by the session commands.",
    ),
    Example(
        "workflowMessage.reportBranch",
        _session(entries=[], hasPendingMessages=False, isIdle=True),
    ),
    Example(
        "workflowTurn.report",
        _session(
            runId=RUN, state="started", workflowMessageId="message-1", workflowTurnId="turn-1"
        ),
        note="A turn names a workflow message the session was sent.",
    ),
    Example("followUp.queue", _session(prompt="Add the changelog too"), RUN),
    Example("followUp.remove", _session(followUpId="follow_up-1"), RUN),
    Example("sessionView.clearTerminal", _session(), RUN),
    Example("run.restart", _session(workflowMessageId="message-1"), RUN),
    Example("run.pause", {}, RUN, "Only a running run pauses; this one is still queued."),
    Example("run.resume", {}, RUN),
    Example(
        "checkpoint.answer",
        {"continuationRunId": "run-1-continued", "input": {"approved": True}},
        RUN,
        "Answers a run parked at an ordinary checkpoint.",
    ),
    Example(
        "decision.answer",
        {"requestId": "decision-1", "response": {"choice": "ship"}, "submissionId": "answer-1"},
    ),
    Example(
        "interaction.submit",
        {
            "attempt": "attempt-1",
            "requestId": "request-1",
            "submissionId": "submission-1",
            "value": {"answer": "yes"},
        },
        RUN,
        "Answers once the worker's verdict is recorded (`pwf request --wait-ms`).",
    ),
    Example(
        "interaction.update",
        {"attempt": "attempt-1", "requestId": "request-1", "value": {"update": {"progress": 1}}},
        RUN,
    ),
    Example(
        "view.runs.watch",
        {"limit": 10, "subscriptionId": "sub-runs"},
        note='The served host answers `{"subscribed":true}` and pushes `runs` events.',
    ),
    Example(
        "view.run.watch",
        {"subscriptionId": "sub-run"},
        RUN,
        'The served host answers `{"subscribed":true}` and pushes `run_snapshot` events.',
    ),
    Example(
        "view.run.unwatch",
        {"subscriptionId": "sub-run"},
        note='The served host answers `{"subscribed":false}`.',
    ),
    Example("channel.status", {}),
    *(
        Example(name, {}, RUN if name == "run.changeSettings" else None)
        for name in (
            "channel.reload",
            "channel.recover",
            "run.changeSettings",
            "session.record",
            "controller.list",
            "controller.get",
            "controller.apply",
            "controller.reconcile",
            "controller.delete",
        )
    ),
    Example("state.status", {}),
    Example("state.verify", {}),
    Example("state.backup", {"destination": f"{EXAMPLE_DIRECTORY}/backup.db"}),
    Example(
        "state.prune",
        {"before": "2026-07-01T00:00:00Z"},
        note="A dry run; `apply` true with a `backupPath` prunes.",
    ),
    Example("run.cancel", {}, RUN),
    Example("host.stop", {}, note="Recorded; only a served host stops on it."),
)
"""One example of every operation, in the order they run on one fresh database."""


def example_lines() -> list[bytes]:
    """The canonical request line of each example, in order."""
    lines = []
    for number, example in enumerate(EXAMPLES, 1):
        message: dict[str, object] = {
            "clientId": "cli-A",
            "idempotencyKey": f"k-{number}",
            "operation": example.operation,
            "payload": example.payload,
            "requestId": f"r-{number}",
            "schema": CLIENT_SCHEMA,
            "type": "request",
        }
        if example.run_id is not None:
            message["runId"] = example.run_id
        lines.append(canonical.encode(message))
    return lines


def run_examples(lines: list[bytes], directory: Path) -> list[bytes]:
    """Answer ``lines`` with ``pwf request`` on a fresh database in ``directory``; one answer each.

    The examples' directory (:data:`EXAMPLE_DIRECTORY`) is ``directory`` while
    they run, so nothing is written outside it.

    Raises:
        RuntimeError: ``pwf request`` failed, or did not answer every line.
    """
    here, there = EXAMPLE_DIRECTORY.encode(), os.fsencode(directory)
    stdin = b"".join(line.replace(here, there) + b"\n" for line in lines)
    database = directory / "state.db"
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PWF_")}
    environment["PWF_SEED"] = EXAMPLE_SEED
    pwf = [sys.executable, "-m", "pwf"]
    made = subprocess.run(  # noqa: S603 - this interpreter running pwf itself
        [*pwf, "init", "--db", str(database)], capture_output=True, env=environment, check=False
    )
    if made.returncode != 0:
        raise RuntimeError(f"pwf init failed for the examples: {made.stderr.decode()}")
    finished = subprocess.run(  # noqa: S603 - as above
        [*pwf, "request", "--db", str(database), "--at", str(EXAMPLE_AT)],
        input=stdin,
        capture_output=True,
        env={**environment, "PWF_DB": str(database)},
        check=False,
    )
    answers = finished.stdout.replace(there, here).splitlines()
    if finished.returncode != 0 or len(answers) != len(lines):
        raise RuntimeError(f"pwf request failed on the examples: {finished.stderr.decode()}")
    return answers


def normalised_answer(answer: bytes) -> dict[str, object]:
    """An answer with the members that count the file's bytes set to 0, for comparing."""
    value = json.loads(answer)

    def walk(item: object) -> object:
        if isinstance(item, dict):
            return {k: 0 if k in VARYING else walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    found = walk(value)
    assert isinstance(found, dict)
    return found


_DOC_HEAD: Final = f"""# Client operations

Every operation of `{CLIENT_SCHEMA}` with one request line and the answer it
gets. The lines run in this order on one fresh database, as below, and
`tests/cli/test_operations_doc.py` runs them again and compares every answer;
`pwf dev export` writes this page from them.

```sh
export PWF_SEED={EXAMPLE_SEED}              # the coordinator epoch below is derived from it
pwf init --db ops.db
# then each line below, in order:
echo '<request line>' | pwf request --db ops.db --at {EXAMPLE_AT}
```

`pwf schema OPERATION` prints the JSON Schema of an operation's payload and of
its receipt (the files in `schemas/`); `pwf schema` lists the operations. A
request's members are `schema`, `type`, `requestId`, `clientId`,
`idempotencyKey`, `operation`, `payload`, and `runId` and `expectedRevision`
where the operation reads them; hand-written JSON in any key order and
spacing is accepted with `pwf request --canonicalize` (and `pwf call
--canonicalize`). Answers are `accepted`, `adopted` (the same request again),
`rejected`, `conflict`, `notFound`, `claimLost` or `unavailable`; a receipt
comes with `accepted` and `adopted`. Operations the served host alone answers
(the subscriptions) answer `unavailable` here, in direct mode. The byte counts
of `state.status` and `state.prune` depend on the SQLite build.
"""


def operations_doc(answers: list[bytes]) -> str:
    """``docs/operations.md`` from the example lines and the answers they got."""
    parts = [_DOC_HEAD]
    for example, line, answer in zip(EXAMPLES, example_lines(), answers, strict=True):
        shown = answer.decode()
        parts.append(f"\n## `{example.operation}`\n\n")
        if example.note:
            parts.append(f"{example.note}\n\n")
        parts.append(
            f"```console\n$ echo '{line.decode()}' | pwf request --db ops.db --at {EXAMPLE_AT}\n"
            f"{shown}\n```\n"
        )
    return "".join(parts)


def _operations_doc() -> str:
    with tempfile.TemporaryDirectory(prefix="pwf-docs-") as scratch:
        return operations_doc(run_examples(example_lines(), Path(scratch)))


def expected_artifacts() -> dict[str, str]:
    """Relative path -> the exact text every generated file must have."""
    files = {"events/_envelope.schema.json": _schema_text(Envelope)}
    for cls in EVENT_TYPES:
        files[f"events/{cls.TAG}.schema.json"] = _schema_text(cls)
    files["projections/_pwf_store.sql"] = _ddl_text(SCHEMA)
    for projection in ReadModel(PROJECTIONS).projections:
        files[f"projections/{projection.NAME}.sql"] = _ddl_text(projection.DDL)
    assert set(OPERATION_TYPES) == OPERATIONS | VIEW_OPERATIONS
    assert {example.operation for example in EXAMPLES} == set(OPERATION_TYPES)
    for operation in sorted(OPERATION_TYPES):
        files[f"schemas/{operation}.schema.json"] = (
            json.dumps(operation_schema(operation), indent=2, sort_keys=True, ensure_ascii=False)
            + "\n"
        )
    files["docs/operations.md"] = _operations_doc()
    return files


def sync_artifacts(root: Path, *, check: bool) -> list[str]:
    """Write (or with ``check`` only compare) the artifacts under ``root``; return drifted paths."""
    drifted: list[str] = []
    for relative, text in expected_artifacts().items():
        path = root / relative
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        drifted.append(relative)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return drifted
