"""Help that teaches: settings with defaults, operations and kinds, canonicalize, completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from pwf import canonical
from pwf.protocol.client import parse_request

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from click.testing import Result

CLIENT_OPERATIONS = (
    "host.status",
    "run.start",
    "run.cancel",
    "interaction.submit",
    "view.session.watch",
    "state.backup",
    "state.prune",
)
"""A few of the client operations named in HOST.md and DOMAIN.md."""
WORKER_KINDS = ("worker.ready", "node.started", "interaction.requested", "worker.exiting")


def _flat(text: str) -> str:
    return " ".join(text.split())


class TestSettings:
    def test_pwf_help_lists_every_setting_with_its_default(
        self, run: Callable[..., Result]
    ) -> None:
        text = _flat(run("--help").stdout)
        assert "PWF_DB the state database when --db is not given (default: ./.pwf/state.db)" in text
        assert (
            "PWF_SYNCHRONOUS SQLite synchronous mode: FULL, NORMAL or EXTRA (default: FULL)" in text
        )
        assert "PWF_BUSY_TIMEOUT_MS" in text
        assert "(default: 5000)" in text

    def test_db_option_points_at_them(self, run: Callable[..., Result]) -> None:
        text = _flat(run("log", "show", "--help").stdout)
        assert "$PWF_DB" in text
        assert "PWF_SYNCHRONOUS, PWF_BUSY_TIMEOUT_MS" in text


class TestProtocolHelp:
    def test_request_help_lists_the_operations(self, run: Callable[..., Result]) -> None:
        text = _flat(run("request", "--help").stdout)
        assert "Operations (" in text
        for operation in CLIENT_OPERATIONS:
            assert f" {operation}," in text or f" {operation}." in text, operation

    def test_request_help_shows_a_whole_request_line_to_copy(
        self, run: Callable[..., Result]
    ) -> None:
        """click rewraps help text; the example line is kept whole, so it parses as a request."""
        shown = [text.strip() for text in run("request", "--help").stdout.splitlines()]
        examples = [text for text in shown if text.startswith('{"clientId"')]
        assert 1 == len(examples), shown
        parse_request(examples[0].encode())

    def test_worker_help_lists_operations_and_kinds(self, run: Callable[..., Result]) -> None:
        text = _flat(run("worker", "--help").stdout)
        assert "Message kinds (16):" in text
        for kind in WORKER_KINDS:
            assert kind in text
        assert "interaction.accept," in text


REQUEST = {
    "schema": "pi-workflows.client.v1",
    "type": "request",
    "requestId": "r-1",
    "clientId": "cli-A",
    "idempotencyKey": "k-1",
    "operation": "host.status",
    "payload": {},
}


class TestCanonicalize:
    def test_a_hand_written_line_is_answered(
        self, run: Callable[..., Result], tmp_path: Path
    ) -> None:
        db = str(tmp_path / "s.db")
        run("init", "--db", db)
        loose = json.dumps(dict(reversed(list(REQUEST.items()))), indent=None).encode() + b"\n"
        assert canonical.encode(REQUEST) + b"\n" != loose
        refused = run("request", "--db", db, "--at", "1000", stdin=loose)
        assert 2 == refused.exit_code
        result = run("request", "--db", db, "--at", "1000", "--canonicalize", stdin=loose * 2)
        assert 0 == result.exit_code, result.output
        answers = [json.loads(line) for line in result.stdout.splitlines()]
        assert ["accepted", "adopted"] == [answer["outcome"] for answer in answers]
        assert [
            "note: --canonicalize rewrites input lines into canonical JSON before parsing"
        ] == result.stderr.splitlines()

    def test_canonical_input_says_nothing(self, run: Callable[..., Result], tmp_path: Path) -> None:
        db = str(tmp_path / "s.db")
        run("init", "--db", db)
        line = canonical.encode(REQUEST) + b"\n"
        result = run("request", "--db", db, "--at", "1000", "--canonicalize", stdin=line)
        assert (0, "") == (result.exit_code, result.stderr)

    def test_not_json_is_still_refused(self, run: Callable[..., Result], tmp_path: Path) -> None:
        db = str(tmp_path / "s.db")
        run("init", "--db", db)
        result = run("request", "--db", db, "--canonicalize", stdin=b"{nope\n")
        assert 2 == result.exit_code
        assert result.stderr.startswith("line 1: not JSON")

    def test_worker_canonicalize(self, run: Callable[..., Result], tmp_path: Path) -> None:
        db = str(tmp_path / "s.db")
        run("init", "--db", db)
        message = b'{ "schema": "pi-workflows.worker-message.v1", "kind": "nope" }\n'
        result = run("worker", "--db", db, "--canonicalize", stdin=message)
        assert 2 == result.exit_code
        assert "note: --canonicalize" in result.stderr
        assert "line 1: " in result.stderr
        assert "not canonical" not in result.stderr


class TestCompletion:
    @pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
    def test_prints_a_script(self, run: Callable[..., Result], shell: str) -> None:
        result = run("completion", shell)
        assert 0 == result.exit_code
        assert "_PWF_COMPLETE" in result.stdout

    def test_unknown_shell(self, run: Callable[..., Result]) -> None:
        result = run("completion", "tcsh")
        assert 2 == result.exit_code
        assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.stderr

    def test_the_script_completes_verbs_and_choices(self, tmp_path: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}

        def complete(words: str) -> list[str]:
            cword = len(words.split()) - 1
            done = subprocess.run(
                [sys.executable, "-m", "pwf"],
                env={
                    **env,
                    "COMP_WORDS": words,
                    "COMP_CWORD": str(cword),
                    "_PWF_COMPLETE": "bash_complete",
                },
                capture_output=True,
                check=True,
                cwd=tmp_path,
            )
            return [line.split(",", 1)[1] for line in done.stdout.decode().splitlines()]

        assert ["state", "status"] == complete("pwf stat")
        assert ["completed", "cancelled"] == complete("pwf query runs --status c")
