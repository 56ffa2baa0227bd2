"""A database written before ADR 0033 verifies, rebuilds and takes new writes unchanged.

``tests/golden/main-before-0033.db.gz`` was written by pwf at commit 62dba64
(main before the command path wrote one head row and one checkpoint
statement per transaction): ``pwf init``, ``scripts/demo_traffic.py --runs 12
--seed 11`` and ``scripts/demo_session.py``, 448 events in 195 batches, then
checkpointed and vacuumed.  ``main-before-0033.digest`` is what ``pwf digest``
printed for it then.  Projections added after it was written are not in
it: the tests compare the tables it has, and give it the new ones with
``pwf rebuild`` before they compare the live tables with a rebuild.  The
file is committed rather than generated here because generating it here
would run today's command path, not that one.  It is in format
``pwf.store.v1``: this pwf refuses it until ``pwf log migrate`` upgrades it,
which adds one ``log.migrated`` event and keeps the old file as its backup
(ADR 0102).
"""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from click.testing import Result

    Run = Callable[..., Result]

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
RECORDED = (GOLDEN / "main-before-0033.digest").read_text().splitlines()
HEAD_SEQ = 448
"""The old log's head; ``log.migrated`` stands at the seq after it."""


def _golden(tmp_path: Path) -> Path:
    path = tmp_path / "legacy.db"
    path.write_bytes(gzip.decompress((GOLDEN / "main-before-0033.db.gz").read_bytes()))
    return path


@pytest.fixture
def legacy(tmp_path: Path, run: Run) -> Path:
    """A fresh copy of the database written before the change, migrated to this pwf's format."""
    path = _golden(tmp_path)
    migrated = run("log", "migrate", "--db", str(path))
    assert 0 == migrated.exit_code, migrated.output
    return path


def test_it_is_refused_until_migrated_then_proven_against_its_backup(
    run: Run, tmp_path: Path
) -> None:
    path = _golden(tmp_path)
    before = path.read_bytes()
    refused = run("log", "verify", "--db", str(path))
    assert 2 == refused.exit_code
    assert "run `pwf log migrate --db" in refused.output
    assert before == path.read_bytes()
    assert 0 == run("log", "migrate", "--db", str(path)).exit_code
    backup = path.with_name("legacy.db.v1-backup")
    kept = sqlite3.connect(backup)
    try:
        assert [("pwf.store.v1", HEAD_SEQ)] == kept.execute(
            "SELECT value, (SELECT count(*) FROM events) FROM _pwf_meta WHERE key = 'format'"
        ).fetchall()
    finally:
        kept.close()
    proven = run("log", "verify", "--db", str(path), "--backup", str(backup))
    assert 0 == proven.exit_code, proven.output
    assert f"each of {backup}'s {HEAD_SEQ} events is the event at its seq" in proven.output


def _checkpoints(path: Path) -> set[int]:
    connection = sqlite3.connect(path)
    try:
        return {row[0] for row in connection.execute("SELECT last_seq FROM _pwf_checkpoint")}
    finally:
        connection.close()


def _tables_then(run: Run, path: Path) -> list[str]:
    """``pwf digest`` lines of the tables the database had when it was written.

    Projections added since (a table the fixture lacks) are left out, and so
    is the line over all tables, which covers them too.
    """
    digested = run("digest", str(path))
    assert 0 == digested.exit_code, digested.output
    names = {line.split()[1] for line in RECORDED if not line.endswith("  all")}
    return [line for line in digested.output.splitlines() if line.split()[1] in names]


def test_it_verifies_and_digests_as_it_did(run: Run, legacy: Path) -> None:
    verified = run("log", "verify", "--db", str(legacy))
    assert (0, f"ok: {HEAD_SEQ + 1} events,") == (
        verified.exit_code,
        verified.output.split(" chain")[0],
    )
    assert RECORDED[:-1] == _tables_then(run, legacy)


_MESSAGE_COLUMNS: Final = (
    "SELECT workflow_message_id, run_id, target_session_id, kind, source_id, content_hash,"
    " order_number, status, pi_session_entry_id, created_at, updated_at"
    " FROM workflow_messages ORDER BY workflow_message_id"
)
"""``workflow_messages``' columns before ADR 0085 added each message's latest turn."""


def _messages(path: Path) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(_MESSAGE_COLUMNS).fetchall()
    finally:
        connection.close()


def test_it_rebuilds_to_the_same_digest(run: Run, legacy: Path) -> None:
    before = _messages(legacy)
    rebuilt = run("rebuild", "--db", str(legacy))
    assert 0 == rebuilt.exit_code, rebuilt.output
    # workflow_messages is at version 2 since ADR 0085 (its latest turn): its digest is new,
    # and its rows' earlier columns are what they were.
    changed = {"workflow_messages"}
    assert [line for line in RECORDED[:-1] if line.split()[1] not in changed] == [
        line for line in _tables_then(run, legacy) if line.split()[1] not in changed
    ]
    assert before == _messages(legacy)
    assert len(before) > 10
    assert {HEAD_SEQ + 1} == _checkpoints(legacy)
    verified = run("verify", "--db", str(legacy))
    assert 0 == verified.exit_code, verified.output


def test_new_writes_on_it_keep_live_equal_to_a_rebuild(
    run: Run, legacy: Path, client_line: Callable[..., bytes]
) -> None:
    assert 0 == run("rebuild", "--db", str(legacy)).exit_code  # adds projections made since
    lines = b"".join(client_line(n, at=1_785_800_000_000 + n) for n in range(101, 104))
    answered = run("request", "--db", str(legacy), stdin=lines)
    assert (0, 3) == (answered.exit_code, answered.output.count('"outcome":"accepted"'))
    assert {HEAD_SEQ + 1 + 6} == _checkpoints(legacy)
    verified = run("verify", "--db", str(legacy))
    assert 0 == verified.exit_code, verified.output
    assert 0 == run("log", "verify", "--db", str(legacy)).exit_code
