"""A decision run in a savepoint: which errors are refusals, and what a refusal undoes."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.errors import CommandError
from pwf.events import Actor, Cause, RunPaused
from pwf.host._context import context, guarded
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.store import StoreTransaction

ACTOR = Actor(type="system", id="host")


def _paused_then(tx: StoreTransaction, error: BaseException) -> object:
    """Stage one event, then fail with ``error``."""
    ctx = context(tx, 1000, ACTOR, Cause(operation="run.pause"))
    ctx.emit(RunPaused(run_id="run-1", paused_at=1000))
    raise error


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (CommandError("Run is not pausable"), "Run is not pausable"),
        (
            sqlite3.IntegrityError("UNIQUE constraint failed: runs.run_id"),
            "Workflow state constraint failed: UNIQUE constraint failed: runs.run_id",
        ),
    ],
)
def test_a_refusal_is_returned_and_its_events_are_undone(
    tmp_path: Path, error: Exception, text: str
) -> None:
    """A ``CommandError`` or a constraint that fired comes back as the refusal; nothing is kept."""
    with SqliteStore(tmp_path / "pwf.db", create=True) as store:
        with store.transaction() as tx:
            refused = guarded(tx, lambda: _paused_then(tx, error))
        assert isinstance(refused, CommandError)
        assert text == str(refused)
        assert 0 == store.head().seq


def test_a_result_is_returned_and_its_events_are_kept(tmp_path: Path) -> None:
    """A decision that does not fail keeps what it staged."""
    with SqliteStore(tmp_path / "pwf.db", create=True) as store:
        with store.transaction() as tx:
            ctx = context(tx, 1000, ACTOR, Cause(operation="run.pause"))
            kept = guarded(tx, lambda: ctx.emit(RunPaused(run_id="run-1", paused_at=1000)))
        assert not isinstance(kept, CommandError)
        assert 1 == store.head().seq


def test_any_other_error_ends_the_transaction(tmp_path: Path) -> None:
    """An error that is no refusal is raised, and the transaction keeps nothing."""
    bug = RuntimeError("a decider's bug")
    with SqliteStore(tmp_path / "pwf.db", create=True) as store:
        with pytest.raises(RuntimeError, match="a decider's bug"), store.transaction() as tx:
            guarded(tx, lambda: _paused_then(tx, bug))
        assert 0 == store.head().seq
