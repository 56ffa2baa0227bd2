"""The blobs folded again alone are the blobs a fold of the log makes (ADR 0107).

A host on a shared log folds its ``blobs`` table again after a prune took
events' bytes (:func:`pwf.fold.rebuild.refold_blobs`); the prune tests of
the shared log check it across hosts.  Here on one file: whatever the table
held, the refold leaves it as ``pwf rebuild`` makes it, and touches no other
table.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from click.testing import CliRunner

from pwf.cli import cli
from pwf.diff import digest_database
from pwf.fold.rebuild import refold_blobs
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _log(db: Path, client_line: Callable[..., bytes]) -> None:
    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2, 3))
    lines += client_line(1, "run.cancel", at=4000) + client_line(3, "run.status", at=5000)
    runner = CliRunner()
    assert 0 == runner.invoke(cli, ["init", "--db", str(db)]).exit_code
    done = runner.invoke(cli, ["request", "--db", str(db)], input=lines)
    assert 0 == done.exit_code, done.output


def _refolded(db: Path) -> int:
    with SqliteStore(db, hooks=[ReadModel()]) as store:
        return refold_blobs(store)


def test_a_refold_of_whole_blobs_changes_no_byte(
    tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    db = tmp_path / "pwf.db"
    _log(db, client_line)
    before = digest_database(db)
    assert _refolded(db) > 0
    assert digest_database(db) == before


def test_lost_rows_and_wrong_dates_come_back_as_the_fold_makes_them(
    tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    db = tmp_path / "pwf.db"
    _log(db, client_line)
    before = digest_database(db)
    connection = sqlite3.connect(db)
    with connection:
        connection.execute("DELETE FROM blobs WHERE rowid % 2 = 0")
        connection.execute("UPDATE blobs SET created_at = created_at + 1")
        connection.execute(
            "INSERT INTO blobs VALUES (zeroblob(32), 'text/plain', 1, CAST('x' AS BLOB), 7)"
        )
    connection.close()
    assert digest_database(db) != before
    _refolded(db)
    assert digest_database(db) == before
    rebuilt = CliRunner().invoke(cli, ["verify", "--db", str(db)])
    assert 0 == rebuilt.exit_code, rebuilt.output
