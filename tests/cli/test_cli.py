"""The command line: init, log show|tail|verify|export|import, dev export, help and errors.

Most tests drive the click group in-process with ``CliRunner``; a few run the
real entry points (``python -m pwf`` and the ``pwf`` console script) in
subprocesses to prove they work, pipes and exit codes included.  Events are
appended through the Python API: there is no request path yet.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click
import pytest
from click.testing import Result

from pwf import canonical
from pwf.artifacts import expected_artifacts
from pwf.cli import cli
from pwf.events import EVENT_TYPES, Sealed
from pwf.store.sqlite import FORMAT, SqliteStore

if TYPE_CHECKING:
    from tests._tamper import editable
    from tests.cli._cli import one_line
else:
    from _cli import one_line

    from _tamper import editable

AppendBatches = Callable[..., list[list[Sealed]]]

ROOT = Path(__file__).resolve().parents[2]
"""The repository root: tests/cli/test_cli.py -> tests/cli -> tests -> root."""

SIZES = (1, 3, 2, 1)
EVENTS = sum(SIZES)


def _console_script() -> str:
    """The installed ``pwf`` script next to this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "pwf"
    found = str(beside) if beside.exists() else shutil.which("pwf")
    assert found is not None, "the pwf console script is not installed"
    return found


def _env() -> dict[str, str]:
    """The environment for subprocesses, without a $PWF_DB from outside."""
    return {key: value for key, value in os.environ.items() if key != "PWF_DB"}


def _tamper(path: Path, seq: int) -> None:
    """Change one byte of one stored body, outside pwf (``events`` as v1's table)."""
    connection = editable(sqlite3.connect(path))
    try:
        [body] = connection.execute("SELECT body FROM events WHERE seq = ?", (seq,)).fetchone()
        changed = body.replace(b'"status":"running"', b'"status":"rUnning"')
        assert body != changed
        connection.execute("UPDATE events SET body = ? WHERE seq = ?", (changed, seq))
        connection.commit()
    finally:
        connection.close()


def _exported(path: Path) -> bytes:
    with SqliteStore(path, read_only=True) as store:
        return b"".join(stored.body + b"\n" for stored in store.read())


def _gone(path: Path) -> bool:
    return not any(Path(f"{path}{suffix}").exists() for suffix in ("", "-wal", "-shm"))


Run = Callable[..., Result]


@pytest.fixture
def db(tmp_path: Path, fill: AppendBatches) -> Path:
    """A database holding seven events in four batches, closed."""
    path = tmp_path / "log" / "state.db"
    with SqliteStore(path, create=True) as store:
        fill(store, SIZES)
    return path


class TestInit:
    """``pwf init`` creates a state database."""

    def test_init_creates_the_database(self, run: Run, tmp_path: Path) -> None:
        """A new database is created with private permissions and reported."""
        path = tmp_path / "new" / "state.db"
        result = run("init", "--db", str(path))
        assert (0, f"initialised {path} ({FORMAT}, 0 events)\n") == (
            result.exit_code,
            result.output,
        )
        assert 0o600 == stat.S_IMODE(path.stat().st_mode)
        assert 0o700 == stat.S_IMODE(path.parent.stat().st_mode)
        with SqliteStore(path) as store:
            assert store.verify().ok

    def test_init_twice_changes_nothing(self, run: Run, db: Path) -> None:
        """Running init on an existing pwf database keeps its events."""
        before = _exported(db)
        first, second = run("init", "--db", str(db)), run("init", "--db", str(db))
        assert [0, 0] == [first.exit_code, second.exit_code]
        assert f"initialised {db} ({FORMAT}, {EVENTS} events)\n" == second.output
        assert before == _exported(db)

    def test_init_json(self, run: Run, tmp_path: Path) -> None:
        """``--json`` prints one canonical line."""
        path = tmp_path / "state.db"
        result = run("init", "--db", str(path), "--json")
        expected = canonical.encode({"db": str(path), "events": 0, "format": FORMAT})
        assert (0, expected + b"\n") == (result.exit_code, result.stdout_bytes)

    def test_pwf_db_names_the_database(self, run: Run, tmp_path: Path) -> None:
        """Without ``--db`` the database is ``$PWF_DB``."""
        path = tmp_path / "from-env.db"
        result = run("init", env={"PWF_DB": str(path)})
        assert (0, True) == (result.exit_code, path.exists())

    def test_db_option_wins_over_pwf_db(self, run: Run, tmp_path: Path) -> None:
        """``--db`` is used even when ``$PWF_DB`` is set."""
        chosen, ignored = tmp_path / "chosen.db", tmp_path / "ignored.db"
        result = run("init", "--db", str(chosen), env={"PWF_DB": str(ignored)})
        assert (0, True, False) == (result.exit_code, chosen.exists(), ignored.exists())

    @pytest.mark.parametrize(
        ("variable", "value", "error"),
        [
            ("PWF_BUSY_TIMEOUT_MS", "soon", "invalid setting busy_timeout_ms"),
            ("PWF_BUSY_TIMEOUT_MS", "-1", "invalid setting busy_timeout_ms"),
            ("PWF_SYNCHRONOUS", "OFF", "invalid setting synchronous"),
        ],
    )
    def test_a_bad_setting_in_the_environment_is_one_line(
        self, run: Run, tmp_path: Path, variable: str, value: str, error: str
    ) -> None:
        """``$PWF_BUSY_TIMEOUT_MS`` and ``$PWF_SYNCHRONOUS`` are checked like options."""
        path = tmp_path / "state.db"
        result = run("init", "--db", str(path), env={variable: value})
        assert result.exit_code == 2
        assert result.stderr.startswith(f"Error: {error}")
        assert len(result.stderr.splitlines()) == 1
        assert not path.exists()

    def test_the_busy_timeout_comes_from_the_environment(self, run: Run, tmp_path: Path) -> None:
        """A writer holding the lock makes a request fail after ``$PWF_BUSY_TIMEOUT_MS``."""
        path = tmp_path / "state.db"
        assert run("init", "--db", str(path)).exit_code == 0
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            line = canonical.encode(
                {
                    "clientId": "c",
                    "idempotencyKey": "k",
                    "operation": "host.status",
                    "payload": {},
                    "requestId": "r",
                    "schema": "pi-workflows.client.v1",
                    "type": "request",
                }
            )
            result = run(
                "request", "--db", str(path), stdin=line, env={"PWF_BUSY_TIMEOUT_MS": "50"}
            )
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert result.exit_code != 0
        assert "locked" in result.stderr

    def test_default_is_dot_pwf_in_the_working_directory(self, run: Run, tmp_path: Path) -> None:
        """With neither, the database is ``./.pwf/state.db``."""
        result = run("init")
        path = tmp_path / ".pwf" / "state.db"
        assert (0, f"initialised {path} ({FORMAT}, 0 events)\n") == (
            result.exit_code,
            result.output,
        )
        assert 0o700 == stat.S_IMODE(path.parent.stat().st_mode)

    def test_init_on_a_file_that_is_not_sqlite(self, run: Run, tmp_path: Path) -> None:
        """A file that is not a database fails with exit 2, as everywhere, and one line."""
        path = tmp_path / "notes.txt"
        path.write_bytes(b"not a database\n" * 100)
        result = run("init", "--db", str(path))
        assert 2 == result.exit_code
        assert "not a pwf database or damaged" in one_line(result.stderr)


class TestShowAndTail:
    """``pwf log show`` and ``pwf log tail`` as a table and as stored bytes."""

    def test_show_table(self, run: Run, db: Path) -> None:
        """The table has a header and one row per event, in seq order."""
        result = run("log", "show", "--db", str(db))
        header, *rows = result.output.splitlines()
        assert 0 == result.exit_code
        assert ["seq", "batch", "at", "type", "run", "cause"] == header.split()
        assert [str(seq) for seq in range(1, EVENTS + 1)] == [row.split()[0] for row in rows]
        assert ["1", "2", "2", "2", "3", "3", "4"] == [row.split()[1] for row in rows]
        assert all("command.recorded" in row for row in rows)
        assert "run-1" in rows[0]
        assert "client-a" in rows[0]

    def test_show_json_is_the_stored_bytes(self, run: Run, db: Path) -> None:
        """``--json`` prints each stored canonical body, one per line."""
        result = run("log", "show", "--db", str(db), "--json")
        assert (0, _exported(db)) == (result.exit_code, result.stdout_bytes)

    def test_show_a_range(self, run: Run, db: Path) -> None:
        """``--from`` and ``--to`` bound the seqs shown."""
        result = run("log", "show", "--db", str(db), "--from", "2", "--to", "4", "--json")
        assert [2, 3, 4] == [json.loads(line)["seq"] for line in result.stdout_bytes.splitlines()]

    @pytest.mark.parametrize(
        ("options", "expected"),
        [
            (["--type", "command.recorded"], [1, 2, 3, 4, 5, 6, 7]),
            (["--type", "command.refused"], []),
            (["--run", "run-1"], [1, 4, 7]),
            (["--request", "req-2"], [2, 3, 4]),
            (["--request", "req-2", "--from", "3"], [3, 4]),
            (["--run", "run-0", "--to", "5"], [3]),
            (["--session", "session-x"], []),
        ],
    )
    def test_show_filters(
        self, run: Run, db: Path, options: list[str], expected: list[int]
    ) -> None:
        """Filters select events by their indexed columns, within the range."""
        result = run("log", "show", "--db", str(db), "--json", *options)
        assert 0 == result.exit_code
        assert expected == [json.loads(line)["seq"] for line in result.stdout_bytes.splitlines()]

    def test_show_an_empty_log(self, run: Run, tmp_path: Path) -> None:
        """An empty log shows the header only (and nothing with ``--json``)."""
        path = tmp_path / "empty.db"
        run("init", "--db", str(path))
        table, raw = (
            run("log", "show", "--db", str(path)),
            run("log", "show", "--db", str(path), "--json"),
        )
        assert (1, b"") == (len(table.output.splitlines()), raw.stdout_bytes)

    def test_tail_shows_the_last_events(self, run: Run, db: Path) -> None:
        """``tail -n 3`` shows the last three events, oldest first."""
        result = run("log", "tail", "--db", str(db), "-n", "3", "--json")
        assert (0, _exported(db).splitlines(keepends=True)[-3:]) == (
            result.exit_code,
            result.stdout_bytes.splitlines(keepends=True),
        )

    def test_tail_of_a_short_log_shows_all(self, run: Run, db: Path) -> None:
        """Asking for more than the log holds shows the whole log (table form)."""
        result = run("log", "tail", "--db", str(db))
        assert 1 + EVENTS == len(result.output.splitlines())

    def test_show_uses_pwf_db(self, run: Run, db: Path) -> None:
        """Read commands find the database through ``$PWF_DB`` too."""
        result = run("log", "show", "--json", env={"PWF_DB": str(db)})
        assert (0, _exported(db)) == (result.exit_code, result.stdout_bytes)


class TestVerify:
    """``pwf log verify``: exit 0 when intact, 1 at the first bad seq."""

    def test_clean_log(self, run: Run, db: Path) -> None:
        """An intact chain says so and exits 0."""
        result = run("log", "verify", "--db", str(db))
        expected = f"ok: {EVENTS} events, chain intact, head seq {EVENTS}\n"
        assert (0, expected) == (result.exit_code, result.output)

    def test_tampered_log(self, run: Run, db: Path) -> None:
        """A changed byte exits 1 with one line naming its seq on stderr."""
        _tamper(db, 4)
        result = run("log", "verify", "--db", str(db))
        assert (1, "") == (result.exit_code, result.stdout)
        assert one_line(result.stderr).startswith("bad: seq 4: ")

    def test_clean_log_json(self, run: Run, db: Path) -> None:
        """``--json`` prints one canonical report line."""
        result = run("log", "verify", "--db", str(db), "--json")
        report = {
            "events": EVENTS,
            "firstBadSeq": None,
            "headSeq": EVENTS,
            "ok": True,
            "reason": None,
        }
        assert (0, canonical.encode(report) + b"\n") == (result.exit_code, result.stdout_bytes)

    def test_tampered_log_json(self, run: Run, db: Path) -> None:
        """``--json`` on a tampered log reports the first bad seq and exits 1."""
        _tamper(db, 6)
        result = run("log", "verify", "--db", str(db), "--json")
        report = json.loads(result.stdout_bytes)
        assert (1, False, 6, 5, EVENTS) == (
            result.exit_code,
            report["ok"],
            report["firstBadSeq"],
            report["events"],
            report["headSeq"],
        )
        assert "content hash" in report["reason"]


class TestExportAndImport:
    """``pwf log export`` writes stored bytes; ``pwf log import`` takes them back whole."""

    def test_export_to_stdout(self, run: Run, db: Path) -> None:
        """Export prints exactly the stored bytes, one event per line."""
        result = run("log", "export", "--db", str(db))
        assert (0, _exported(db)) == (result.exit_code, result.stdout_bytes)

    def test_export_to_a_file_and_a_range(self, run: Run, db: Path, tmp_path: Path) -> None:
        """``--out`` writes a file; ``--from``/``--to`` bound it."""
        out = tmp_path / "part.jsonl"
        result = run(
            "log", "export", "--db", str(db), "--out", str(out), "--from", "2", "--to", "3"
        )
        assert (0, "") == (result.exit_code, result.output)
        assert _exported(db).splitlines(keepends=True)[1:3] == out.read_bytes().splitlines(
            keepends=True
        )

    def test_import_from_a_file(self, run: Run, db: Path, tmp_path: Path) -> None:
        """Importing an export into a new database reproduces it byte for byte."""
        source, copy = tmp_path / "log.jsonl", tmp_path / "copy.db"
        source.write_bytes(_exported(db))
        result = run("log", "import", "--db", str(copy), str(source))
        with SqliteStore(copy) as store:
            head = store.head()
        assert 0 == result.exit_code
        expected = (
            f"imported {EVENTS} events up to seq {EVENTS} into {copy}, head {head.content_hash}\n"
        )
        assert expected == result.output
        assert _exported(db) == _exported(copy)

    def test_import_from_stdin_json(self, run: Run, db: Path, tmp_path: Path) -> None:
        """``-`` (the default) reads stdin; ``--json`` prints one canonical line."""
        copy = tmp_path / "copy.db"
        result = run("log", "import", "--db", str(copy), "--json", stdin=_exported(db))
        with SqliteStore(db) as store:
            head = store.head()
        shown = {"events": EVENTS, "head": head.content_hash, "seq": EVENTS}
        expected = canonical.encode(shown) + b"\n"
        assert (0, expected) == (result.exit_code, result.stdout_bytes)
        assert _exported(db) == _exported(copy)

    def test_bad_file_exits_2_and_leaves_no_database(
        self, run: Run, db: Path, tmp_path: Path
    ) -> None:
        """A refused import is one line on stderr, exit 2, and no database is left behind."""
        lines = _exported(db).splitlines(keepends=True)
        source, copy = tmp_path / "bad.jsonl", tmp_path / "fresh" / "copy.db"
        source.write_bytes(b"".join([*lines[:2], *lines[3:]]))
        result = run("log", "import", "--db", str(copy), str(source))
        assert (2, "") == (result.exit_code, result.stdout)
        assert one_line(result.stderr).startswith("Error: line 3: ")
        assert _gone(copy)

    def test_bad_file_into_an_existing_empty_database(self, run: Run, tmp_path: Path) -> None:
        """A refused import into an existing empty database leaves it there, still empty."""
        copy = tmp_path / "copy.db"
        run("init", "--db", str(copy))
        result = run("log", "import", "--db", str(copy), stdin=b"{}\n")
        assert 2 == result.exit_code
        assert one_line(result.stderr).startswith("Error: line 1: ")
        assert (True, b"") == (copy.exists(), _exported(copy))

    def test_import_into_a_non_empty_database(self, run: Run, db: Path) -> None:
        """Importing into a database with events is refused and changes nothing."""
        before = _exported(db)
        result = run("log", "import", "--db", str(db), stdin=before)
        assert 2 == result.exit_code
        assert f"already holds {EVENTS} events" in one_line(result.stderr)
        assert before == _exported(db)

    def test_missing_source_file(self, run: Run, tmp_path: Path) -> None:
        """A source file that does not exist is refused with one line and no database."""
        copy = tmp_path / "copy.db"
        result = run("log", "import", "--db", str(copy), str(tmp_path / "nowhere.jsonl"))
        assert 2 == result.exit_code
        assert "no such file" in one_line(result.stderr)
        assert _gone(copy)


class TestErrors:
    """Errors are one line on stderr with the ADR 0006 exit code, never a traceback."""

    @pytest.mark.parametrize(
        "command",
        [["log", "show"], ["log", "tail"], ["log", "verify"], ["log", "export"]],
        ids=" ".join,
    )
    def test_missing_database(self, run: Run, tmp_path: Path, command: list[str]) -> None:
        """A database that does not exist is bad input: exit 2, one line, nothing created."""
        path = tmp_path / "missing.db"
        result = run(*command, "--db", str(path))
        assert (2, "") == (result.exit_code, result.stdout)
        assert f"Error: no state database at {path} (run `pwf init` first)" == one_line(
            result.stderr
        )
        assert _gone(path)

    def test_foreign_database(self, run: Run, tmp_path: Path) -> None:
        """An SQLite file pwf did not create is not a pwf database: exit 2."""
        path = tmp_path / "other.db"
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE notes (x)")
        other.close()
        result = run("log", "show", "--db", str(path))
        assert 2 == result.exit_code
        assert "not a pwf database" in one_line(result.stderr)

    @pytest.mark.parametrize(
        "args",
        [["log", "nope"], ["log", "show", "--from", "0"], ["log", "tail", "-n", "x"], ["--bogus"]],
        ids=" ".join,
    )
    def test_usage_errors_exit_2(self, run: Run, args: list[str]) -> None:
        """Unknown commands and bad option values are usage errors (exit 2)."""
        result = run(*args)
        assert 2 == result.exit_code
        assert "Traceback" not in result.output


def _tree(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):  # lazy groups load only when asked
            sub = command.get_command(context, name)
            assert sub is not None
            yield from _tree(sub, (*path, name))


COMMANDS = list(_tree(cli))


class TestHelp:
    """Every command and group has help."""

    def test_the_tree_is_what_we_expect(self) -> None:
        """The walk finds the groups and commands the design lists."""
        expected = {
            (),
            ("dev",),
            ("dev", "export"),
            ("init",),
            ("log",),
            ("log", "export"),
            ("log", "import"),
            ("log", "show"),
            ("log", "tail"),
            ("log", "verify"),
        }
        assert expected <= set(COMMANDS)

    @pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(("pwf", *path)))
    @pytest.mark.parametrize("flag", ["--help", "-h"])
    def test_help_exits_0(self, run: Run, path: tuple[str, ...], flag: str) -> None:
        """``--help`` (and ``-h``) prints usage and a description, and exits 0."""
        result = run(*path, flag)
        assert 0 == result.exit_code
        assert result.output.startswith(f"Usage: {' '.join(('pwf', *path))} ")
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            found = command.get_command(click.Context(command), name)
            assert found is not None
            command = found
        assert command.help
        summary = command.help.split("\n\n")[0]
        assert " ".join(summary.split()) in " ".join(result.output.split())

    @pytest.mark.parametrize(
        "path", [path for path in COMMANDS if len(path) == 2 or path == ("init",)]
    )
    def test_every_command_is_in_the_reference(self, path: tuple[str, ...]) -> None:
        """The command table of docs/reference.md names every command."""
        reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
        assert f"pwf {' '.join(path)}" in reference

    def test_version(self, run: Run) -> None:
        """``--version`` names the package and its version."""
        result = run("--version")
        assert (0, "pwf, version 0.1.0\n") == (result.exit_code, result.output)


def _copy_artifacts(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for directory in ("events", "projections", "schemas"):
        shutil.copytree(ROOT / directory, root / directory)
    (root / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "operations.md", root / "docs" / "operations.md")
    return root


class TestDevExport:
    """``pwf dev export`` writes the generated artifacts; ``--check`` finds drift."""

    def test_check_passes_in_the_repository(self, run: Run) -> None:
        """The committed artifacts match the code."""
        result = run("dev", "export", "--check", "--root", str(ROOT))
        assert (0, "") == (result.exit_code, result.output)

    def test_check_finds_a_drifted_file(self, run: Run, tmp_path: Path) -> None:
        """A changed artifact exits 1 and is named."""
        root = _copy_artifacts(tmp_path)
        schema = root / "events" / "command.recorded.schema.json"
        schema.write_text(schema.read_text(encoding="utf-8") + " ", encoding="utf-8")
        result = run("dev", "export", "--check", "--root", str(root))
        assert (1, "drifted: events/command.recorded.schema.json\n") == (
            result.exit_code,
            result.stdout,
        )
        assert "out of date" in one_line(result.stderr)

    def test_check_finds_a_missing_file(self, run: Run, tmp_path: Path) -> None:
        """A deleted artifact counts as drifted."""
        root = _copy_artifacts(tmp_path)
        (root / "projections" / "_pwf_store.sql").unlink()
        result = run("dev", "export", "--check", "--root", str(root))
        assert (1, "drifted: projections/_pwf_store.sql\n") == (result.exit_code, result.stdout)

    def test_check_writes_nothing(self, run: Run, tmp_path: Path) -> None:
        """``--check`` only compares."""
        root = tmp_path / "empty"
        root.mkdir()
        result = run("dev", "export", "--check", "--root", str(root))
        assert (1, []) == (result.exit_code, list(root.iterdir()))

    def test_export_repairs_drift_and_keeps_other_files(self, run: Run, tmp_path: Path) -> None:
        """Without ``--check`` drifted files are rewritten and unknown ones stay."""
        root = _copy_artifacts(tmp_path)
        schema = root / "events" / "command.refused.schema.json"
        schema.write_text("{}\n", encoding="utf-8")
        retired = root / "events" / "command.retired.schema.json"
        retired.write_text("{}\n", encoding="utf-8")
        result = run("dev", "export", "--root", str(root))
        assert (0, "wrote: events/command.refused.schema.json\n") == (
            result.exit_code,
            result.output,
        )
        assert (ROOT / "events" / "command.refused.schema.json").read_bytes() == schema.read_bytes()
        assert retired.exists()
        assert 0 == run("dev", "export", "--check", "--root", str(root)).exit_code

    def test_export_into_an_empty_tree_writes_every_artifact(
        self, run: Run, tmp_path: Path
    ) -> None:
        """Every expected artifact is written, with the expected text."""
        result = run("dev", "export", "--root", str(tmp_path))
        expected = expected_artifacts()
        assert 0 == result.exit_code
        assert sorted(f"wrote: {name}" for name in expected) == sorted(result.output.splitlines())
        for name, text in expected.items():
            assert text == (tmp_path / name).read_text(encoding="utf-8")

    def test_artifacts_cover_every_event_type(self) -> None:
        """There is a schema per event type, one for the envelope and the store's DDL."""
        names = set(expected_artifacts())
        assert {f"events/{cls.TAG}.schema.json" for cls in EVENT_TYPES} <= names
        assert {"events/_envelope.schema.json", "projections/_pwf_store.sql"} <= names
        schema = json.loads(expected_artifacts()["events/command.recorded.schema.json"])
        assert "CommandRecorded" in json.dumps(schema)


class TestEntryPoints:
    """The real entry points, run as subprocesses."""

    def test_python_dash_m(self, tmp_path: Path) -> None:
        """``python -m pwf`` runs the command line."""
        path = tmp_path / "state.db"
        done = subprocess.run(
            [sys.executable, "-m", "pwf", "init", "--db", str(path)],
            capture_output=True,
            text=True,
            check=False,
            env=_env(),
        )
        assert (0, f"initialised {path} ({FORMAT}, 0 events)\n", "") == (
            done.returncode,
            done.stdout,
            done.stderr,
        )

    def test_console_script_checks_artifacts_in_the_repository(self) -> None:
        """``pwf dev export --check`` exits 0 in the repository root."""
        done = subprocess.run(
            [_console_script(), "dev", "export", "--check"],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
            env=_env(),
        )
        assert (0, "", "") == (done.returncode, done.stdout, done.stderr)

    def test_export_piped_into_import(self, db: Path, tmp_path: Path) -> None:
        """``pwf log export | pwf log import`` copies the log byte for byte."""
        copy = tmp_path / "copy.db"
        pwf = _console_script()
        with subprocess.Popen(
            [pwf, "log", "export", "--db", str(db)], stdout=subprocess.PIPE, env=_env()
        ) as exporter:
            with subprocess.Popen(
                [sys.executable, "-m", "pwf", "log", "import", "--db", str(copy)],
                stdin=exporter.stdout,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_env(),
            ) as importer:
                assert exporter.stdout is not None
                exporter.stdout.close()  # the importer owns the read end now
                out, err = importer.communicate(timeout=60)
            exporter.wait(timeout=60)
        assert (0, 0, b"") == (exporter.returncode, importer.returncode, err)
        assert out.startswith(f"imported {EVENTS} events up to seq {EVENTS} into {copy}".encode())
        assert _exported(db) == _exported(copy)

    def test_refused_import_is_one_line_and_leaves_nothing(self, db: Path, tmp_path: Path) -> None:
        """A bad file piped into ``pwf log import`` exits 2 with one stderr line, no database."""
        copy = tmp_path / "copy.db"
        bad = _exported(db).replace(b'"seq":5', b'"seq": 5')
        done = subprocess.run(
            [_console_script(), "log", "import", "--db", str(copy)],
            input=bad,
            capture_output=True,
            check=False,
            env=_env(),
        )
        assert (2, b"") == (done.returncode, done.stdout)
        assert one_line(done.stderr.decode()).startswith("Error: line 5: ")
        assert _gone(copy)

    def test_missing_database_is_one_line(self, tmp_path: Path) -> None:
        """A missing database exits 2 with one stderr line."""
        path = tmp_path / "missing.db"
        done = subprocess.run(
            [_console_script(), "log", "verify", "--db", str(path)],
            capture_output=True,
            text=True,
            check=False,
            env=_env(),
        )
        assert (2, "") == (done.returncode, done.stdout)
        assert "no state database" in one_line(done.stderr)

    def test_tampered_log_exits_1(self, db: Path) -> None:
        """``pwf log verify`` exits 1 on a tampered database, naming the seq."""
        _tamper(db, 2)
        done = subprocess.run(
            [_console_script(), "log", "verify", "--db", str(db)],
            capture_output=True,
            text=True,
            check=False,
            env=_env(),
        )
        assert (1, "") == (done.returncode, done.stdout)
        assert one_line(done.stderr).startswith("bad: seq 2: ")
