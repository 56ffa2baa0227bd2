"""``pwf web`` on the command line: bad input in one line, the warning off loopback, no import cost.

Also the view's source: replays cached in a scratch directory and deleted
with it, and a server that keeps answering beside a writer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.cli.web import EXTRA_MISSING, NO_STORE_URL, is_loopback
from pwf.web._app import html_bytes
from pwf.web._serving import BACKLOG, Guarded
from pwf.web._source import KEPT_REPLAYS, Database

if TYPE_CHECKING:
    from tests.cli._cli import one_line
    from tests.web import _web_world as _world
    from tests.web._web_served import get, serve
else:
    import _web_world as _world
    from _web_served import get, serve

    sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
    from _cli import one_line


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def served_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``uvicorn.run`` replaced by a recorder: the command runs up to serving, then returns."""
    import uvicorn  # noqa: PLC0415 - the web extra

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda _app, **options: calls.append(options))
    return calls


def test_store_url_is_refused_until_web_catches_up(world_db: Path) -> None:
    result = invoke("web", "--store", "postgresql://localhost/pwf")
    assert 2 == result.exit_code
    assert f"Error: {NO_STORE_URL}" == one_line(result.stderr)


def test_missing_and_foreign_databases_are_one_line(tmp_path: Path) -> None:
    result = invoke("web", "--db", str(tmp_path / "none.db"))
    assert 2 == result.exit_code
    assert "no state database at" in one_line(result.stderr)
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"not a database at all" * 100)
    result = invoke("web", "--db", str(foreign))
    assert 2 == result.exit_code
    assert "not a pwf database" in one_line(result.stderr)


def test_without_the_web_extra_it_says_how_to_get_it(
    world_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    result = invoke("web", "--db", str(world_db))
    assert 2 == result.exit_code
    assert f"Error: {EXTRA_MISSING}" == one_line(result.stderr)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_serves_without_a_warning(
    world_db: Path, served_calls: list[dict[str, Any]], host: str
) -> None:
    result = invoke("web", "--db", str(world_db), "--host", host, "--port", "9999")
    assert 0 == result.exit_code
    assert "warning" not in result.stderr
    assert [
        {
            "host": host,
            "port": 9999,
            "http": Guarded,
            "backlog": BACKLOG,
            "log_level": "warning",
            "access_log": False,
        }
    ] == served_calls


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.7", "::", "example.org"])  # noqa: S104
def test_other_addresses_warn_there_is_no_authentication(
    world_db: Path, served_calls: list[dict[str, Any]], host: str
) -> None:
    assert not is_loopback(host)
    result = invoke("web", "--db", str(world_db), "--host", host)
    assert 0 == result.exit_code
    assert "warning: pwf web has no authentication" in result.stderr.splitlines()[0]
    assert 8765 == served_calls[0]["port"]


def test_other_commands_never_import_the_web_view() -> None:
    code = (
        "import sys; import pwf.cli; from pwf.cli import cli;"
        " cli.main(['--help'], standalone_mode=False);"
        " print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('starlette', 'jinja2', 'uvicorn') or m.startswith('pwf.web')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == done.stdout.splitlines()[-1]


def test_replays_are_cached_and_deleted_with_the_scratch_directory(world_db: Path) -> None:
    database = Database(world_db)
    try:
        with database.view(50) as view:
            first = view.store.projections_file.path
            assert view.seq <= 50
            assert first.parent == database.scratch
        with database.view(50) as again:
            assert first == again.store.projections_file.path
        made = first.stat()
        for seq in range(51, 51 + KEPT_REPLAYS):
            with database.view(seq):
                pass
        assert not first.exists()
        with database.view(50) as rebuilt:
            again_made = rebuilt.store.projections_file.path.stat()
            # The file system may give the new file the deleted one's inode number:
            # the pair of inode and modification time tells the two files apart.
            assert (again_made.st_ino, again_made.st_mtime_ns) != (made.st_ino, made.st_mtime_ns)
        assert KEPT_REPLAYS == len(list(database.scratch.glob("at-*.db")))
    finally:
        database.close()
    assert not database.scratch.exists()


def test_the_view_answers_beside_a_writer(world_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    shutil.copy(world_db, db)
    with serve(db) as base:
        _, _, before = get(base + "/runs?status=queued")
        world = _world.World(db)
        try:
            payload = _world.start_payload("session-new", {"n": 99})
            response = world.request(
                999_000, "run.start", payload, run_id="run-new", rid="new-1", key="new-1"
            )
            assert "accepted" == response.outcome
        finally:
            world.close()
        _, _, after = get(base + "/runs?status=queued")
    assert "run-new" not in before
    assert "run-new" in after
    done = subprocess.run(
        [sys.executable, "-m", "pwf", "log", "verify", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["ok"] is True


def test_a_lone_surrogate_is_written_as_its_escape() -> None:
    assert b"run-\\udc80 &lt;x&gt; \xe2\x98\x83" == html_bytes("run-\udc80 &lt;x&gt; \u2603")
