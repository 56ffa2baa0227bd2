"""``pwf status``: counts, waiting runs and interactions with their diagnosis, contradictions."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.cli.test_cli_explain import REQUEST, RUN, START, Pwf
else:
    from test_cli_explain import REQUEST, RUN, START, Pwf

NOW = 61_000


@pytest.fixture
def parked(tmp_path: Path) -> Pwf:
    """run-1 parked on its request with no coordinator (as in the explain tests)."""
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


def _status(pwf: Pwf, *args: str) -> dict[str, Any]:
    result = pwf("status", "--now", str(NOW), "--json", *args)
    assert 0 == result.exit_code, result.output
    value: dict[str, Any] = json.loads(result.stdout)
    return value


def _at(pwf: Pwf, seq: int) -> int:
    [line] = pwf("log", "show", "--from", str(seq), "--to", str(seq), "--json").stdout.splitlines()
    return int(json.loads(line)["at"])


class TestWaiting:
    """Every waiting item carries the explain diagnosis, its since seq and how long ago."""

    def test_the_parked_run_and_its_interaction(self, parked: Pwf) -> None:
        found = _status(parked)
        [run] = found["runs"]
        [interaction] = found["interactions"]
        run_rules = parked.explain("run", RUN, "--now", str(NOW))["diagnosis"]
        request_rules = parked.explain("interaction", REQUEST, "--now", str(NOW))["diagnosis"]
        assert run_rules == run["diagnosis"]
        assert request_rules == interaction["diagnosis"]
        assert ("run", RUN, "parked-on-interaction") == (run["subject"], run["id"], run["rule"])
        assert ("interaction", REQUEST, "no-coordinator", RUN) == (
            interaction["subject"],
            interaction["id"],
            interaction["rule"],
            interaction["runId"],
        )
        since = parked.seq("message.created")
        assert since == interaction["sinceSeq"]
        assert _at(parked, since) == interaction["sinceAt"]
        assert NOW - interaction["sinceAt"] == interaction["waitingMs"]
        assert NOW == found["now"]

    def test_counts_are_host_status_plus_contradictions(self, parked: Pwf) -> None:
        receipt = parked.request("host.status", {}, NOW)["receipt"]
        counts = _status(parked)["counts"]
        assert {**receipt, "lifecycleContradictions": 0} == counts

    def test_a_finished_interaction_is_not_waiting(self, parked: Pwf) -> None:
        assert "accepted" == parked.request("run.cancel", {}, 2000, runId=RUN)["outcome"]
        found = _status(parked)
        assert [] == found["interactions"]
        assert [] == found["runs"]

    def test_human_output(self, parked: Pwf) -> None:
        result = parked("status", "--now", "1970-01-01T00:01:01Z", "--time-format", "iso")
        assert 0 == result.exit_code, result.output
        lines = result.stdout.splitlines()
        since = parked.seq("message.created")
        assert f"  {REQUEST} pending: no-coordinator since seq {since}" in "\n".join(lines)
        assert "1970-01-01T00:00:01.000Z, 1m)" in result.stdout
        assert "lifecycle contradictions: none" == lines[-1]
        assert "now 1970-01-01T00:01:01.000Z" in lines[0]

    def test_status_appends_nothing(self, parked: Pwf) -> None:
        before = parked("log", "show", "--json").stdout
        parked("status")
        assert before == parked("log", "show", "--json").stdout


def _pair(db: Path, run_status: str, queue_status: str) -> None:
    """Set run-1's status and queue status by hand (``finished_at`` as the CHECK wants)."""
    connection = sqlite3.connect(db)
    try:
        finished = None if run_status in ("queued", "running") else 1
        connection.execute("UPDATE runs SET status = ?, finished_at = ?", (run_status, finished))
        connection.execute("UPDATE run_queue SET status = ?", (queue_status,))
        connection.commit()
    finally:
        connection.close()


class TestContradictions:
    """Run/queue pairs outside the allowed table (HOST §3.1) exit 1."""

    @pytest.mark.parametrize(
        ("run_status", "queue_status"),
        [("queued", "running"), ("completed", "parked"), ("timed_out", "cancelled")],
    )
    def test_contradiction_exits_1(
        self, parked: Pwf, tmp_path: Path, run_status: str, queue_status: str
    ) -> None:
        _pair(tmp_path / "state.db", run_status, queue_status)
        result = parked("status", "--now", str(NOW), "--json")
        assert 1 == result.exit_code
        found = json.loads(result.stdout)
        assert [{"queueStatus": queue_status, "runId": RUN, "runStatus": run_status}] == found[
            "contradictions"
        ]
        assert 1 == found["counts"]["lifecycleContradictions"]
        human = parked("status", "--now", str(NOW))
        assert 1 == human.exit_code
        assert (
            f"  {RUN}: run {run_status} with queue {queue_status}" == human.stdout.splitlines()[-1]
        )

    @pytest.mark.parametrize(
        ("run_status", "queue_status"),
        [
            ("queued", "queued"),
            ("running", "starting"),
            ("running", "running"),
            ("running", "parked"),
            ("waiting", "parked"),
            ("completed", "done"),
            ("failed", "failed"),
            ("timed_out", "failed"),
            ("cancelled", "cancelled"),
        ],
    )
    def test_the_allowed_table(
        self, parked: Pwf, tmp_path: Path, run_status: str, queue_status: str
    ) -> None:
        _pair(tmp_path / "state.db", run_status, queue_status)
        result = parked("status", "--now", str(NOW), "--json")
        assert 0 == result.exit_code, result.output
        assert [] == json.loads(result.stdout)["contradictions"]


def test_library_function_is_importable_outside_the_cli(parked: Pwf, tmp_path: Path) -> None:
    """``pwf.status.overview`` answers the same as the command, for served and web callers."""
    from pwf import canonical  # noqa: PLC0415
    from pwf.status import overview  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    with SqliteStore(tmp_path / "state.db", read_only=True) as store:
        found = overview(store, NOW)
    assert json.loads(canonical.encode(found)) == _status(parked)


def test_the_reference_sample_is_reproduced(tmp_path: Path) -> None:
    """The ``pwf status`` sample of docs/reference.md is this situation's output, line for line."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "reference.md").read_text(
        encoding="utf-8"
    )
    command = "$ pwf status --now 2026-08-01T16:05:00Z\n"
    block = readme[readme.index(command) + len(command) :]
    expected = block[: block.index("```")]
    driver = Pwf(tmp_path / "state.db")
    driver.request("run.start", START, 1_785_600_000_000, runId=RUN)
    driver.launch(1_785_600_000_000)
    driver.worker("worker.ready", {}, 1_785_600_000_000, rev=0)
    started = {"nodeId": "ask", "timeoutMs": 600_000}
    driver.worker("node.started", started, 1_785_600_001_000, attemptId="attempt-1")
    contract = {"contract": {"prompt": "Say hi"}}
    driver.worker("interaction.request", contract, 1_785_600_002_000, attemptId="attempt-1")
    result = driver("status", "--now", "2026-08-01T16:05:00Z", "--time-format", "iso")
    assert expected == result.stdout


@pytest.fixture
def crowded(parked: Pwf) -> Pwf:
    """run-1 parked on its interaction, and five more runs queued behind it."""
    for number in range(2, 7):
        start = {**START, "originSessionId": f"s-{number}"}
        started = parked.request("run.start", start, 2000 + number, runId=f"run-{number}")
        assert "accepted" == started["outcome"]
    return parked


class TestCountsAndLists:
    """Each list is counted in full by status, cut at --limit, and says how many more (ADR 0079)."""

    def test_the_count_above_a_list_is_the_list(self, crowded: Pwf) -> None:
        found = _status(crowded, "--all")
        assert {"queued": 5, "waiting": 1} == found["openRuns"]
        assert 6 == len(found["runs"])
        assert {"pending": 1} == found["openInteractions"]
        assert 1 == len(found["interactions"])
        # waitingRuns (host.status) counts the runs whose status is waiting, a part of the list.
        assert 1 == found["counts"]["waitingRuns"]
        human = crowded("status", "--now", str(NOW), "--all").stdout
        assert "runs not ended: 6 (queued 5, waiting 1)" in human.splitlines()
        assert "interactions not consumed: 1 (pending 1)" in human.splitlines()
        assert "waiting runs" not in human

    def test_the_list_is_cut_at_the_limit_and_says_how_many_more(self, crowded: Pwf) -> None:
        found = _status(crowded, "--limit", "2")
        assert ["run-1", "run-2"] == [item["id"] for item in found["runs"]]
        assert 6 == sum(found["openRuns"].values())
        assert 2 == found["limit"]
        human = crowded("status", "--now", str(NOW), "--limit", "2").stdout.splitlines()
        at = human.index("runs not ended: 6 (queued 5, waiting 1)")
        listed = [line for line in human[at:] if line.startswith("  run-")]
        assert 2 == len(listed)
        assert "  … and 4 more (--limit N or --all to list them)" in human

    def test_the_default_limit_bounds_the_json(self, crowded: Pwf) -> None:
        from pwf.status import LIMIT  # noqa: PLC0415

        for number in range(7, LIMIT + 4):
            start = {**START, "originSessionId": f"s-{number}"}
            crowded.request("run.start", start, 3000 + number, runId=f"run-{number}")
        found = _status(crowded)
        assert LIMIT == len(found["runs"])
        assert LIMIT + 3 == sum(found["openRuns"].values())
        assert LIMIT + 3 == len(_status(crowded, "--all")["runs"])

    def test_the_streamed_json_is_the_canonical_encoding(
        self, crowded: Pwf, tmp_path: Path
    ) -> None:
        from pwf import canonical  # noqa: PLC0415
        from pwf.status import overview  # noqa: PLC0415
        from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

        printed = crowded("status", "--now", str(NOW), "--json", "--limit", "3").stdout_bytes
        with SqliteStore(tmp_path / "state.db", read_only=True) as store:
            expected = canonical.encode(overview(store, NOW, 3)) + b"\n"
        assert expected == printed

    def test_contradictions_are_counted_in_full_and_listed_to_the_limit(
        self, crowded: Pwf, tmp_path: Path
    ) -> None:
        connection = sqlite3.connect(tmp_path / "state.db")
        try:
            connection.execute("UPDATE run_queue SET status = 'running' WHERE run_id != 'run-1'")
            connection.commit()
        finally:
            connection.close()
        result = crowded("status", "--now", str(NOW), "--json", "--limit", "2")
        assert 1 == result.exit_code
        found = json.loads(result.stdout)
        assert 5 == found["counts"]["lifecycleContradictions"]
        assert 2 == len(found["contradictions"])
        human = crowded("status", "--now", str(NOW), "--limit", "2").stdout.splitlines()
        assert "lifecycle contradictions: 5" in human
        assert "  … and 3 more (--limit N or --all to list them)" == human[-1]


def test_the_lists_are_read_one_item_at_a_time(
    crowded: Pwf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--all`` holds one diagnosed item at a time: items are diagnosed as they are written."""
    import pwf.status  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    diagnosed: list[str] = []
    real = pwf.status.diagnose_run  # type: ignore[attr-defined]

    def counting(*args: Any) -> Any:
        diagnosed.append(args[2]["run_id"])
        return real(*args)

    monkeypatch.setattr(pwf.status, "diagnose_run", counting)
    with (
        SqliteStore(tmp_path / "state.db", read_only=True) as store,
        pwf.status.overview_parts(store, NOW, None) as parts,
    ):
        assert 6 == parts.head.runs_total
        assert [] == diagnosed
        first = next(parts.runs)
        assert ["run-1"] == diagnosed
        assert "run-1" == first.id
        assert 5 == len(list(parts.runs))
    assert 6 == len(diagnosed)
