"""The original client starts pwf: ``node ENTRY --database DB`` on a new database (HOST §1.19).

When no host answers, the original client runs its ``hostEntryPath`` with
node as ``ENTRY --database DB`` and waits 10 s for the socket it computes
from DB.  These tests start the entry ``pwf serve --print-entry`` names in
exactly that way and wait as the client waits.  Node is Debian's
``/usr/bin/node``: without it they skip and say why, except under
``CI=true``, where they fail (CI installs it: ``.ci/run``).
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from pwf.client import HelloError, HostClient, HostUnavailableError, socket_path
from pwf.server import HostPaths

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration._served import PWF, line, pwf, rows, short_dir
else:
    from _served import PWF, line, pwf, rows, short_dir

pytestmark = pytest.mark.slow

NODE: Final = "/usr/bin/node"
CLIENT_WAIT_SECONDS: Final = 10.0
"""How long the original client waits for the host it started (HOST §1.19)."""
STOP_SECONDS: Final = 60.0
CLIENT_SOCKET_PATH: Final = (
    "const path = require('node:path');"
    "for (const db of process.argv.slice(1))"
    " console.log(path.join(path.dirname(path.resolve(db)), 'host', 'host.sock'));"
)
"""The original client's ``clientSocketPath`` on POSIX, run by node for each argument."""


@pytest.fixture
def node() -> str:
    """Node's path; skipped without it, failed without it under ``CI=true``."""
    if not os.access(NODE, os.X_OK):
        missing = f"Node is not installed at {NODE} (apt-get install nodejs)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; CI must install it (.ci/run)")
        pytest.skip(missing)
    return NODE


@pytest.fixture
def place() -> Iterator[Path]:
    """A short directory (Unix socket paths are short) with no database in it."""
    with short_dir() as directory:
        yield directory


def _entry() -> Path:
    done = pwf("serve", "--print-entry")
    assert 0 == done.returncode, done.stderr
    entry = Path(done.stdout.decode().strip())
    assert entry.is_file()
    return entry


class Started:
    """``node ENTRY --database DB`` as the original client starts it: detached, no stdin/stdout."""

    def __init__(self, node: str, entry: Path, database: str, env: dict[str, str]) -> None:
        """Start the entry, keeping its stderr (a few lines) for the checks."""
        self.began = time.monotonic()
        self.process = subprocess.Popen(
            [node, str(entry), "--database", database],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )

    def hello(self, socket: Path) -> tuple[HostClient, float]:
        """Connect as the client does, for at most its 10 s; the client and the seconds it took."""
        deadline = self.began + CLIENT_WAIT_SECONDS
        while True:
            try:
                client = HostClient.connect(socket, timeout=2.0)
            except (HostUnavailableError, HelloError):
                if time.monotonic() >= deadline or self.process.poll() is not None:
                    raise AssertionError(self.stop()[1]) from None
                time.sleep(0.05)
                continue
            return client, time.monotonic() - self.began

    def stop(self) -> tuple[int, str]:
        """SIGTERM to the entry (not its group): it must pass it on; its exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            _, err = self.process.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            _, err = self.process.communicate(timeout=STOP_SECONDS)
        return self.process.returncode, err.decode(errors="replace")


def _env(**more: str) -> dict[str, str]:
    """The test's environment without PWF_BIN or PWF_DB, with ``more``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PWF_BIN", "PWF_DB")}
    env.update(more)
    return env


def _status(client: HostClient) -> dict[str, object]:
    answer = client.request(line("host.status", rid="status-1"))
    assert "accepted" == answer["outcome"], answer
    receipt = answer["receipt"]
    assert isinstance(receipt, dict)
    return receipt


class TestTheOriginalClientStartsPwf:
    """The entry runs pwf serve on a database that does not exist yet; hello within 10 s."""

    def test_a_new_database_in_a_new_directory(self, node: str, place: Path) -> None:
        db = place / "new" / "dir" / "state.db"
        started = Started(node, _entry(), str(db), _env(PWF_BIN=PWF))
        try:
            client, seconds = started.hello(socket_path(db))
            with client:
                assert client.hello["packageVersion"] == "0.16.1"
                status = _status(client)
                assert ("running", 1) == (status["state"], status["epoch"])
            assert seconds < CLIENT_WAIT_SECONDS
        finally:
            code, err = started.stop()
        assert 0 == code, err
        assert f"[pwf host] created the state database {db}" in err
        assert "[pwf host] stopped" in err
        for directory in (place / "new", place / "new" / "dir", place / "new" / "dir" / "host"):
            assert 0o700 == stat.S_IMODE(directory.stat().st_mode), directory
        assert 0o600 == stat.S_IMODE(db.stat().st_mode)
        assert not (db.parent / "host" / "host.sock").exists()
        types = [row[0] for row in rows(db, "SELECT type FROM events ORDER BY seq")]
        assert ["host.claimed", "command.recorded", "host.released"] == types
        verified = pwf("verify", "--db", str(db))
        assert 0 == verified.returncode, verified.stderr

    def test_the_entry_finds_the_pwf_of_its_installation(self, node: str, place: Path) -> None:
        """A wheel puts the entry in <prefix>/lib/pythonX.Y/site-packages/pwf/, pwf in bin/."""
        prefix = place / "prefix"
        package = prefix / "lib" / "python3.11" / "site-packages" / "pwf"
        package.mkdir(parents=True)
        entry = package / "host-entry.cjs"
        shutil.copy2(_entry(), entry)
        (prefix / "bin").mkdir()
        (prefix / "bin" / "pwf").symlink_to(PWF)
        db = place / "state.db"
        started = Started(node, entry, str(db), _env(PATH="/usr/bin:/bin"))
        try:
            client, _ = started.hello(socket_path(db))
            with client:
                assert "running" == _status(client)["state"]
        finally:
            code, err = started.stop()
        assert 0 == code, err

    def test_the_entry_finds_pwf_on_the_path(self, node: str, place: Path) -> None:
        bare = place / "bare"
        bare.mkdir()
        entry = bare / "host-entry.cjs"
        shutil.copy2(_entry(), entry)
        db = place / "state.db"
        path = f"{os.path.dirname(PWF)}:/usr/bin:/bin"  # noqa: PTH120 - a PATH entry is text
        started = Started(node, entry, str(db), _env(PATH=path))
        try:
            client, _ = started.hello(socket_path(db))
            client.close()
        finally:
            code, err = started.stop()
        assert 0 == code, err

    def test_without_pwf_the_entry_says_so_and_exits_1(self, node: str, place: Path) -> None:
        if shutil.which("pwf", path="/usr/bin:/bin") is not None:
            pytest.skip("a pwf is installed in /usr/bin or /bin")
        bare = place / "bare"
        bare.mkdir()
        entry = bare / "host-entry.cjs"
        shutil.copy2(_entry(), entry)
        db = place / "state.db"
        done = subprocess.run(
            [node, str(entry), "--database", str(db)],
            capture_output=True,
            timeout=STOP_SECONDS,
            env=_env(PATH="/usr/bin:/bin"),
            check=False,
        )
        message = (
            "[pwf host entry] cannot find pwf: set PWF_BIN to the pwf command, or put it on PATH"
        )
        assert (1, message) == (done.returncode, done.stderr.decode().strip())
        assert not db.exists()

    def test_pwf_serve_refusing_ends_the_entry_with_its_code(self, node: str, place: Path) -> None:
        """A file that is not a pwf database is refused as before, and left as it was."""
        db = place / "other.db"
        db.write_bytes(b"not a database, some other program's file\n")
        done = subprocess.run(
            [node, str(_entry()), "--database", str(db)],
            capture_output=True,
            timeout=STOP_SECONDS,
            env=_env(PWF_BIN=PWF),
            check=False,
        )
        assert 2 == done.returncode
        assert (
            done.stderr.decode()
            .strip()
            .endswith(f"Error: {db}: not a pwf database or damaged (file is not a database)")
        )
        assert b"not a database, some other program's file\n" == db.read_bytes()


class TestTheSocketPath:
    """pwf listens where the original client looks: path.resolve is lexical (HOST §1.1)."""

    def test_pwf_computes_the_clients_socket_path(
        self, node: str, place: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        real = place / "real" / "deeper"
        real.mkdir(parents=True)
        (place / "link").symlink_to(real)
        spellings = [
            "state.db",
            "./a/../state.db",
            "a//b/./state.db",
            "link/../state.db",
            f"{place}/link/../state.db",
            f"{place}//x/./y/../state.db/",
        ]
        done = subprocess.run(
            [node, "-e", CLIENT_SOCKET_PATH, *spellings],
            capture_output=True,
            cwd=place,
            timeout=STOP_SECONDS,
            check=True,
        )
        expected = done.stdout.decode().splitlines()
        assert str(place / "host" / "host.sock") == expected[3] == expected[4]
        monkeypatch.chdir(place)
        assert expected == [str(socket_path(spelling)) for spelling in spellings]
        assert expected == [str(HostPaths(Path(spelling)).socket) for spelling in spellings]

    def test_the_host_listens_there_through_a_link(self, node: str, place: Path) -> None:
        """``link/../state.db`` is ``./state.db`` to the original, link or not; so it is to pwf."""
        real = place / "real" / "deeper"
        real.mkdir(parents=True)
        (place / "link").symlink_to(real)
        spelled = f"{place}/link/../state.db"
        done = subprocess.run(
            [node, "-e", CLIENT_SOCKET_PATH, spelled],
            capture_output=True,
            timeout=STOP_SECONDS,
            check=True,
        )
        socket = Path(done.stdout.decode().strip())
        assert place / "host" / "host.sock" == socket
        started = Started(node, _entry(), spelled, _env(PWF_BIN=PWF))
        try:
            client, _ = started.hello(socket)
            client.close()
        finally:
            code, err = started.stop()
        assert 0 == code, err
        assert (place / "state.db").is_file()
        assert not (place / "real" / "state.db").exists()


class TestServeOptions:
    """``--database`` is ``--db``; ``--print-entry`` names the shipped entry."""

    def test_db_and_database_naming_two_files_is_bad_input(self, place: Path) -> None:
        done = pwf("serve", "--db", str(place / "a.db"), "--database", str(place / "b.db"))
        message = (
            f"Error: --db ({place / 'a.db'}) and --database ({place / 'b.db'})"
            " name different databases"
        )
        assert (2, message) == (done.returncode, done.stderr.decode().strip())
        assert [] == list(place.iterdir())

    def test_the_entry_is_executable_node(self) -> None:
        entry = _entry()
        assert entry.name == "host-entry.cjs"
        assert entry.read_text().startswith("#!/usr/bin/env node\n")
        assert os.access(entry, os.X_OK)

    def test_a_socket_path_too_long_is_refused_before_the_database_is_made(
        self, place: Path
    ) -> None:
        deep = place / ("d" * 90)
        done = pwf("serve", "--database", str(deep / "state.db"))
        assert 2 == done.returncode
        assert done.stderr.decode().strip().startswith("Error: the host socket path ")
        assert not deep.exists()

    def test_an_empty_file_is_made_a_database(self, place: Path) -> None:
        """An empty file is what a database another start is making looks like until it commits."""
        db = place / "state.db"
        db.touch()
        started = subprocess.Popen(
            [PWF, "serve", "--database", str(db)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            client = _until_hello(db, started)
            client.close()
        finally:
            started.send_signal(signal.SIGTERM)
            _, err = started.communicate(timeout=STOP_SECONDS)
        assert 0 == started.returncode, err
        assert 0 == pwf("verify", "--db", str(db)).returncode

    def test_two_starts_on_a_new_path_make_one_database(self, place: Path) -> None:
        """One host serves it; the other is refused by the lock or the claim, never by the file."""
        for round_number in range(3):
            db = place / f"round-{round_number}" / "state.db"
            starts = [
                subprocess.Popen(
                    [PWF, "serve", "--database", str(db)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                for _ in range(2)
            ]
            try:
                _until_hello(db, *starts).close()
                deadline = time.monotonic() + STOP_SECONDS
                while all(start.poll() is None for start in starts):
                    assert time.monotonic() < deadline, "both starts still run"
                    time.sleep(0.05)
            finally:
                for start in starts:
                    if start.poll() is None:
                        start.send_signal(signal.SIGTERM)
                ends = [start.communicate(timeout=STOP_SECONDS) for start in starts]
            codes = sorted(start.returncode for start in starts)
            errors = [err.decode().strip().splitlines()[-1] for _, err in ends]
            assert [0, 3] == codes, errors
            [refused] = [error for error in errors if error.startswith("Error:")]
            assert refused.startswith(
                ("Error: A workflow host is already running", "Error: A live Pi Workflows host")
            ), refused
            assert 0 == pwf("verify", "--db", str(db)).returncode


def _until_hello(db: Path, *processes: subprocess.Popen[bytes]) -> HostClient:
    """A connection to the host of ``db`` within the client's 10 s, while one process lives."""
    deadline = time.monotonic() + CLIENT_WAIT_SECONDS
    while True:
        try:
            return HostClient.connect(socket_path(db), timeout=2.0)
        except (HostUnavailableError, HelloError):
            assert any(process.poll() is None for process in processes), "every start ended"
            assert time.monotonic() < deadline, "no host answered within 10 s"
            time.sleep(0.05)
