"""``bench/storage.py``: marginal bytes by B-tree and WAL pages per commit, on tiny databases.

The benchmarks' figures for issue 31 (bytes on disk and WAL per request)
rest on these helpers; here each is checked against a database whose
answer is known by construction.  The module is loaded from the repository
root, as the benchmarks load it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

PAGE: Final = 1024


@pytest.fixture
def storage(bench: Callable[[str], Any]) -> Any:
    return bench("storage")


def _database(path: Path) -> sqlite3.Connection:
    """A WAL database with a log table, a log index and a projection table with an index."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(f"PRAGMA page_size = {PAGE}")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA wal_autocheckpoint = 0")
    connection.execute("CREATE TABLE event_rows (seq INTEGER PRIMARY KEY, body BLOB)")
    connection.execute("CREATE INDEX rows_by_body ON event_rows (body)")
    connection.execute("CREATE TABLE _pwf_head (id INTEGER PRIMARY KEY, seq INTEGER)")
    connection.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, status TEXT)")
    connection.execute("CREATE INDEX runs_status ON runs (status)")
    return connection


def _insert(connection: sqlite3.Connection, first: int, count: int, *, runs: bool) -> None:
    """``count`` transactions, each one log row (and one run row when ``runs``)."""
    for n in range(first, first + count):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO event_rows VALUES (?, ?)", (n, b"x" * 300 + b"%d" % n))
        if runs:
            connection.execute("INSERT INTO runs VALUES (?, 'queued')", (f"run-{n:06}",))
        connection.execute("COMMIT")


def test_kind_names_the_log_by_its_tables(storage: Any) -> None:
    for table in ("events", "event_rows", "event_batches", "_pwf_head", "_pwf_checkpoint"):
        assert "log" == storage.kind(table)
    for table in ("blobs", "runs", "host_commands", "eventsx", "my_events"):
        assert "projections" == storage.kind(table)
    assert "sqlite" == storage.kind("sqlite_schema")


def test_wal_frames_count_pages_after_the_header(storage: Any) -> None:
    assert 0 == storage.wal_frames(0, 4096)
    assert 0 == storage.wal_frames(32, 4096)
    assert 3 == storage.wal_frames(32 + 3 * (4096 + 24), 4096)
    with pytest.raises(ValueError, match="not a WAL"):
        storage.wal_frames(32 + 4096, 4096)


def test_layout_sums_each_btree_and_the_file(storage: Any, tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    connection = _database(path)
    _insert(connection, 0, 40, runs=True)
    shown = storage.layout(path)
    assert 0 == path.with_name("db.sqlite-wal").stat().st_size  # checkpointed, truncated
    assert PAGE == shown.page_size
    assert shown.file_bytes == path.stat().st_size
    assert shown.tables["rows_by_body"] == "event_rows"
    assert shown.tables["runs_status"] == "runs"
    kinds = shown.by_kind()
    log = ("event_rows", "rows_by_body", "_pwf_head")
    assert kinds["log"] == sum(shown.btrees[name] for name in log)
    assert kinds["log"] > 40 * 300  # every row's body, in the table and in its index
    assert kinds["projections"] == sum(
        shown.btrees[name] for name in ("runs", "runs_status", "sqlite_autoindex_runs_1")
    )
    free = connection.execute("PRAGMA freelist_count").fetchone()[0] * PAGE
    assert free == kinds["free"]
    assert shown.file_bytes == sum(kinds.values())
    connection.close()


def test_marginal_is_the_growth_per_request(storage: Any, tmp_path: Path) -> None:
    """Only log rows between the layouts: the projections cost nothing more."""
    path = tmp_path / "db.sqlite"
    connection = _database(path)
    _insert(connection, 0, 50, runs=True)
    first = storage.layout(path)
    _insert(connection, 50, 100, runs=False)
    second = storage.layout(path)
    connection.close()
    grown = storage.marginal(first, second, 100)
    assert 100 == grown.requests
    assert (second.file_bytes - first.file_bytes) / 100 == grown.file
    assert 0 == grown.kinds["projections"]
    assert grown.kinds["log"] > 2 * 300  # the body twice: row and index entry
    assert grown.file == pytest.approx(sum(grown.kinds.values()))
    with pytest.raises(ValueError, match="at least one request"):
        storage.marginal(first, second, 0)


def test_commits_and_the_btrees_each_wrote(storage: Any, tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    connection = _database(path)
    _insert(connection, 0, 3, runs=True)
    wal = Path(f"{path}-wal")
    before = wal.stat().st_size
    _insert(connection, 3, 2, runs=False)
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("UPDATE runs SET status = 'running' WHERE run_id = 'run-000001'")
    connection.execute("COMMIT")
    image = wal.read_bytes()
    owners = storage.page_owners(connection)
    tables = dict(connection.execute("SELECT name, tbl_name FROM sqlite_schema"))
    connection.close()

    assert 5 + 3 + 3 == len(storage.commits(image, PAGE))  # the schema's five, then ours
    found = storage.commits(image, PAGE, storage.wal_frames(before, PAGE))
    assert 3 == len(found)
    written = [storage.touched(pages, owners, tables) for pages in found]
    for each in written[:2]:
        assert {"event_rows", "rows_by_body"} == each["log"]
        assert "projections" not in each
    assert {"runs", "runs_status"} == written[2]["projections"]  # the key's index is untouched
    assert "log" not in written[2]
    assert len(image) == 32 + sum(map(len, storage.commits(image, PAGE))) * (PAGE + 24)


def test_statement_part_sorts_by_the_table_written(storage: Any) -> None:
    part = storage.statement_part
    assert "control" == part("BEGIN IMMEDIATE")
    assert "control" == part("  commit")
    assert "control" == part("SAVEPOINT s1")
    assert "log" == part("INSERT INTO events (seq) VALUES (?)")
    assert "log" == part("INSERT INTO event_rows (seq) VALUES (?)")
    assert "log" == part("INSERT INTO main._pwf_events (seq) VALUES (?)")  # named by its schema
    assert "projections" == part("INSERT INTO main.runs (run_id) VALUES (?)")
    assert "log" == part(
        "INSERT INTO _pwf_head (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET seq = 2"
    )
    assert "log" == part("UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection IN (?)")
    assert "projections" == part("INSERT OR IGNORE INTO runs_totals VALUES (1)")
    assert "projections" == part('UPDATE "runs" SET status = ?')
    assert "projections" == part("DELETE FROM run_queue WHERE run_id = ?")
    assert "projections" == part("REPLACE INTO blobs VALUES (?)")
    assert "read" == part("SELECT seq FROM _pwf_head")
