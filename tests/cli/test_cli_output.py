"""Times, output forms and filters of ``log show|tail``, ``query`` and ``explain``."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import pty
import queue
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

import pytest

from pwf.commands.prune import iso_utc

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.cli.test_cli_explain import REQUEST, RUN, START, Pwf
else:
    from test_cli_explain import REQUEST, RUN, START, Pwf

T0 = 1_785_600_000_000
"""2026-08-01T16:00:00Z."""


@pytest.fixture
def pwf(tmp_path: Path) -> Pwf:
    """run-1 parked on its request, each step a second later than the one before."""
    driver = Pwf(tmp_path / "state.db")
    driver.request("run.start", START, T0, runId=RUN)
    driver.launch(T0 + 1000)
    driver.worker("worker.ready", {}, T0 + 2000, rev=0)
    started = {"nodeId": "ask", "timeoutMs": 60000}
    driver.worker("node.started", started, T0 + 3000, attemptId="attempt-1")
    contract = {"contract": {"prompt": "Say hi"}}
    driver.worker("interaction.request", contract, T0 + 4000, attemptId="attempt-1")
    return driver


def _events(pwf: Pwf) -> list[dict[str, object]]:
    return [json.loads(line) for line in pwf("log", "show", "--json").stdout.splitlines()]


class TestLogShowForms:
    def test_csv_has_a_header_and_raw_times_off_a_terminal(self, pwf: Pwf) -> None:
        result = pwf("log", "show", "--csv", "--columns", "seq,at,type,hash")
        assert 0 == result.exit_code, result.output
        rows = list(csv.reader(io.StringIO(result.stdout)))
        events = _events(pwf)
        assert ["seq", "at", "type", "hash"] == rows[0]
        expected = [[str(e["seq"]), str(e["at"]), e["type"], e["contentHash"]] for e in events]
        assert expected == rows[1:]

    def test_tsv_with_iso_times(self, pwf: Pwf) -> None:
        result = pwf("log", "show", "--tsv", "--columns", "seq,at", "--time-format", "iso")
        lines = result.stdout.splitlines()
        assert "seq\tat" == lines[0]
        assert f"1\t{iso_utc(T0)}" == lines[1]

    def test_nl_is_one_object_per_event(self, pwf: Pwf) -> None:
        result = pwf("log", "show", "--nl", "--limit", "2", "--offset", "1")
        items = [json.loads(line) for line in result.stdout.splitlines()]
        assert [2, 3] == [item["seq"] for item in items]
        assert {"seq", "batch", "at", "type", "run", "session", "request", "hash", "cause"} == set(
            items[0]
        )
        assert 64 == len(items[0]["hash"])

    def test_since_and_until(self, pwf: Pwf) -> None:
        events = _events(pwf)
        since, until = T0 + 1000, T0 + 3000
        expected = [e["seq"] for e in events if since <= int(str(e["at"])) <= until]
        result = pwf("log", "show", "--nl", "--since", iso_utc(since), "--until", str(until))
        assert expected == [json.loads(line)["seq"] for line in result.stdout.splitlines()]
        assert expected

    def test_table_times(self, pwf: Pwf) -> None:
        iso = pwf("log", "show", "--time-format", "iso").stdout.splitlines()
        raw = pwf("log", "show").stdout.splitlines()
        relative = pwf("log", "show", "--time-format", "relative").stdout.splitlines()
        assert iso_utc(T0) in iso[1]
        assert str(T0) in raw[1]
        assert " ago " in relative[1]

    def test_unknown_type_lists_the_known_ones(self, pwf: Pwf) -> None:
        result = pwf("log", "show", "--type", "run.nope")
        assert 2 == result.exit_code
        assert "'run.nope' is not one of" in result.stderr
        assert "'run.reserved'" in result.stderr

    def test_unknown_column(self, pwf: Pwf) -> None:
        result = pwf("log", "show", "--csv", "--columns", "seq,nope")
        assert 2 == result.exit_code
        assert "no column nope; choose from seq, batch, at" in result.stderr

    def test_two_forms_exclude_each_other(self, pwf: Pwf) -> None:
        result = pwf("log", "show", "--csv", "--nl")
        assert 2 == result.exit_code
        assert "--nl and --csv exclude each other" in result.stderr


class TestQueryForms:
    def test_csv_columns_and_hex_hashes(self, pwf: Pwf) -> None:
        result = pwf("query", "runs", "--csv", "--columns", "run_id,input_hash,created_at")
        assert 0 == result.exit_code, result.output
        header, row = list(csv.reader(io.StringIO(result.stdout)))
        assert ["run_id", "input_hash", "created_at"] == header
        [listed] = json.loads(pwf("query", "runs", "--json").stdout)
        assert [RUN, listed["input_hash"], str(T0)] == row
        assert 64 == len(row[1])
        int(row[1], 16)

    def test_nl_and_paging(self, pwf: Pwf) -> None:
        pwf.request("run.start", {**START, "input": {"n": 2}}, T0 + 9000, runId="run-2")
        every = [
            json.loads(line)["run_id"] for line in pwf("query", "runs", "--nl").stdout.splitlines()
        ]
        assert [RUN, "run-2"] == every
        paged = pwf("query", "runs", "--nl", "--offset", "1", "--limit", "1")
        assert ["run-2"] == [json.loads(line)["run_id"] for line in paged.stdout.splitlines()]
        since = pwf("query", "runs", "--nl", "--since", iso_utc(T0 + 5000))
        assert ["run-2"] == [json.loads(line)["run_id"] for line in since.stdout.splitlines()]
        until = pwf("query", "runs", "--nl", "--until", iso_utc(T0 + 5000))
        assert [RUN] == [json.loads(line)["run_id"] for line in until.stdout.splitlines()]

    @pytest.mark.parametrize(
        ("listing", "known"),
        [("runs", "'timed_out'"), ("interactions", "'settled'"), ("turns", "'ended'")],
    )
    def test_status_is_checked(self, pwf: Pwf, listing: str, known: str) -> None:
        result = pwf("query", listing, "--status", "nope")
        assert 2 == result.exit_code
        assert "'nope' is not one of" in result.stderr
        assert known in result.stderr

    def test_table_time_format(self, pwf: Pwf) -> None:
        result = pwf("query", "runs", "--time-format", "iso")
        assert iso_utc(T0 + 4000) in result.stdout.splitlines()[1]


class TestTimeInput:
    def test_at_iso_stamps_the_events(self, tmp_path: Path) -> None:
        driver = Pwf(tmp_path / "iso.db")
        line = {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": "r-1",
            "clientId": "cli-A",
            "operation": "run.start",
            "idempotencyKey": "k-1",
            "runId": RUN,
            "payload": START,
        }
        from pwf import canonical  # noqa: PLC0415

        result = driver(
            "request", "--at", "2026-08-01T18:00:00+02:00", stdin=canonical.encode(line) + b"\n"
        )
        assert 0 == result.exit_code, result.output
        assert {T0} == {event["at"] for event in _events(driver)}

    def test_bad_time_is_usage_error(self, pwf: Pwf) -> None:
        result = pwf("request", "--at", "tomorrow", stdin=b"")
        assert 2 == result.exit_code
        assert "'tomorrow' is neither epoch milliseconds nor an ISO 8601 time" in result.stderr

    def test_explain_now_takes_iso(self, pwf: Pwf) -> None:
        result = pwf("explain", "interaction", REQUEST, "--now", iso_utc(T0 + 70_000), "--json")
        assert T0 + 70_000 == json.loads(result.stdout)["now"]

    def test_explain_prints_iso(self, pwf: Pwf) -> None:
        result = pwf("explain", "run", RUN, "--time-format", "iso")
        assert f"(now {iso_utc(T0 + 4000)})" in result.stdout.splitlines()[0]
        assert f"startedAt={iso_utc(T0 + 3000)}" in result.stdout


def _pty_run(*args: str) -> str:
    """Run ``pwf *args`` with stdout on a pseudo-terminal; what it printed."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "PWF_DB"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pwf", *args], stdout=follower, stderr=subprocess.DEVNULL, env=env
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode()


class TestTerminal:
    """ISO is the default on a terminal; pipes keep epoch milliseconds."""

    def test_iso_on_a_terminal(self, pwf: Pwf) -> None:
        text = _pty_run("log", "show", "--db", pwf.db)
        assert iso_utc(T0) in text
        assert str(T0) not in text

    def test_raw_in_a_pipe(self, pwf: Pwf) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PWF_DB"}
        result = subprocess.run(
            [sys.executable, "-m", "pwf", "log", "show", "--db", pwf.db],
            capture_output=True,
            check=True,
            env=env,
        )
        assert str(T0).encode() in result.stdout

    def test_json_is_raw_on_a_terminal(self, pwf: Pwf) -> None:
        text = _pty_run("query", "runs", "--db", pwf.db, "--json")
        assert str(T0) in text


class TestFollow:
    def test_follow_prints_new_events_and_ends_on_ctrl_c(self, pwf: Pwf) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PWF_DB"}
        args = ["log", "tail", "--db", pwf.db, "-n", "1", "--nl", "--follow", "--interval", "0.05"]
        with _interruptible():
            process = subprocess.Popen(
                [sys.executable, "-m", "pwf", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        try:
            seen, expected = _follow_two_requests(pwf, process)
            assert expected == seen
            process.send_signal(signal.SIGINT)
            err = process.communicate(timeout=30)[1]
            assert (0, b"") == (process.returncode, err)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()

    def test_tail_keeps_to_one_run_before_and_while_following(self, pwf: Pwf) -> None:
        """``pwf log tail --follow --run ID``: only that run's events, the last N then new ones."""
        of_run = [e["seq"] for e in _events(pwf) if _nl(pwf, int(str(e["seq"])))["run"] == RUN]
        last_two = pwf("log", "tail", "-n", "2", "--run", RUN, "--nl").stdout.splitlines()
        assert of_run[-2:] == [json.loads(line)["seq"] for line in last_two]
        start = {**START, "originSessionId": "s-2"}
        assert "accepted" == pwf.request("run.start", start, T0 + 9_000, runId="run-2")["outcome"]
        env = {k: v for k, v in os.environ.items() if k != "PWF_DB"}
        args = ["log", "tail", "--db", pwf.db, "-n", "1", "--nl", "--follow", "--interval", "0.05"]
        with _interruptible():
            process = subprocess.Popen(
                [sys.executable, "-m", "pwf", *args, "--run", "run-2"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        try:
            out = process.stdout
            assert out is not None
            first = json.loads(out.readline())  # run-2's last event: the tail now follows
            assert "run-2" == first["run"]
            pwf.request("host.status", {}, T0 + 10_000)
            assert (
                "accepted" == pwf.request("run.cancel", {}, T0 + 11_000, runId="run-2")["outcome"]
            )
            pwf.request("host.status", {}, T0 + 12_000)
            wanted = [
                e["seq"]
                for e in _events(pwf)
                if int(str(e["seq"])) > first["seq"]
                and _nl(pwf, int(str(e["seq"])))["run"] == "run-2"
            ]
            assert wanted
            seen = [json.loads(out.readline()) for _ in wanted]
            assert wanted == [line["seq"] for line in seen]
            assert {"run-2"} == {line["run"] for line in seen}
            process.send_signal(signal.SIGINT)
            rest, err = process.communicate(timeout=30)
            assert (0, b"", b"") == (process.returncode, rest, err)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()


def _nl(pwf: Pwf, seq: int) -> dict[str, object]:
    shown = pwf("log", "show", "--from", str(seq), "--to", str(seq), "--nl").stdout
    value: dict[str, object] = json.loads(shown)
    return value


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """A child started in the block has SIGINT at its default, as under a terminal.

    A shell starts a background job with SIGINT ignored, and an ignored signal
    stays ignored across ``exec``: a suite run as ``make test &`` would start a
    ``pwf`` that Ctrl-C cannot reach.  A handled one is reset to the default.
    """
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _follow_two_requests(pwf: Pwf, process: subprocess.Popen[bytes]) -> tuple[list[int], list[int]]:
    """Append two requests while ``process`` follows; the seqs it printed and those expected."""
    out = process.stdout
    assert out is not None
    before = json.loads(out.readline())["seq"]
    pwf.request("host.status", {}, T0 + 10_000)
    pwf.request("host.status", {}, T0 + 11_000)
    head = int(str(_events(pwf)[-1]["seq"]))
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in iter(out.readline, b""):
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[int] = []
    while not seen or seen[-1] < head:
        seen.append(json.loads(lines.get(timeout=30))["seq"])
    return seen, list(range(before + 1, head + 1))


class TestOneOutputSwitch:
    """``-o/--output table|json|nl|csv|tsv`` on every listing verb; the old flags are synonyms."""

    VERBS = (
        ("log", "show"),
        ("log", "tail", "-n", "3"),
        ("query", "runs"),
        ("query", "interactions"),
        ("query", "messages"),
        ("query", "turns"),
    )

    @pytest.mark.parametrize("verb", VERBS)
    @pytest.mark.parametrize("form", ["json", "nl", "csv", "tsv"])
    def test_the_switch_prints_what_the_flag_prints(
        self, pwf: Pwf, verb: tuple[str, ...], form: str
    ) -> None:
        flag = pwf(*verb, f"--{form}")
        assert 0 == flag.exit_code, flag.output
        for switch in (["-o", form], [f"--output={form}"], ["-o", form, f"--{form}"]):
            result = pwf(*verb, *switch)
            assert (0, flag.stdout) == (result.exit_code, result.stdout), switch

    @pytest.mark.parametrize("verb", VERBS)
    def test_table_is_the_default(self, pwf: Pwf, verb: tuple[str, ...]) -> None:
        plain = pwf(*verb, "--time-format", "raw")
        assert (0, plain.stdout) == (
            pwf(*verb, "-o", "table", "--time-format", "raw").exit_code,
            pwf(*verb, "-o", "table", "--time-format", "raw").stdout,
        )

    JSON_VERBS = (
        ("status", "--now", "1785600060000"),
        ("explain", "run", "run-1", "--now", "1785600060000"),
        ("explain", "interaction", "interaction-run-1-attempt-1", "--now", "1785600060000"),
        ("verify",),
        ("log", "verify"),
        ("log", "head"),
        ("state", "status", "--at", "1785600060000"),
        ("init",),
    )

    @pytest.mark.parametrize("verb", JSON_VERBS)
    def test_every_verb_that_prints_json_takes_the_switch(
        self, pwf: Pwf, verb: tuple[str, ...]
    ) -> None:
        """``-o json`` is ``--json``, ``-o table`` the default, and asking for both is refused."""
        flag = pwf(*verb, "--json")
        assert 0 == flag.exit_code, flag.output
        json.loads(flag.stdout.splitlines()[0])
        assert (0, flag.stdout) == (
            pwf(*verb, "-o", "json").exit_code,
            pwf(*verb, "-o", "json").stdout,
        )
        plain = (
            pwf(*verb, "--time-format", "raw") if verb[0] in ("status", "explain") else pwf(*verb)
        )
        table = (
            pwf(*verb, "-o", "table", "--time-format", "raw")
            if verb[0] in ("status", "explain")
            else pwf(*verb, "-o", "table")
        )
        assert (plain.exit_code, plain.stdout) == (table.exit_code, table.stdout)
        both = pwf(*verb, "-o", "table", "--json")
        assert 2 == both.exit_code
        assert "-o table and --json ask for two output forms" in both.stderr

    def test_two_forms_are_a_usage_error(self, pwf: Pwf) -> None:
        result = pwf("query", "runs", "-o", "csv", "--json")
        assert 2 == result.exit_code
        assert "-o csv and --json exclude each other" in result.stderr
        bad = pwf("log", "show", "-o", "yaml")
        assert 2 == bad.exit_code
