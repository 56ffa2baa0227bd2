"""``pwf status``'s overview (also ``state.status``'s and the web's) costs what it shows.

Its counts come from aggregates over work in progress and the ``runs`` read
model's kept totals (ADR 0094), its lists stop at their limit: a host whose
log holds thousands more finished runs and consumed interactions reads the
overview in as many SQLite steps as before them.
"""

from __future__ import annotations

import shutil
import sqlite3
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.status import overview
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration._harness import traffic_module
else:
    from _harness import traffic_module

COPIES = 200
"""How many times the finished runs and consumed interactions are copied."""
KEYS = frozenset({"run_id", "request_id", "attempt_id"})
"""The columns a copied row gets new values of (the unique ones)."""
FINISHED = "status IN ('completed', 'failed', 'timed_out', 'cancelled') AND parent_run_id IS NULL"
FINISHED_ENTRY = (
    "status IN ('done', 'failed', 'cancelled')"  # noqa: S608 - constants
    f" AND run_id IN (SELECT run_id FROM runs WHERE {FINISHED})"
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of the demo traffic with sessions, some runs and interactions still open."""
    db = tmp_path_factory.mktemp("overview") / "state.db"
    result = CliRunner().invoke(cli, ["init", "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    traffic = traffic_module().Traffic(str(db), 5, sessions=True)
    traffic.batch(range(1, 25))
    traffic.store.close()
    return db


def _columns(connection: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]


def _copied(connection: sqlite3.Connection, table: str, where: str, copy: int) -> None:
    """Insert the rows of ``table`` matching ``where`` again, every unique id made new."""
    columns = _columns(connection, table)
    chosen = ", ".join(f"'c{copy}-' || {c}" if c in KEYS else c for c in columns)
    connection.execute(
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {chosen} FROM {table}"  # noqa: S608 - names from the schema
        f" WHERE ({where}) AND {columns[0]} NOT LIKE 'c%'"
    )


def _steps(db: Path, now: int) -> tuple[int, object]:
    """SQLite's virtual-machine steps of one overview, and the overview."""
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0

    with SqliteStore(db, read_only=True) as store:
        store.connection.set_progress_handler(tick, 1)
        found = overview(store, now)
        store.connection.set_progress_handler(None, 0)
    return counted[0], found


def test_the_overview_costs_the_same_with_thousands_more_finished_runs_and_answers(
    seeded: Path, tmp_path: Path
) -> None:
    db = tmp_path / "grown.db"
    shutil.copy(seeded, db)
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        now = int(connection.execute("SELECT max(at) FROM events").fetchone()[0])
        consumed = connection.execute(
            "SELECT count(*) FROM interactive_requests WHERE consumed_at IS NOT NULL"
        ).fetchone()[0]
        assert consumed > 5
    finally:
        connection.close()
    before, shown = _steps(db, now)
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        connection.execute("BEGIN")
        for copy in range(COPIES):
            _copied(connection, "runs", FINISHED, copy)
            _copied(
                connection,
                "run_queue",
                FINISHED_ENTRY,
                copy,
            )
            _copied(
                connection,
                "interactive_requests",
                "status = 'settled' AND consumed_at IS NOT NULL",
                copy,
            )
        connection.execute("COMMIT")
        grown = connection.execute(
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM interactive_requests)"
        ).fetchone()
    finally:
        connection.close()
    assert grown[0] > 2_000
    assert grown[1] > 1_000
    after, again = _steps(db, now)
    assert again == shown  # the copies are finished and consumed: nothing the overview shows
    assert after <= before + 50, (before, after)
