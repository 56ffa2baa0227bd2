"""``pwf log migrate --store``: a v1 shared log upgraded in one transaction and proven (ADR 0104).

The v1 shared log is made by hand (:mod:`tests._pg_v1`) from the events of
``tests/golden/main-before-0033.db.gz``, a v1 SQLite file written by an
older pwf; a copy of that file, tied to the shared log's id, stands for a
host's local file of that log.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Final

import psycopg
import pytest
from click.testing import CliRunner, Result

import pwf.store.postgres.migration
from pwf.cli import cli
from pwf.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests._pg_v1 import export_of, load_v1, rows_of
else:
    from _pg_v1 import export_of, load_v1, rows_of

GOLDEN: Final = Path(__file__).resolve().parents[1] / "golden" / "main-before-0033.db.gz"
HEAD_SEQ: Final = 448


def _pwf(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A fresh copy of the v1 SQLite file."""
    path = tmp_path / "golden.db"
    path.write_bytes(gzip.decompress(GOLDEN.read_bytes()))
    return path


@pytest.fixture
def v1_url(pg_url: str, golden: Path) -> str:
    """A v1 shared log holding the golden file's 448 events."""
    load_v1(pg_url, rows_of(golden))
    return pg_url


def _state(url: str) -> tuple[object, ...]:
    """Everything a migration could change in the shared log, to compare before and after."""
    with psycopg.connect(url, autocommit=True) as connection:
        tables = connection.execute(
            "SELECT table_name, table_type FROM information_schema.tables"
            " WHERE table_schema = 'public' ORDER BY table_name"
        ).fetchall()
        indexes = connection.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname"
        ).fetchall()
        meta = connection.execute("SELECT key, value FROM _pwf_meta ORDER BY key").fetchall()
        head = connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchall()
        tree = connection.execute("SELECT count(*), sum(pos) FROM _pwf_tree").fetchall()
    return tables, indexes, meta, head, tree, export_of(url)


def _local(golden: Path, url: str, path: Path) -> Path:
    """A host's local v1 file of the shared log at ``url``: the golden file, tied to the log."""
    path.write_bytes(golden.read_bytes())
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT value FROM _pwf_meta WHERE key = 'log_id'").fetchone()
    assert row is not None
    connection_ = sqlite3.connect(path)
    try:
        connection_.execute("INSERT INTO _pwf_meta (key, value) VALUES ('log_id', ?)", row)
        connection_.commit()
    finally:
        connection_.close()
    return path


def test_it_migrates_keeps_every_byte_and_proves_its_backup(v1_url: str, tmp_path: Path) -> None:
    before = export_of(v1_url)
    backup = tmp_path / "v1.jsonl"
    done = _pwf("log", "migrate", "--store", v1_url, "--backup", str(backup), "--json")
    assert 0 == done.exit_code, done.output
    report = json.loads(done.output)
    assert (HEAD_SEQ + 1, str(backup)) == (report["seq"], report["backup"])
    assert before == backup.read_bytes()
    assert 0o600 == stat.S_IMODE(backup.stat().st_mode)
    assert before.count(b"\n") == HEAD_SEQ
    after = export_of(v1_url)
    assert after.startswith(before)
    assert 1 == after[len(before) :].count(b"\n")
    migrated = json.loads(after[len(before) :])
    assert "log.migrated" == migrated["type"]
    assert {
        "backupHash": json.loads(before.splitlines()[-1])["contentHash"],
        "backupPath": str(backup.absolute()),
        "backupSeq": HEAD_SEQ,
        "backupSha256": report["backupSha256"],
        "fromFormat": "pwf.store.v1",
        "toFormat": "pwf.store.v2",
    } == migrated["data"]
    with psycopg.connect(v1_url, autocommit=True) as connection:
        kinds: dict[str, str] = dict(
            connection.execute(
                "SELECT table_name, table_type FROM information_schema.tables"
                " WHERE table_name IN ('events', '_pwf_events')"
            ).fetchall()
        )
        assert {"events": "VIEW", "_pwf_events": "BASE TABLE"} == kinds
    local = tmp_path / "a.db"
    for catch_up in (("--no-catch-up",), ()):  # proven against the shared log, not the file
        verified = _pwf(
            "log", "verify", "--store", v1_url, "--db", str(local), "--backup", str(backup),
            *catch_up,
        )  # fmt: skip
        assert 0 == verified.exit_code, verified.output
        assert f"each of {backup}'s {HEAD_SEQ} events is the event at its seq" in verified.output
    exported = _pwf("log", "export", "--store", v1_url, "--db", str(local))
    assert after == exported.stdout_bytes


def test_a_changed_backup_is_reported_bad(v1_url: str, tmp_path: Path) -> None:
    backup = tmp_path / "v1.jsonl"
    assert 0 == _pwf("log", "migrate", "--store", v1_url, "--backup", str(backup)).exit_code
    backup.write_bytes(backup.read_bytes().replace(b'"batch":3,', b'"batch":3 ,', 1))
    local = str(tmp_path / "a.db")
    proven = _pwf("log", "verify", "--store", v1_url, "--db", local, "--backup", str(backup))
    assert 1 == proven.exit_code
    assert "its SHA-256 is not the one log.migrated names" in proven.output


def test_a_v1_shared_log_is_refused_with_the_line_that_migrates_it(
    v1_url: str, tmp_path: Path
) -> None:
    before = _state(v1_url)
    for verb in (("log", "verify"), ("init",)):
        refused = _pwf(*verb, "--store", v1_url, "--db", str(tmp_path / "a.db"))
        assert 2 == refused.exit_code, verb
        assert "run `pwf log migrate --store URL --backup FILE`" in refused.output
        assert 1 == len(refused.output.strip().splitlines())
        assert before == _state(v1_url)


def test_an_existing_backup_is_refused_and_nothing_changes(v1_url: str, tmp_path: Path) -> None:
    before = _state(v1_url)
    backup = tmp_path / "taken"
    backup.write_bytes(b"mine")
    refused = _pwf("log", "migrate", "--store", v1_url, "--backup", str(backup))
    assert (2, b"mine") == (refused.exit_code, backup.read_bytes())
    assert f"{backup} exists" in refused.output
    assert before == _state(v1_url)


def test_without_a_backup_or_with_another_logs_file_nothing_changes(
    v1_url: str, golden: Path, tmp_path: Path
) -> None:
    before = _state(v1_url)
    refused = _pwf("log", "migrate", "--store", v1_url)
    assert 2 == refused.exit_code
    assert "--backup FILE is required with --store" in refused.output
    other = tmp_path / "other.db"
    other.write_bytes(golden.read_bytes())
    connection = sqlite3.connect(other)
    try:
        connection.execute("INSERT INTO _pwf_meta (key, value) VALUES ('log_id', 'another')")
        connection.commit()
    finally:
        connection.close()
    kept = other.read_bytes()
    backup = tmp_path / "v1.jsonl"
    refused = _pwf("log", "migrate", "--store", v1_url, "--backup", str(backup), "--db", str(other))
    assert 2 == refused.exit_code
    assert f"{other}: mirrors another log than" in refused.output
    assert (False, kept) == (backup.exists(), other.read_bytes())
    assert before == _state(v1_url)


def test_a_log_in_v2_is_not_migrated(pg_url: str, tmp_path: Path) -> None:
    assert 0 == _pwf("init", "--store", pg_url, "--db", str(tmp_path / "a.db")).exit_code
    before = _state(pg_url)
    backup = tmp_path / "v1.jsonl"
    refused = _pwf("log", "migrate", "--store", pg_url, "--backup", str(backup))
    assert 2 == refused.exit_code
    assert "already in format pwf.store.v2; nothing to migrate" in refused.output
    assert not backup.exists()
    assert before == _state(pg_url)


def test_a_migrated_log_is_not_migrated_again(v1_url: str, tmp_path: Path) -> None:
    first = tmp_path / "v1.jsonl"
    assert 0 == _pwf("log", "migrate", "--store", v1_url, "--backup", str(first)).exit_code
    before = _state(v1_url)
    again = _pwf("log", "migrate", "--store", v1_url, "--backup", str(tmp_path / "again"))
    assert 2 == again.exit_code
    assert "nothing to migrate" in again.output
    assert not (tmp_path / "again").exists()
    assert before == _state(v1_url)


def test_a_tampered_v1_log_is_not_migrated(v1_url: str, tmp_path: Path) -> None:
    with psycopg.connect(v1_url, autocommit=True) as connection:
        connection.execute(
            "UPDATE events SET body = convert_to(replace(convert_from(body, 'UTF8'),"
            " '\"batch\":', '\"batch\": '), 'UTF8') WHERE seq = 200"
        )
    before = _state(v1_url)
    backup = tmp_path / "v1.jsonl"
    refused = _pwf("log", "migrate", "--store", v1_url, "--backup", str(backup))
    assert 3 == refused.exit_code, refused.output
    assert "seq 200: the stored bytes do not match their content hash" in refused.output
    assert not backup.exists()
    assert before == _state(v1_url)


@pytest.fixture
def failing_late(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The migration fails once the new tables, the view and the format row are written."""

    def fail(*_args: object) -> None:
        raise StoreError("the machine went away")

    monkeypatch.setattr(pwf.store.postgres.migration, "_check_view", fail)
    yield
    monkeypatch.undo()


def test_a_failure_in_the_middle_leaves_the_v1_log_as_it_was(
    v1_url: str, tmp_path: Path, failing_late: None
) -> None:
    del failing_late
    before = _state(v1_url)
    backup = tmp_path / "v1.jsonl"
    failed = _pwf("log", "migrate", "--store", v1_url, "--backup", str(backup))
    assert 3 == failed.exit_code
    assert "the machine went away" in failed.output
    assert not backup.exists()
    assert before == _state(v1_url)
    with psycopg.connect(v1_url, autocommit=True) as connection:
        assert [(None,)] == connection.execute("SELECT to_regclass('_pwf_events')").fetchall()


def _digest(path: Path) -> str:
    digested = _pwf("digest", str(path), "--json")
    assert 0 == digested.exit_code, digested.output
    return str(json.loads(digested.output)["all"])


def test_hosts_local_files_are_re_created_from_the_migrated_log(
    v1_url: str, golden: Path, tmp_path: Path
) -> None:
    a = _local(golden, v1_url, tmp_path / "a.db")
    b = _local(golden, v1_url, tmp_path / "b.db")
    old_b = b.read_bytes()
    backup = tmp_path / "v1.jsonl"
    done = _pwf("log", "migrate", "--store", v1_url, "--backup", str(backup), "--db", str(a))
    assert 0 == done.exit_code, done.output
    assert f"re-created {a} from" in done.output
    assert f"({HEAD_SEQ + 1} events), the old file kept as {a}.v1-backup" in done.output
    assert golden.read_bytes() != a.read_bytes()
    # The second host's file is still the old one: refused with the line that re-creates it.
    refused = _pwf("status", "--store", v1_url, "--db", str(b))
    assert 2 == refused.exit_code
    assert f"re-create it from the shared log with `pwf log migrate --store URL --db {b}`" in (
        refused.output
    )
    assert old_b == b.read_bytes()
    recreated = _pwf("log", "migrate", "--store", v1_url, "--db", str(b))
    assert 0 == recreated.exit_code, recreated.output
    assert Path(f"{b}.v1-backup").read_bytes() == old_b
    # Each equals a SQLite replay of the migrated log's export.
    exported = tmp_path / "export.jsonl"
    shown = _pwf("log", "export", "--store", v1_url, "--db", str(a), "--out", str(exported))
    assert 0 == shown.exit_code
    imported = tmp_path / "imported.db"
    assert 0 == _pwf("log", "import", "--db", str(imported), str(exported)).exit_code
    replayed = tmp_path / "replayed.db"
    assert 0 == _pwf("replay", "--db", str(imported), "--out", str(replayed)).exit_code
    assert _digest(replayed) == _digest(a) == _digest(b)
    again = _pwf("log", "migrate", "--store", v1_url, "--db", str(b))
    assert 2 == again.exit_code
    assert f"{b} is already in format pwf.store.v2; nothing to re-create" in again.output
