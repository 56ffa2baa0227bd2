"""The crash tests' comparison of files: any change a check could see makes the contents differ.

A killed command's copy whose :func:`contents` equal those of a file
already checked is not checked again (ADR 0064), so the comparison must
miss nothing that ``pwf verify`` reads: the log, its head, the
projections, the schema and the header.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Final

import pytest
from click.testing import CliRunner

from pwf.cli import cli

if TYPE_CHECKING:
    from pathlib import Path

    from tests._dbfile import change, checkpoint
    from tests.reliability._reliability import AT, START, contents, init, request_line
else:
    from _reliability import AT, START, contents, init, request_line

    from _dbfile import change, checkpoint

EDITS: Final = {
    "one byte of an event": "UPDATE events SET body = CAST(replace(CAST(body AS TEXT),"
    " '\"run-1\"', '\"run-2\"') AS BLOB) WHERE seq = 1",
    "the head row": "UPDATE _pwf_head SET batch = batch + 1",
    "one projection row": "UPDATE runs SET status_detail = 'edited by hand' WHERE rowid = 1",
    "a projection row fewer": "DELETE FROM runs WHERE rowid = 1",
    "the checkpoint": "UPDATE _pwf_checkpoint SET last_seq = last_seq + 1",
    "the header": "PRAGMA application_id = 7",
    "the schema": "DROP VIEW readable_events",
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database holding one started run, written through the command line."""
    path = tmp_path / "state.db"
    init(path)
    line = request_line("run.start", {**START, "originSessionId": "s-1"}, rid="r-1", run_id="run-1")
    done = CliRunner().invoke(
        cli, ["request", "--db", str(path), "--at", str(AT)], input=line + b"\n"
    )
    assert done.exit_code == 0, done.output
    checkpoint(path)
    return path


def test_a_copy_has_the_same_contents(db: Path, tmp_path: Path) -> None:
    """A byte-for-byte copy compares equal, so an untouched killed copy is recognised."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(db, copy)
    assert contents(copy) == contents(db)
    assert contents(db)["table _pwf_events"], "the log is in the comparison"


@pytest.mark.parametrize("edit", list(EDITS))
def test_any_change_a_check_reads_makes_them_differ(db: Path, tmp_path: Path, edit: str) -> None:
    """An edited event, head, projection, header or schema: the contents differ."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(db, copy)
    change(copy, EDITS[edit])
    assert contents(copy) != contents(db), edit
