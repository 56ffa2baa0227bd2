"""Start-up: each verb imports only what it uses (ADR 0031), settings skip pydantic (ADR 0032).

The import checks run the real entry point in a subprocess under
``python -X importtime`` and read the names of every module it imported,
so a heavy module pulled in by any path, however indirect, fails them.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import click
import pytest
from click.testing import CliRunner

from pwf import DISTRIBUTION
from pwf.cli import VERBS, cli
from pwf.config import Settings
from pwf.settings_model import validated

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

HEAVY = (
    "pydantic",
    "structlog",
    "cryptography",
    "rich",
    "asyncio",
    "multiprocessing",
    "importlib.metadata",
    "email",
    "pwf.settings_model",
    "pwf.diff",
    "pwf.fold.replay",
    "pwf.fold.rebuild",
    "pwf.verify",
    "pwf.explain",
    "pwf.fold.workfile",
    "pwf.fold.decode",
    "pwf.fold.parallel",
    "pwf.fold.chain",
    "pwf.fold.bulk",
    "pwf.artifacts",
    "pwf.store.chainwalk",
    "pwf.store.compaction",
    "pwf.store.jsonl",
    "pwf.host.prune",
    "pwf.host._backup",
    "pwf.commands.prune",
    "dataclasses",
    "calendar",
)
"""Modules (and their submodules) that the hot verbs must not import."""


def _imported(args: list[str], cwd: Path, stdin: bytes = b"", **env: str) -> set[str]:
    """The modules ``pwf *args`` imports; fails unless it exits 0."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PWF_")}
    finished = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pwf", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env={**environment, **env},
        check=False,
    )
    assert finished.returncode == 0, finished.stderr.decode()[-2000:]
    assert b'"status":"error"' not in finished.stdout
    names = set()
    for line in finished.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "pwf" in names
    return names


def _heavy(names: set[str], *allowed: str) -> list[str]:
    """The heavy modules among ``names``, and every verb module but ``allowed``."""
    verbs = {f"{verb.module}" for verb in VERBS.values()} - set(allowed)
    return sorted(
        name
        for name in names
        if name in verbs or any(name == h or name.startswith(f"{h}.") for h in HEAVY)
    )


STATUS = (
    b'{"clientId":"c","idempotencyKey":"k","operation":"host.status","payload":{},'
    b'"requestId":"r","schema":"pi-workflows.client.v1","type":"request"}\n'
)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """An initialised state database."""
    path = tmp_path / "state.db"
    subprocess.run([sys.executable, "-m", "pwf", "init", "--db", str(path)], check=True)
    return path


def _command(name: str) -> click.Command:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    return command


@pytest.fixture
def served(tmp_path: Path, database: Path) -> Iterator[Path]:
    """A database that a ``pwf serve`` process serves for the length of the test."""
    server = subprocess.Popen(
        [sys.executable, "-m", "pwf", "serve", "--db", str(database)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    try:
        probe = [sys.executable, "-m", "pwf", "call", "--db", str(database), "--retry-for", "0"]
        for _ in range(150):
            if (
                subprocess.run(probe, input=STATUS, capture_output=True, check=False).returncode
                == 0
            ):
                break
            time.sleep(0.2)
        else:
            pytest.fail("pwf serve did not answer within 30 s")
        yield database
    finally:
        server.terminate()
        server.wait()


class TestImports:
    def test_version_imports_no_verb_and_nothing_heavy(self, tmp_path: Path) -> None:
        assert [] == _heavy(_imported(["--version"], tmp_path))

    def test_help_lists_every_verb_without_importing_one(self, tmp_path: Path) -> None:
        assert [] == _heavy(_imported(["--help"], tmp_path))

    def test_request_imports_its_own_verb_only(
        self, tmp_path: Path, database: Path, client_line: Callable[..., bytes]
    ) -> None:
        names = _imported(["request", "--db", str(database)], tmp_path, client_line(1))
        assert "pwf.cli.request" in names
        assert [] == _heavy(names, "pwf.cli.request")

    def test_call_imports_neither_click_nor_any_verb(self, tmp_path: Path, served: Path) -> None:
        names = _imported(["call", "--db", str(served)], tmp_path, STATUS)
        assert "pwf.client" in names
        assert [] == _heavy(names)
        assert not {"click", "msgspec", "pwf.cli", "pwf.host", "sqlite3"} & names

    def test_a_logged_verb_imports_structlog_when_it_logs(self, tmp_path: Path) -> None:
        """``-v`` keeps info lines, so ``init`` loads structlog: the check can see it."""
        names = _imported(["-v", "init", "--db", str(tmp_path / "v.db")], tmp_path)
        assert "structlog" in names

    def test_a_setting_in_the_environment_brings_pydantic(
        self, tmp_path: Path, database: Path, client_line: Callable[..., bytes]
    ) -> None:
        """Given values are checked by the pydantic model (and the check can see it)."""
        names = _imported(
            ["request", "--db", str(database)], tmp_path, client_line(1), PWF_SYNCHRONOUS="FULL"
        )
        assert {"pydantic", "pwf.settings_model"} <= names


class TestVerbs:
    @pytest.mark.parametrize("name", sorted(VERBS))
    def test_the_stored_short_help_is_the_commands_own(self, name: str) -> None:
        command = _command(name)
        assert (name, VERBS[name].short_help) == (command.name, command.get_short_help_str(10_000))

    def test_help_equals_the_eager_listing(self) -> None:
        """``pwf --help`` shows what click shows for the same commands loaded eagerly."""
        lazy = cli.get_help(cli.make_context("pwf", ["--help"], resilient_parsing=True))
        eager = click.Group(
            "pwf",
            params=cli.params,
            help=cli.help,
            epilog=cli.epilog,
            context_settings=cli.context_settings,
            commands=[_command(name) for name in VERBS],
        )
        context = eager.make_context("pwf", ["--help"], resilient_parsing=True)
        assert eager.get_help(context) == lazy

    def test_an_unknown_verb_is_a_usage_error(self, tmp_path: Path) -> None:
        finished = subprocess.run(
            [sys.executable, "-m", "pwf", "nope"], capture_output=True, cwd=tmp_path, check=False
        )
        assert finished.returncode == 2
        assert b"No such command 'nope'" in finished.stderr

    def test_a_mistyped_verb_gets_a_suggestion(self) -> None:
        result = CliRunner().invoke(cli, ["stauts"], prog_name="pwf")
        assert result.exit_code == 2
        assert "No such command 'stauts'" in result.output
        assert "'status'" in result.output.split("Did you mean", 1)[1]

    def test_version_is_the_installed_distributions(self) -> None:
        result = CliRunner().invoke(cli, ["--version"], prog_name="pwf")
        assert f"pwf, version {importlib.metadata.version(DISTRIBUTION)}\n" == result.output


class TestSettings:
    def test_defaults_equal_the_models(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for variable in ("PWF_DB", "PWF_SYNCHRONOUS", "PWF_BUSY_TIMEOUT_MS"):
            monkeypatch.delenv(variable, raising=False)
        assert validated("x.db", {}) == Settings.load(db="x.db")
        assert validated(".pwf/state.db", {}) == Settings.load()

    def test_given_values_are_checked(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("PWF_BUSY_TIMEOUT_MS", "250")
        monkeypatch.setenv("PWF_SYNCHRONOUS", "NORMAL")
        loaded = Settings.load(db="x.db")
        assert ("NORMAL", 250, True) == (
            loaded.synchronous,
            loaded.busy_timeout_ms,
            loaded.db.is_absolute(),
        )
