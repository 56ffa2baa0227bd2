"""``pwf.explain``: every diagnosis rule built through the command path (ADR 0016).

Each test drives the situation with client requests and worker messages
(the Host code ``pwf request`` and ``pwf worker`` run) and checks the rule
names and the seq since which each holds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from pwf import canonical
from pwf.commands.ids import message_id
from pwf.errors import InputError
from pwf.explain import INTERACTION_RULES, RUN_RULES, explain_interaction, explain_run

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import (
        ATTEMPT,
        M1,
        REQUEST,
        RUN,
        SESSION,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        interactive_run,
        turn,
        watch,
    )

    from pwf.explain import Explanation
else:
    from _harness import (
        ATTEMPT,
        M1,
        REQUEST,
        RUN,
        SESSION,
        Fixture,
        branch,
        coordinate,
        finish_fixture_run,
        interactive_run,
        turn,
        watch,
    )

M2 = message_id("step", REQUEST, "2:reminder")
M3 = message_id("step", REQUEST, "3:reminder")


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Fixture]:
    """run-1 held by worker w-1 with attempt-1 running."""
    fixture = Fixture.running(tmp_path / "r.db")
    yield fixture
    fixture.close()


def _seq(fx: Fixture, event_type: str, **fields: object) -> int:
    """The seq of the newest event of ``event_type`` whose data members equal ``fields``."""
    found = [
        entry.seq
        for entry in fx.store.entries()
        if entry.type == event_type
        and all(getattr(entry.event, name) == value for name, value in fields.items())
    ]
    assert found, (event_type, fields)
    return found[-1]


def _json(explanation: Explanation) -> dict[str, object]:
    """The explanation as ``--json`` prints it."""
    value = json.loads(canonical.encode(explanation))
    assert isinstance(value, dict)
    return value


def _rules(explanation: Explanation) -> list[tuple[str, int | None]]:
    diagnosis = _json(explanation)["diagnosis"]
    assert isinstance(diagnosis, list)
    return [(finding["rule"], finding.get("sinceSeq")) for finding in diagnosis]


def _why(
    fx: Fixture, request: str = REQUEST, *, at_seq: int | None = None, now: int | None = None
) -> list[tuple[str, int | None]]:
    return _rules(explain_interaction(fx.store, request, at_seq, now))


def _why_run(
    fx: Fixture, run_id: str = RUN, *, now: int | None = None
) -> list[tuple[str, int | None]]:
    return _rules(explain_run(fx.store, run_id, now=now))


def _open_turn(fx: Fixture) -> str:
    """Coordinate with M1 delivered at 2 000 and start step turn t-1 at 5 000; the epoch."""
    epoch = coordinate(fx, {M1: "e-1"}, at=2000)
    assert "accepted" == turn(fx, epoch, M1, "t-1", at=5000).outcome
    return epoch


def _submitted(fx: Fixture) -> None:
    response = fx.submit({"reply": "x"}, at=3000)
    assert "unavailable" == response.outcome, response


# --------------------------------------------------------------------------- interaction rules


class TestInteractionRules:
    """One situation per rule; the rule names and since-seqs are the JSON contract."""

    def test_no_coordinator(self, fx: Fixture) -> None:
        """M1 is pending and session s-1 never had a coordinator: since M1 was created."""
        assert [("no-coordinator", _seq(fx, "message.created"))] == _why(fx)

    def test_no_coordinator_since_the_detach(self, fx: Fixture) -> None:
        """A coordinator that went away later moves the since-seq to its detach."""
        watch(fx, at=2000)
        assert fx.host.detach(SESSION, 3000)
        assert [("no-coordinator", _seq(fx, "session.coordinator_detached"))] == _why(fx)

    def test_branch_not_reported(self, fx: Fixture) -> None:
        """A coordinator is attached but has not reported its branch: since the attach."""
        watch(fx, at=2000)
        assert [("branch-not-reported", _seq(fx, "session.coordinator_attached"))] == _why(fx)

    def test_message_not_delivered(self, fx: Fixture) -> None:
        """The coordinator reported a branch without M1, the session's next message."""
        coordinate(fx, at=2000)
        assert [("message-not-delivered", _seq(fx, "message.created"))] == _why(fx)

    def test_message_blocked(self, fx: Fixture) -> None:
        """run-2's step message waits behind run-1's earlier M1."""
        mine = interactive_run(fx, "run-2", at=1500)
        coordinate(fx, at=2000)
        rules = _why(fx, "interaction-run-2-attempt-run-2")
        created = _seq(fx, "message.created", workflow_message_id=mine)
        assert [("message-blocked", created)] == rules
        assert [("message-not-delivered", _seq(fx, "message.created", source_id=REQUEST))] == _why(
            fx
        )

    def test_awaiting_turn(self, fx: Fixture) -> None:
        """M1 is on the branch and no turn is open: since it was sent."""
        coordinate(fx, {M1: "e-1"}, at=2000)
        assert [("awaiting-turn", _seq(fx, "message.sent"))] == _why(fx)

    def test_turn_open(self, fx: Fixture) -> None:
        """A step turn started and never ended: since turn.started."""
        _open_turn(fx)
        assert [("turn-open", _seq(fx, "turn.started"))] == _why(fx)

    def test_attempt_interrupted(self, fx: Fixture) -> None:
        """The coordinator left during the turn: the attempt is interrupted, the turn still open."""
        _open_turn(fx)
        assert fx.host.detach(SESSION, 6000)
        interrupted = _seq(fx, "attempt.changed", status="interrupted")
        assert [
            ("attempt-interrupted", interrupted),
            ("turn-open", _seq(fx, "turn.started")),
        ] == _why(fx)

    def test_run_paused(self, fx: Fixture) -> None:
        """run.pause on the parked run: since run.paused."""
        assert "accepted" == fx.request("run.pause", run_id=RUN, at=2000).outcome
        assert [("run-paused", _seq(fx, "run.paused"))] == _why(fx)

    def test_validating_awaiting_worker(self, fx: Fixture) -> None:
        """A validating submission and no worker: since submission.recorded."""
        _submitted(fx)
        assert [("validating-awaiting-worker", _seq(fx, "submission.recorded"))] == _why(fx)

    def test_validating_in_worker(self, fx: Fixture) -> None:
        """Once a worker holds the run the submission is validated there."""
        _submitted(fx)
        fx.validate(at=3500)
        assert [("validating-in-worker", _seq(fx, "submission.recorded"))] == _why(fx)

    def test_settled_awaiting_worker(self, fx: Fixture) -> None:
        """The worker accepted the submission: the request is settled, the node not finished."""
        _submitted(fx)
        fx.validate(at=3500)
        fx.ok("interaction.accept", {})
        assert [("settled-awaiting-worker", _seq(fx, "interaction.settled"))] == _why(fx)

    def test_consumed(self, fx: Fixture) -> None:
        """The node finished with the answer: done."""
        _submitted(fx)
        fx.validate(at=3500)
        fx.ok("interaction.accept", {})
        fx.ok("node.finished", {"output": {"reply": "x"}}, attempt=ATTEMPT)
        assert [("consumed", _seq(fx, "interaction.consumed"))] == _why(fx)

    def test_cancelled_unproductive(self, fx: Fixture) -> None:
        """Three unproductive turns cancel the request and fail the run."""
        epoch = coordinate(fx, {M1: "e-1"}, at=2000)
        turn(fx, epoch, M1, "t-1", at=3000)
        turn(fx, epoch, M1, "t-1", stop="completed", response="e-2", at=4000)
        branch(fx, epoch, {M1: "e-1", M2: "e-3"}, at=5000)
        turn(fx, epoch, M2, "t-2", at=6000)
        turn(fx, epoch, M2, "t-2", stop="error", at=7000)
        branch(fx, epoch, {M1: "e-1", M2: "e-3", M3: "e-4"}, at=8000)
        turn(fx, epoch, M3, "t-3", at=9000)
        turn(fx, epoch, M3, "t-3", stop="completed", response="e-5", at=10000)
        assert [("cancelled-unproductive", _seq(fx, "interaction.cancelled"))] == _why(fx)

    def test_cancelled_timeout(self, fx: Fixture) -> None:
        """Expiry after the deadline began the timeout."""
        _open_turn(fx)
        assert [(RUN, SESSION)] == fx.host.expire(65000)
        assert [("cancelled-timeout", _seq(fx, "interaction.cancelled"))] == _why(fx)

    def test_cancelled_run_ended(self, fx: Fixture) -> None:
        """run.cancel ends the run and cancels its pending request."""
        assert "accepted" == fx.request("run.cancel", run_id=RUN, at=2000).outcome
        assert [("cancelled-run-ended", _seq(fx, "interaction.cancelled"))] == _why(fx)

    def test_deadline_expired(self, fx: Fixture) -> None:
        """At the shifted deadline with t-1 open, expiry would begin the timeout."""
        _open_turn(fx)
        shifted = _seq(fx, "attempt.deadline_shifted")
        assert [("turn-open", _seq(fx, "turn.started"))] == _why(fx, now=64999)
        assert [
            ("turn-open", _seq(fx, "turn.started")),
            ("deadline-expired", shifted),
        ] == _why(fx, now=65000)

    def test_deadline_passed_no_turn(self, fx: Fixture) -> None:
        """The deadline passed but no step turn started, so expiry cannot begin."""
        assert [
            ("no-coordinator", _seq(fx, "message.created")),
            ("deadline-passed-no-turn", _seq(fx, "attempt.started")),
        ] == _why(fx, now=61000)
        assert [] == fx.host.expire(61000)


# --------------------------------------------------------------------------- run rules


class TestRunRules:
    """The first run rule that holds is the run's diagnosis."""

    def test_queued_awaiting_worker(self, tmp_path: Path) -> None:
        """A started run that no worker claimed yet."""
        fixture = Fixture(tmp_path / "q.db")
        try:
            fixture.start(at=1000)
            assert [("queued-awaiting-worker", _seq(fixture, "run.reserved"))] == _why_run(fixture)
        finally:
            fixture.close()

    def test_worker_holds_run(self, running: Fixture) -> None:
        """A live lease: since the event that set it."""
        [(rule, since)] = _why_run(running)
        assert "worker-holds-run" == rule
        assert since is not None
        assert since >= _seq(running, "run.claimed")

    def test_worker_lease_expired(self, running: Fixture) -> None:
        """At the lease's end the worker no longer holds the run."""
        queue = running.row("run_queue", run_id=RUN)
        assert queue is not None
        [(rule, _)] = _why_run(running, now=queue["lease_expires_at"])
        assert "worker-lease-expired" == rule

    def test_parked_on_interaction(self, fx: Fixture) -> None:
        """The run waits on its request, whose own diagnosis is included."""
        explanation = _json(explain_run(fx.store, RUN))
        assert [
            {
                "diagnosis": [
                    {
                        "rule": "no-coordinator",
                        "sinceSeq": _seq(fx, "message.created"),
                        "summary": "step message ef38de41cf51 is pending but session s-1 has"
                        " no coordinator attached: open session s-1 in pi so its coordinator"
                        " attaches (a view.session.watch with coordinator true)",
                    }
                ],
                "requestId": REQUEST,
                "rule": "parked-on-interaction",
                "sinceSeq": _seq(fx, "interaction.requested"),
                "summary": f"the run waits on interaction {REQUEST}",
            }
        ] == explanation["diagnosis"]

    def test_parked_at_checkpoint(self, running: Fixture) -> None:
        """run.park waits for checkpoint.answer."""
        running.ok("run.park", {"checkpoint": "review"})
        assert [("parked-at-checkpoint", _seq(running, "run.waiting"))] == _why_run(running)

    def test_continued(self, running: Fixture) -> None:
        """A checkpoint answered: the parent's queue is done for its continuation."""
        running.ok("run.park", {"checkpoint": "review"})
        answer = running.request(
            "checkpoint.answer", {"continuationRunId": "cont-1", "input": {}}, RUN, at=2000
        )
        assert "accepted" == answer.outcome
        since = _seq(running, "run.queue_done_for_continuation")
        assert [("continued", since)] == _why_run(running)
        assert [("queued-awaiting-worker", _seq(running, "run.reserved"))] == _why_run(
            running, "cont-1"
        )

    def test_run_paused(self, fx: Fixture) -> None:
        """A paused run says so before anything else."""
        fx.request("run.pause", run_id=RUN, at=2000)
        assert [("run-paused", _seq(fx, "run.paused"))] == _why_run(fx)

    def test_terminal(self, fx: Fixture) -> None:
        """A finished run names its status and its terminal message."""
        finish_fixture_run(fx, at=3000)
        explanation = explain_run(fx.store, RUN)
        [finding] = explanation.diagnosis
        assert ("terminal", _seq(fx, "run.finished")) == (finding.rule, finding.since_seq)
        assert finding.summary.startswith("the run ended failed (terminal message ")
        assert finding.summary.endswith(" pending)")


# --------------------------------------------------------------------------- timeline, --at


class TestTimeline:
    """What touched the request, in seq order, with batch, time and cause."""

    def test_the_types_of_a_small_flow(self, fx: Fixture) -> None:
        """Request, delivery, one turn, a submission accepted by a worker, the node finished."""
        epoch = _open_turn(fx)
        turn(fx, epoch, M1, "t-1", stop="completed", response="e-2", at=6000)
        fx.submit({"reply": "x"}, key="tool-2", submission="sub-2", rev=2, at=7000)
        fx.validate(at=7000)
        fx.ok("interaction.accept", {})
        fx.ok("node.finished", {"output": {"reply": "x"}}, attempt=ATTEMPT)
        explanation = explain_interaction(fx.store, REQUEST)
        assert [
            "attempt.started",
            "interaction.requested",
            "message.created",
            "attempt.changed",
            "run.waiting",
            "worker.ended",
            "session.coordinator_attached",
            "message.sent",
            "session.branch_reported",
            "attempt.deadline_shifted",
            "turn.started",
            "turn.ended",
            "interaction.revised",
            "message.created",
            "submission.recorded",
            "run.claimed",
            "run.started",
            "submission.finished",
            "interaction.settled",
            "message.cancelled",
            "attempt.changed",
            "interaction.consumed",
        ] == [item.type for item in explanation.timeline]
        seqs = [item.seq for item in explanation.timeline]
        assert sorted(seqs) == seqs
        by_type = {item.type: item for item in explanation.timeline}
        assert (
            "deadline 61000 -> 65000 (+4000, turn.start)"
            == by_type["attempt.deadline_shifted"].summary
        )
        assert "revision 2 (reminder), unproductive 1" == by_type["interaction.revised"].summary
        assert "interaction.submit" == by_type["submission.recorded"].cause.operation  # type: ignore[union-attr]
        assert ("w-3", "interaction.accept") == (
            by_type["interaction.settled"].cause.worker_epoch,  # type: ignore[union-attr]
            by_type["interaction.settled"].cause.operation,  # type: ignore[union-attr]
        )
        assert [("consumed", _seq(fx, "interaction.consumed"))] == _rules(explanation)

    def test_state_lists_messages_with_their_keys(self, fx: Fixture) -> None:
        """Messages carry their idempotency key, turns and the coordinator are shown."""
        epoch = _open_turn(fx)
        turn(fx, epoch, M1, "t-1", stop="completed", response="e-2", at=6000)
        state = _json(explain_interaction(fx.store, REQUEST))["state"]
        assert isinstance(state, dict)
        assert [("1:initial", "sent"), ("2:reminder", "pending")] == [
            (message["key"], message["status"]) for message in state["messages"]
        ]
        assert [("t-1", "ended", "completed")] == [
            (t["workflowTurnId"], t["state"], t["stopReason"]) for t in state["turns"]
        ]
        assert state["coordinator"]["branchReported"] is True
        assert M2 == state["nextMessageId"]

    def test_state_members_keep_their_names_and_order(self, fx: Fixture) -> None:
        """Rows show their columns camelCased, in a fixed order; ``status_detail`` as ``detail``."""
        state = explain_interaction(fx.store, REQUEST).state
        request, run = state["request"], state["run"]
        assert isinstance(request, dict)
        assert isinstance(run, dict)
        assert [
            "requestId", "runId", "attemptId", "targetSessionId", "kind", "revision", "status",
            "unproductiveTurnEnds", "acceptedSubmissionId", "createdAt", "settledAt", "consumedAt",
        ] == list(request)  # fmt: skip
        assert [
            "runId", "status", "paused", "detail", "originSessionId", "parentRunId", "queue"
        ] == list(run)  # fmt: skip
        assert ["status", "generation", "ownerWorkerEpoch", "leaseExpiresAt"] == list(run["queue"])


class TestAtSeq:
    """--at folds the log up to a seq and explains as of then."""

    def test_the_diagnosis_moves_with_the_seq(self, fx: Fixture) -> None:
        """Before the worker: awaiting it; with it: in it; after the acceptance: settled."""
        _submitted(fx)
        recorded = _seq(fx, "submission.recorded")
        fx.validate(at=3500)
        claimed = _seq(fx, "run.claimed", worker_epoch="w-2")
        fx.ok("interaction.accept", {})
        settled = _seq(fx, "interaction.settled")
        head = fx.store.head().seq
        assert [("validating-awaiting-worker", recorded)] == _why(fx, at_seq=claimed - 1)
        assert [("validating-in-worker", recorded)] == _why(fx, at_seq=settled - 1)
        assert [("settled-awaiting-worker", settled)] == _why(fx, at_seq=head)
        assert [("settled-awaiting-worker", settled)] == _why(fx)

    def test_a_seq_inside_a_batch_explains_the_state_before_it(self, fx: Fixture) -> None:
        """The interaction.request batch is whole or absent: inside it the request is unknown."""
        created = _seq(fx, "message.created")
        requested = _seq(fx, "interaction.requested")
        with pytest.raises(InputError, match=rf"^no interaction {REQUEST} in the log at seq"):
            explain_interaction(fx.store, REQUEST, created)
        assert requested - 1 == explain_run(fx.store, RUN, created).at_seq

    def test_the_timeline_stops_at_the_seq(self, fx: Fixture) -> None:
        """Events after the seq are not shown; ``now`` is the time of that seq."""
        coordinate(fx, {M1: "e-1"}, at=2000)
        recorded = _seq(fx, "worker.message_recorded", operation="interaction.request")
        explanation = explain_interaction(fx.store, REQUEST, recorded)
        assert (recorded, 1000) == (explanation.at_seq, explanation.now)
        assert _seq(fx, "worker.ended") == explanation.timeline[-1].seq
        assert [("no-coordinator", _seq(fx, "message.created"))] == _rules(explanation)

    def test_at_the_head_equals_live(self, fx: Fixture) -> None:
        """Folding the whole log explains exactly what the live projections explain."""
        _open_turn(fx)
        head = fx.store.head().seq
        assert explain_interaction(fx.store, REQUEST, head) == explain_interaction(
            fx.store, REQUEST
        )
        assert explain_run(fx.store, RUN, head) == explain_run(fx.store, RUN)

    def test_unknown_ids_and_seqs(self, fx: Fixture) -> None:
        """An unknown id, an id not yet in the log at a seq, or a seq past the head: InputError."""
        with pytest.raises(InputError, match=r"^no interaction nope in the log$"):
            explain_interaction(fx.store, "nope")
        with pytest.raises(InputError, match=rf"^no interaction {REQUEST} in the log at seq 3$"):
            explain_interaction(fx.store, REQUEST, 3)
        with pytest.raises(InputError, match=r"^no run run-9 in the log$"):
            explain_run(fx.store, "run-9")
        with pytest.raises(InputError, match="the log ends at seq"):
            explain_run(fx.store, RUN, 10_000)


def test_the_rule_lists_are_unique_and_documented() -> None:
    """Every rule name appears once per list and in ADR 0016."""
    from pathlib import Path  # noqa: PLC0415 - only this test reads the ADR

    adr = (Path(__file__).resolve().parents[2] / "docs/adr/0016-explain-rules.md").read_text()
    for rules in (INTERACTION_RULES, RUN_RULES):
        names = [name for name, _, _ in rules]
        assert len(set(names)) == len(names)
        for name in names:
            assert f"`{name}`" in adr
