"""``pwf explain interaction|run`` on situations built with ``pwf request`` and ``pwf worker``.

Requests go in as canonical client lines, worker messages as canonical
worker lines after ``pwf worker launch``; the diagnosis is read back with
``--json`` (ADR 0016).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner, Result

from pwf import canonical
from pwf.cli import cli
from pwf.commands.ids import message_id

if TYPE_CHECKING:
    from pathlib import Path

RUN = "run-1"
SESSION = "s-1"
REQUEST = "interaction-run-1-attempt-1"
M1 = message_id("step", REQUEST, "1:initial")
START = {
    "projectPath": "/p",
    "workflowName": "echo",
    "workflowSourceRef": "builtin:echo",
    "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
    "definitionDigest": "d1",
    "definitionSnapshot": {},
    "input": {},
    "originSessionId": SESSION,
}


class Pwf:
    """One database driven through the command line, with a clock and counters."""

    def __init__(self, db: Path) -> None:
        self.db = str(db)
        self.runner = CliRunner()
        self.requests = 0
        self.messages = 0
        self.epoch = ""
        self.generation = 0
        assert 0 == self("init").exit_code

    def __call__(self, *args: str, stdin: bytes | None = None) -> Result:
        return self.runner.invoke(
            cli, [*args, "--db", self.db], input=stdin, catch_exceptions=False
        )

    def request(self, operation: str, payload: object, at: int, **members: Any) -> dict[str, Any]:
        """One ``pwf request`` line; the parsed response."""
        self.requests += 1
        line = {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": f"r-{self.requests}",
            "clientId": "cli-A",
            "operation": operation,
            "idempotencyKey": f"k-{self.requests}",
            "payload": payload,
            **members,
        }
        result = self("request", "--at", str(at), stdin=canonical.encode(line) + b"\n")
        assert 0 == result.exit_code, result.output
        response: dict[str, Any] = json.loads(result.stdout)
        return response

    def launch(self, at: int) -> None:
        """``pwf worker launch``: the new epoch and generation become current."""
        result = self("worker", "launch", RUN, "--at", str(at))
        assert 0 == result.exit_code, result.output
        envelope = json.loads(result.stdout)
        self.epoch, self.generation = envelope["workerEpoch"], envelope["generation"]

    def revision(self) -> int:
        result = self("query", "runs", "--run", RUN, "--json")
        return int(json.loads(result.stdout)[0]["revision"])

    def worker(self, operation: str, payload: object, at: int, **members: Any) -> dict[str, Any]:
        """One ``pwf worker`` line from the current worker; it must be accepted."""
        self.messages += 1
        line = {
            "schema": "pi-workflows.worker-message.v1",
            "launchSchema": "pi-workflows.worker-launch.v1",
            "messageId": f"m-{self.messages}",
            "kind": "worker.progress",
            "operation": operation,
            "runId": RUN,
            "generation": self.generation,
            "workerEpoch": self.epoch,
            "expectedRevision": members.pop("rev", None) or self.revision(),
            "payload": payload,
            **members,
        }
        result = self("worker", "--at", str(at), stdin=canonical.encode(line) + b"\n")
        assert 0 == result.exit_code, result.output
        response: dict[str, Any] = json.loads(result.stdout)
        assert "accepted" == response["outcome"], response
        return response

    def explain(self, *args: str) -> dict[str, Any]:
        """``pwf explain ... --json``, parsed."""
        result = self("explain", *args, "--json")
        assert 0 == result.exit_code, result.output
        assert result.stdout.endswith("\n")
        value: dict[str, Any] = json.loads(result.stdout)
        assert canonical.encode(value).decode() + "\n" == result.stdout
        return value

    def rules(self, *args: str) -> list[tuple[str, int]]:
        return [(f["rule"], f["sinceSeq"]) for f in self.explain(*args)["diagnosis"]]

    def seq(self, event_type: str) -> int:
        """The seq of the newest event of a type, from ``pwf log show --json``."""
        result = self("log", "show", "--type", event_type, "--json")
        return int(json.loads(result.stdout.splitlines()[-1])["seq"])

    def session(self, operation: str, payload: dict[str, Any], epoch: str, at: int) -> None:
        base = {"targetSessionId": SESSION, "coordinatorEpoch": epoch}
        response = self.request(operation, {**base, **payload}, at)
        assert "accepted" == response["outcome"], response


@pytest.fixture
def pwf(tmp_path: Path) -> Pwf:
    """run-1 parked on its request, M1 pending, no coordinator: all through the command line."""
    driver = Pwf(tmp_path / "state.db")
    assert "accepted" == driver.request("run.start", START, 1000, runId=RUN)["outcome"]
    driver.launch(1000)
    driver.worker("worker.ready", {}, 1000, rev=0)
    driver.worker(
        "node.started", {"nodeId": "ask", "timeoutMs": 60000}, 1000, attemptId="attempt-1"
    )
    driver.worker(
        "interaction.request", {"contract": {"prompt": "Say hi"}}, 1000, attemptId="attempt-1"
    )
    return driver


def _watch(pwf: Pwf, at: int) -> str:
    response = pwf.request(
        "view.session.watch",
        {"coordinator": True, "sessionId": SESSION, "subscriptionId": "session-1"},
        at,
    )
    return str(response["receipt"]["coordinatorEpoch"])


def _report(pwf: Pwf, epoch: str, entries: dict[str, str], at: int) -> None:
    listed = [{"workflowMessageId": m, "piSessionEntryId": e} for m, e in entries.items()]
    pwf.session(
        "workflowMessage.reportBranch",
        {"entries": listed, "isIdle": False, "hasPendingMessages": False},
        epoch,
        at,
    )


class TestDiagnosisThroughTheCommandLine:
    """The coordinator, delivery and turn rules, step by step."""

    def test_from_no_coordinator_to_an_open_turn(self, pwf: Pwf) -> None:
        """Each step of the session moves the diagnosis to the next rule."""
        created = pwf.seq("message.created")
        assert [("no-coordinator", created)] == pwf.rules("interaction", REQUEST)

        epoch = _watch(pwf, 2000)
        assert [("branch-not-reported", pwf.seq("session.coordinator_attached"))] == pwf.rules(
            "interaction", REQUEST
        )

        _report(pwf, epoch, {}, 2500)
        assert [("message-not-delivered", created)] == pwf.rules("interaction", REQUEST)

        _report(pwf, epoch, {M1: "e-1"}, 3000)
        assert [("awaiting-turn", pwf.seq("message.sent"))] == pwf.rules("interaction", REQUEST)

        turn = {"workflowMessageId": M1, "runId": RUN, "workflowTurnId": "t-1", "state": "started"}
        pwf.session("workflowTurn.report", turn, epoch, 5000)
        started = pwf.seq("turn.started")
        assert [("turn-open", started)] == pwf.rules("interaction", REQUEST)
        assert [
            ("turn-open", started),
            ("deadline-expired", pwf.seq("attempt.deadline_shifted")),
        ] == pwf.rules("interaction", REQUEST, "--now", "65000")

        run = pwf.explain("run", RUN)
        [finding] = run["diagnosis"]
        assert ("parked-on-interaction", REQUEST) == (finding["rule"], finding["requestId"])
        assert [("turn-open", started)] == [
            (inner["rule"], inner["sinceSeq"]) for inner in finding["diagnosis"]
        ]

    def test_times_in_a_diagnosis_follow_the_time_format(self, pwf: Pwf) -> None:
        """ "turn t-1 started at 5000" prints as a time; --json keeps the number (ADR 0079)."""
        epoch = _watch(pwf, 2000)
        _report(pwf, epoch, {M1: "e-1"}, 3000)
        turn = {"workflowMessageId": M1, "runId": RUN, "workflowTurnId": "t-1", "state": "started"}
        pwf.session("workflowTurn.report", turn, epoch, 5000)
        args = ("interaction", REQUEST, "--now", "65000")
        iso = pwf("explain", *args, "--time-format", "iso").stdout
        diagnosis = iso[iso.index("diagnosis:") :]
        assert "turn t-1 started at 1970-01-01T00:00:05.000Z and has not ended" in diagnosis
        assert "passed at 1970-01-01T00:01:05.000Z with a started turn" in diagnosis
        assert "5000" not in diagnosis
        timeline = iso[iso.index("timeline:") : iso.index("diagnosis:")]
        assert "deadline 1970-01-01T00:01:01.000Z" in timeline  # attempt.started's deadline
        raw = pwf("explain", *args, "--time-format", "raw").stdout
        assert "turn t-1 started at 5000 and has not ended" in raw
        [opened, expired] = pwf.explain(*args)["diagnosis"]
        assert "turn t-1 started at 5000 and has not ended" == opened["summary"]
        assert [5000] == opened["times"]
        assert 65000 in expired["times"]
        status = pwf("status", "--now", "65000", "--time-format", "iso").stdout
        assert "turn t-1 started at 1970-01-01T00:00:05.000Z" in status

    def test_paused(self, pwf: Pwf) -> None:
        """run.pause through pwf request: the interaction and the run say run-paused."""
        assert "accepted" == pwf.request("run.pause", {}, 2000, runId=RUN)["outcome"]
        paused = pwf.seq("run.paused")
        assert [("run-paused", paused)] == pwf.rules("interaction", REQUEST)
        assert [("run-paused", paused)] == pwf.rules("run", RUN)

    def test_validation_and_settlement_with_at(self, pwf: Pwf) -> None:
        """A submission waits for a worker, the worker accepts it; --at shows the earlier state."""
        submit = {
            "requestId": REQUEST,
            "attempt": "attempt-1",
            "step": "ask",
            "submissionId": "sub-1",
            "value": {"reply": "x"},
        }
        response = pwf.request("interaction.submit", submit, 3000, runId=RUN, expectedRevision=1)
        assert "unavailable" == response["outcome"], response
        recorded = pwf.seq("submission.recorded")
        assert [("validating-awaiting-worker", recorded)] == pwf.rules("interaction", REQUEST)
        [parked] = pwf.explain("run", RUN)["diagnosis"]
        assert ["validating-awaiting-worker"] == [inner["rule"] for inner in parked["diagnosis"]]

        pwf.launch(3500)
        pwf.worker("worker.ready", {}, 3500, rev=0)
        before = pwf.seq("run.started")
        pwf.worker("interaction.accept", {}, 3600)
        settled = pwf.seq("interaction.settled")
        assert [("settled-awaiting-worker", settled)] == pwf.rules("interaction", REQUEST)
        assert [("validating-in-worker", recorded)] == pwf.rules(
            "interaction", REQUEST, "--at", str(before)
        )
        assert [("validating-awaiting-worker", recorded)] == pwf.rules(
            "interaction", REQUEST, "--at", str(recorded)
        )

        pwf.worker("node.finished", {"output": {"reply": "x"}}, 3700, attemptId="attempt-1")
        assert [("consumed", pwf.seq("interaction.consumed"))] == pwf.rules("interaction", REQUEST)


class TestOutput:
    """Human output, errors, read-only use."""

    def test_human_output(self, pwf: Pwf) -> None:
        """Header, state, one timeline line per event with its cause, then the diagnosis."""
        result = pwf("explain", "interaction", REQUEST)
        assert 0 == result.exit_code
        lines = result.stdout.splitlines()
        assert lines[0].startswith(f"interaction {REQUEST} at seq ")
        assert "state:" in lines
        timeline = lines[lines.index("timeline:") + 1 : lines.index("diagnosis:")]
        assert len(timeline) == len(pwf.explain("interaction", REQUEST)["timeline"])
        assert "interaction.requested" in timeline[1]
        assert timeline[1].endswith(f"<- interaction.request {pwf.epoch}/m-3")
        created = pwf.seq("message.created")
        expected = (
            f"  no-coordinator: step message {M1[17:29]} is pending but session s-1 has no"
            f" coordinator attached: open session s-1 in pi so its coordinator attaches"
            f" (a view.session.watch with coordinator true) (since seq {created})"
        )
        assert [expected] == lines[lines.index("diagnosis:") + 1 :]

    def test_human_run_output_nests_the_interaction(self, pwf: Pwf) -> None:
        """The run's finding is followed by its interaction's findings, indented."""
        result = pwf("explain", "run", RUN)
        tail = result.stdout.splitlines()[-2:]
        assert tail[0].startswith("  parked-on-interaction: the run waits on interaction ")
        assert tail[1].startswith("    no-coordinator: ")

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("interaction", "nope"), "Error: no interaction nope in the log"),
            (("run", "run-9"), "Error: no run run-9 in the log"),
            (
                ("interaction", REQUEST, "--at", "2"),
                f"Error: no interaction {REQUEST} in the log at seq 2",
            ),
            (("run", RUN, "--at", "999"), "Error: the log ends at seq"),
        ],
    )
    def test_unknown_ids_exit_2(self, pwf: Pwf, args: tuple[str, ...], message: str) -> None:
        """One line on stderr and exit 2."""
        result = pwf("explain", *args)
        assert 2 == result.exit_code
        assert result.stderr.startswith(message)
        assert 1 == len(result.stderr.splitlines())

    def test_explaining_appends_nothing(self, pwf: Pwf) -> None:
        """The log is the same before and after."""
        before = pwf("log", "show", "--json").stdout
        pwf("explain", "interaction", REQUEST)
        pwf("explain", "run", RUN, "--at", "5")
        assert before == pwf("log", "show", "--json").stdout
