"""``pwf session detach|expire|view`` and ``pwf query turns`` with an open turn."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pwf.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
if TYPE_CHECKING:
    from tests.integration._harness import Fixture
else:
    from _harness import Fixture

M1 = "workflow-message-ef38de41cf51c92267369039a7055ee78bd9045683835c11b94831c4844bdffa"


@pytest.fixture
def turning(tmp_path: Path) -> tuple[Path, str]:
    """Fixture F with a coordinator, M1 delivered and a step turn started at 5 000."""
    db = tmp_path / "s.db"
    fx = Fixture.f(db)
    watch = fx.request(
        "view.session.watch",
        {"sessionId": "s-1", "subscriptionId": "session-1", "coordinator": True},
        at=2000,
    )
    epoch = watch.receipt["coordinatorEpoch"]  # type: ignore[index]
    base = {"targetSessionId": "s-1", "coordinatorEpoch": epoch}
    entries = [{"workflowMessageId": M1, "piSessionEntryId": "e-1"}]
    fx.request(
        "workflowMessage.reportBranch",
        {**base, "entries": entries, "isIdle": False, "hasPendingMessages": False},
        at=3000,
    )
    turn = {**base, "workflowMessageId": M1, "runId": "run-1", "workflowTurnId": "t-1"}
    assert (
        "accepted"
        == fx.request("workflowTurn.report", {**turn, "state": "started"}, at=5000).outcome
    )
    fx.close()
    return db, epoch


def _pwf(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


class TestSessionVerbs:
    def test_detach_interrupts_the_open_turn(self, turning: tuple[Path, str]):
        """Detaching marks the attempt with an open step turn interrupted (§10.5)."""
        db, epoch = turning
        assert (0, "detached s-1\n") == _pwf(
            "session", "detach", "s-1", "--db", str(db), "--at", "40000"
        )
        code, out = _pwf("query", "turns", "--db", str(db), "--json")
        assert ("started", 0) == (json.loads(out)[0]["state"], code)
        assert (0, "no coordinator to detach for s-1\n") == _pwf(
            "session", "detach", "s-1", "--epoch", epoch, "--db", str(db)
        )

    def test_expire_begins_the_timeout_after_the_deadline(self, turning: tuple[Path, str]):
        """Before the deadline nothing expires; after it the run's timeout starts (§10.7)."""
        db, _ = turning
        assert (0, "no expired interactions\n") == _pwf(
            "session", "expire", "--db", str(db), "--at", "64999"
        )
        code, out = _pwf("session", "expire", "--db", str(db), "--at", "65000", "--json")
        assert (0, [{"runId": "run-1", "targetSessionId": "s-1"}]) == (code, json.loads(out))
        code, out = _pwf("query", "interactions", "--db", str(db), "--json")
        assert ["cancelled"] == [row["status"] for row in json.loads(out)]

    def test_view_prints_the_snapshot(self, turning: tuple[Path, str]):
        """``pwf session view`` names the live epoch and the open message M1; it appends nothing."""
        db, epoch = turning
        before = _pwf("log", "tail", "-n", "1", "--db", str(db), "--json")
        code, out = _pwf("session", "view", "s-1", "--epoch", epoch, "--db", str(db))
        snapshot = json.loads(out)
        assert (0, epoch, M1) == (code, snapshot["coordinatorEpoch"], snapshot["openMessageId"])
        assert before == _pwf("log", "tail", "-n", "1", "--db", str(db), "--json")

    def test_query_turns_table(self, turning: tuple[Path, str]):
        """The turns listing shows the started turn."""
        db, _ = turning
        code, out = _pwf("query", "turns", "--db", str(db))
        assert 0 == code
        assert "t-1" in out
        assert "started" in out
