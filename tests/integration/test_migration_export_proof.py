"""A shared log's migration backup is its export: what ``prove_backup`` finds in one (ADR 0104).

The log here is a SQLite file imported from the events of
``tests/golden/main-before-0033.db.gz``; a ``log.migrated`` event naming
each backup's SHA-256 is appended before it is proven, so the proof gets
past the SHA-256 to the lines themselves.
"""

from __future__ import annotations

import gzip
import hashlib
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from pwf.events import LogMigrated
from pwf.host import DIRECT_ACTOR
from pwf.store.jsonl import import_jsonl
from pwf.store.migration import prove_backup
from pwf.store.schema import FORMAT, FORMAT_V1
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Iterator

GOLDEN: Final = Path(__file__).resolve().parents[1] / "golden" / "main-before-0033.db.gz"
HEAD_SEQ: Final = 448


@pytest.fixture
def export(tmp_path: Path) -> bytes:
    """The golden log's export: each event's bytes and a newline."""
    path = tmp_path / "golden.db"
    path.write_bytes(gzip.decompress(GOLDEN.read_bytes()))
    connection = sqlite3.connect(path)
    try:
        bodies = connection.execute("SELECT body FROM events ORDER BY seq").fetchall()
    finally:
        connection.close()
    return b"".join(bytes(body) + b"\n" for (body,) in bodies)


@pytest.fixture
def log(tmp_path: Path, export: bytes) -> Iterator[SqliteStore]:
    """A log holding the export's events."""
    source = tmp_path / "export.jsonl"
    source.write_bytes(export)
    with SqliteStore(tmp_path / "log.db", create=True) as store:
        with source.open("rb") as lines:
            import_jsonl(store, lines)
        yield store


def _named(log: SqliteStore, backup: Path, export: bytes) -> None:
    """Append ``log.migrated`` naming ``backup``'s SHA-256 and the export's head."""
    last = export.splitlines()[-1]
    head = last.split(b'"contentHash":"')[1][:64].decode()
    event = LogMigrated(
        from_format=FORMAT_V1,
        to_format=FORMAT,
        backup_path=str(backup),
        backup_sha256=hashlib.sha256(backup.read_bytes()).hexdigest(),
        backup_seq=HEAD_SEQ,
        backup_hash=head,
    )
    with log.transaction() as tx:
        tx.append([event], at=1_800_000_000_000, actor=DIRECT_ACTOR)


def _proof(log: SqliteStore, tmp_path: Path, export: bytes, lines: bytes) -> str | None:
    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(lines)
    _named(log, backup, export)
    proof = prove_backup(log, backup)
    assert proof.migrated is not None
    return proof.failure


def test_the_export_itself_is_proven(log: SqliteStore, tmp_path: Path, export: bytes) -> None:
    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(export)
    _named(log, backup, export)
    proof = prove_backup(log, backup)
    assert (HEAD_SEQ, None) == (proof.backup_events, proof.failure)


def test_a_changed_line_is_not_sound(log: SqliteStore, tmp_path: Path, export: bytes) -> None:
    lines = export.splitlines(keepends=True)
    lines[199] = lines[199].replace(b'"batch":', b'"batch": ', 1)
    failure = _proof(log, tmp_path, export, b"".join(lines))
    assert failure is not None
    assert failure.startswith("its event at seq 200 is not sound")


def test_a_short_export_does_not_reach_the_head(
    log: SqliteStore, tmp_path: Path, export: bytes
) -> None:
    lines = export.splitlines(keepends=True)
    failure = _proof(log, tmp_path, export, b"".join(lines[:-1]))
    assert "its head is not the one log.migrated names" == failure


def test_lines_out_of_order_do_not_link(log: SqliteStore, tmp_path: Path, export: bytes) -> None:
    lines = export.splitlines(keepends=True)
    lines[10], lines[11] = lines[11], lines[10]
    failure = _proof(log, tmp_path, export, b"".join(lines))
    assert failure is not None
    assert failure.startswith("its event at seq 11 is not sound")


def test_a_line_without_its_newline(log: SqliteStore, tmp_path: Path, export: bytes) -> None:
    failure = _proof(log, tmp_path, export, export[:-1])
    assert f"its line for seq {HEAD_SEQ} has no newline" == failure
