"""``pwf serve`` as a real process: start-up, lock, claim, hello, frames, clients (HOST §1)."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pwf.client import HelloError, HostClient

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration._served import Served, init, line, pwf, rows, run_start, short_dir, until
else:
    from _served import Served, init, line, pwf, rows, run_start, short_dir, until

pytestmark = pytest.mark.slow


@pytest.fixture
def db() -> Iterator[Path]:
    """A fresh database in a directory short enough for the host socket."""
    with short_dir() as directory:
        path = directory / "state.db"
        init(path)
        yield path


@pytest.fixture
def host(db: Path) -> Iterator[Served]:
    """A running ``pwf serve`` over ``db``."""
    served = Served(db)
    yield served
    served.close()


def _raw(served: Served) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(30)
    sock.connect(str(served.socket))
    return sock


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1 << 16)
        if not chunk:
            return data
        data += chunk
    return data


def _closed(sock: socket.socket) -> bool:
    """Whether the host closed ``sock``: reading gives end of file or a reset."""
    try:
        while chunk := sock.recv(1 << 16):
            del chunk
    except ConnectionResetError:
        return True
    return True


class TestStart:
    """The state directory, the lock, the claim and the socket (HOST §1.1-§1.8)."""

    def test_files_modes_and_lock_content(self, host: Served) -> None:
        """host/ is 0700, the socket 0600, the lock names this pid and its /proc start time."""
        state = host.db.parent / "host"
        assert 0o700 == stat.S_IMODE(state.stat().st_mode)
        assert 0o600 == stat.S_IMODE(host.socket.stat().st_mode)
        lock = state / "host.lock.json"
        assert 0o600 == stat.S_IMODE(lock.stat().st_mode)
        content = json.loads(lock.read_text())
        ticks = Path(f"/proc/{host.process.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        assert {"schema", "pid", "startIdentity", "hostId"} == set(content)
        assert ("pi-workflows.host-lock.v1", host.process.pid) == (
            content["schema"],
            content["pid"],
        )
        assert f"linux-proc-start:{ticks}" == content["startIdentity"]
        assert content["hostId"].startswith("host-")
        assert lock.read_text().endswith("}\n")
        [(epoch, host_id, expires, heartbeat)] = rows(
            host.db, "SELECT epoch, host_id, expires_at, heartbeat_at FROM host_state"
        )
        assert (1, content["hostId"], 30000) == (epoch, host_id, expires - heartbeat)

    def test_a_second_host_is_refused_by_the_lock(self, host: Served) -> None:
        """A second ``pwf serve`` exits non-zero naming the first one's pid; nothing is appended."""
        before = rows(host.db, "SELECT count(*) FROM events")
        second = pwf("serve", "--db", str(host.db))
        assert 0 != second.returncode
        message = f"A workflow host is already running with PID {host.process.pid}"
        assert f"Error: {message}" == second.stderr.decode().strip()
        assert before == rows(host.db, "SELECT count(*) FROM events")

    def test_the_claim_is_the_second_guard_and_a_stale_lock_is_replaced(self, db: Path) -> None:
        """After kill -9 the stale lock is replaced, but the live lease still refuses the host."""
        first = Served(db)
        first.kill()
        events = rows(db, "SELECT count(*) FROM events")
        second = pwf("serve", "--db", str(db))
        assert 0 != second.returncode
        assert (
            "Error: A live Pi Workflows host already owns epoch 1"
            == (second.stderr.decode().strip().splitlines()[-1])
        )
        assert events == rows(db, "SELECT count(*) FROM events")
        assert not (db.parent / "host" / "host.lock.json").exists()

    def test_direct_mode_is_refused_while_served(self, host: Served) -> None:
        """``pwf request`` and ``pwf worker`` refuse while a host holds a live claim (ADR 0010)."""
        refusal = "Error: a live pwf host (epoch 1) owns this database; send requests to it instead"
        request = pwf("request", "--db", str(host.db), stdin=line("host.status", rid="r-1") + b"\n")
        worker = pwf("worker", "--db", str(host.db), stdin=b"{}\n")
        assert (3, refusal) == (request.returncode, request.stderr.decode().strip())
        assert (3, refusal) == (worker.returncode, worker.stderr.decode().strip())

    def test_a_socket_path_too_long_is_refused_before_anything(self) -> None:
        """A database whose socket path exceeds 107 bytes gets one clear line; nothing is made."""
        with short_dir() as directory:
            deep = directory / ("d" * 90)
            deep.mkdir()
            path = deep / "state.db"
            assert 0 == pwf("init", "--db", str(path)).returncode
            result = pwf("serve", "--db", str(path))
            assert 2 == result.returncode
            error = result.stderr.decode().strip()
            assert error.startswith("Error: the host socket path ")
            assert "over the 107 a Unix socket allows" in error
            assert not (deep / "host").exists()
            assert [(0,)] == rows(path, "SELECT count(*) FROM events")

    def test_the_exact_socket_limit_is_accepted(self) -> None:
        """A socket path of exactly 107 bytes is a valid Unix socket path."""
        with short_dir() as directory:
            room = 107 - len(str(directory / "x" / "host" / "host.sock")) + 1
            deep = directory / ("x" * room)
            deep.mkdir()
            path = deep / "state.db"
            assert 107 == len(str(deep / "host" / "host.sock"))
            assert 0 == pwf("init", "--db", str(path)).returncode
            served = Served(path)
            try:
                assert 0 == served.terminate()
            finally:
                served.close()


class TestConnections:
    """Hello first, NDJSON rules, and one bad connection never hurts another (§1.10-§1.15)."""

    def test_the_host_speaks_first(self, host: Served) -> None:
        """Before the client sends anything, the hello arrives with the original's version."""
        with _raw(host) as sock:
            hello = json.loads(_read_line(sock))
        assert ["connectionId", "packageVersion", "schema", "type"] == list(hello)
        assert ("hello", "pi-workflows.client.v1", "0.16.1") == (
            hello["type"],
            hello["schema"],
            hello["packageVersion"],
        )
        assert hello["connectionId"].startswith("connection-")

    def test_a_client_of_another_version_refuses_the_host(self, host: Served) -> None:
        """The client checks the hello's version, as the original's does."""
        with pytest.raises(HelloError, match=r"^Workflow client version mismatch: host 0\.16\.1"):
            HostClient.connect(host.socket, version="0.17.0")

    @pytest.mark.parametrize(
        "frame",
        [
            b'{"type":"request", "schema":"x"}\n',
            (
                b'{"connectionId":"c","packageVersion":"0.16.1",'
                b'"schema":"pi-workflows.client.v1","type":"hello"}\n'
            ),
            b"x" * (1 << 20) + b"\n",
            b"y" * ((1 << 20) + 10),
        ],
        ids=["non-canonical", "hello-from-client", "frame-over-1MiB", "no-newline-over-1MiB"],
    )
    def test_a_bad_frame_closes_only_its_connection(self, host: Served, frame: bytes) -> None:
        """The offending connection is closed with nothing sent; another one is still answered."""
        other = host.client()
        with _raw(host) as sock:
            _read_line(sock)
            sock.sendall(frame)
            assert _closed(sock)
        response = other.request(line("host.status", rid="after-bad-frame"))
        assert "accepted" == response["outcome"]
        other.close()

    def test_an_answer_over_one_mib_closes_only_that_connection(self, host: Served) -> None:
        """A run.list answer over 1 MiB closes its connection; a smaller one is answered."""
        client = host.client()
        count = 6
        for number in range(count):
            start = json.loads(run_start(number))
            start["payload"]["workflowName"] = "w" * 200_000
            assert "accepted" == client.request(start)["outcome"]
        with _raw(host) as sock:
            _read_line(sock)
            sock.sendall(line("run.list", {"limit": 4}, rid="list-1") + b"\n")
            assert "accepted" == json.loads(_read_line(sock))["outcome"]
            sock.sendall(line("run.list", {"limit": count}, rid="list-2") + b"\n")
            assert _closed(sock)
        assert "accepted" == client.request(line("host.status", rid="still-here"))["outcome"]
        client.close()

    def test_requests_on_one_connection_are_pipelined(self, host: Served) -> None:
        """Many requests sent at once on one connection are each answered once, by requestId."""
        client = host.client()
        lines = [run_start(number) for number in range(1, 41)]
        client.send(b"\n".join(lines))
        answers = [client.response(f"r-{number}")[0] for number in range(1, 41)]
        assert {"accepted"} == {answer["outcome"] for answer in answers}
        assert 40 == rows(host.db, "SELECT count(*) FROM runs")[0][0]
        client.close()

    def test_many_concurrent_clients(self, host: Served) -> None:
        """Sixteen clients at once: every request answered once and recorded once."""
        failures: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                with host.client() as client:
                    for number in range(worker * 100, worker * 100 + 15):
                        answer = client.request(run_start(number, client=f"c-{worker}"))
                        assert "accepted" == answer["outcome"], answer
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                failures.append(error)

        threads = [threading.Thread(target=work, args=(worker,)) for worker in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert [] == failures
        assert [(240, 240)] == rows(
            host.db, "SELECT count(*), count(DISTINCT request_id) FROM host_commands"
        )
        assert 0 == pwf("log", "verify", "--db", str(host.db)).returncode

    def test_a_client_killed_mid_request_leaves_the_host_serving(self, host: Served) -> None:
        """A client process killed while its requests are in flight; its retry is adopted."""
        script = (
            "import sys,socket;from pwf.client import HostClient;"
            f"c=HostClient.connect({str(host.socket)!r});"
            "c.send(sys.stdin.buffer.read().rstrip(b'\\n'));"
            "print('sent',flush=True);import time;time.sleep(60)"
        )
        import subprocess  # noqa: PLC0415 - only this test spawns a bare client
        import sys  # noqa: PLC0415

        requests = b"\n".join(run_start(number) for number in range(1, 31))
        child = subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert child.stdin is not None
        assert child.stdout is not None
        child.stdin.write(requests + b"\n")
        child.stdin.close()
        assert b"sent\n" == child.stdout.readline()
        child.kill()
        child.wait(60)
        child.stdout.close()
        until(lambda: rows(host.db, "SELECT count(*) FROM host_commands")[0][0] >= 1)
        with host.client() as client:
            retried = client.request(run_start(1))
            assert "accepted" == client.request(line("host.status", rid="after-kill"))["outcome"]
        assert "adopted" == retried["outcome"]


class TestCall:
    """``pwf call`` sends stdin lines to the host and prints one answer each."""

    def test_call_prints_one_canonical_answer_per_line(self, host: Served) -> None:
        """Two lines, two answers in order; a retry of the first is adopted."""
        stdin = run_start(1) + b"\n# a comment\n" + line("host.status", rid="s-1") + b"\n"
        result = pwf("call", "--db", str(host.db), stdin=stdin + run_start(1) + b"\n")
        assert (0, b"") == (result.returncode, result.stderr)
        answers = [json.loads(text) for text in result.stdout.splitlines()]
        assert ["r-1", "s-1", "r-1"] == [answer["requestId"] for answer in answers]
        assert ["accepted", "accepted", "adopted"] == [answer["outcome"] for answer in answers]

    def test_call_reconnects_to_the_next_host(self, db: Path) -> None:
        """A line sent while no host runs waits for the next one; a repeated line is adopted."""
        import subprocess  # noqa: PLC0415 - only these tests keep a pwf call running

        first = Served(db)
        call = subprocess.Popen(
            [str(Path(sys.executable).with_name("pwf")), "call", "--db", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert call.stdin is not None
        assert call.stdout is not None
        try:
            call.stdin.write(run_start(1) + b"\n")
            call.stdin.flush()
            assert "accepted" == json.loads(call.stdout.readline())["outcome"]
            assert 0 == first.terminate()
            call.stdin.write(run_start(2) + b"\n" + run_start(1) + b"\n")
            call.stdin.flush()
            second = Served(db)
            try:
                assert "accepted" == json.loads(call.stdout.readline())["outcome"]
                assert "adopted" == json.loads(call.stdout.readline())["outcome"]
                call.stdin.close()
                assert 0 == call.wait(60)
            finally:
                second.close()
        finally:
            first.close()
            if call.poll() is None:
                call.kill()
                call.wait(60)
            call.stdout.close()

    def test_call_refuses_a_line_that_is_not_a_request_and_goes_on(self, host: Served) -> None:
        """A bad line is one ``line N: why`` on stderr and exit 2; the next line still runs."""
        stdin = b"[1]\n" + line("host.status", rid="s-2") + b"\n"
        result = pwf("call", "--db", str(host.db), stdin=stdin)
        assert 2 == result.returncode
        assert "line 1: Expected client request" == result.stderr.decode().strip()
        assert "s-2" == json.loads(result.stdout)["requestId"]

    def test_call_refuses_a_line_the_host_closes_on(self, host: Served) -> None:
        """A non-canonical request line makes the host close the connection; it is refused."""
        bad = b'{"requestId": "x", "type": "request"}'
        result = pwf("call", "--db", str(host.db), stdin=bad + b"\n")
        assert 2 == result.returncode
        assert result.stderr.decode().startswith("line 1: the host closed the connection")

    def test_call_says_where_a_line_the_host_closes_on_is_not_canonical(self, host: Served) -> None:
        """The refusal names the first byte where the line differs from its canonical form."""
        bad = line("host.status", rid="s-3").replace(b'{"clientId"', b'{ "clientId"')
        result = pwf("call", "--db", str(host.db), stdin=bad + b"\n")
        assert 2 == result.returncode
        assert (
            "line 1: the host closed the connection on this line: Client protocol message must"
            " use canonical JSON: not canonical JSON (first difference at byte 1);"
            " pass --canonicalize to rewrite it"
        ) == result.stderr.decode().strip()

    def test_call_canonicalize_sends_the_canonical_form(self, host: Served) -> None:
        """--canonicalize rewrites key order and spacing, says so once, and the host answers."""
        members = json.loads(line("host.status", rid="s-4"))
        shuffled = json.dumps(dict(reversed(list(members.items()))), indent=None)
        stdin = (shuffled + "\n" + shuffled.replace("s-4", "s-5") + "\n").encode()
        result = pwf("call", "--canonicalize", "--db", str(host.db), stdin=stdin)
        assert 0 == result.returncode, result.stderr
        assert ["s-4", "s-5"] == [json.loads(x)["requestId"] for x in result.stdout.splitlines()]
        assert [
            "note: --canonicalize rewrites input lines into canonical JSON before sending"
        ] == result.stderr.decode().splitlines()

    def test_call_canonicalize_refuses_a_line_that_is_not_json(self, host: Served) -> None:
        result = pwf("call", "--canonicalize", "--db", str(host.db), stdin=b"{nope\n")
        assert 2 == result.returncode
        assert result.stderr.decode().startswith("line 1: ")
        assert 1 == len(result.stderr.decode().splitlines())

    def test_call_without_a_host_says_so_at_once(self, db: Path) -> None:
        """No host: one line naming the socket and how to start a host, exit 3, no wait."""
        started = time.monotonic()
        result = pwf("call", "--db", str(db), stdin=run_start(1) + b"\n")
        assert time.monotonic() - started < 10  # the default --retry-for is 30 s; no wait here
        assert 3 == result.returncode
        sock = db.parent / "host" / "host.sock"
        assert (
            f"Error: no pwf host is running at {sock}; start one with: pwf serve --db {db}"
            " (or pass --wait SECONDS to wait for it)\n"
        ) == result.stderr.decode()

    def test_call_waits_for_a_host_when_asked(self, db: Path) -> None:
        """--wait S: the line waits for a host that starts meanwhile."""
        import subprocess  # noqa: PLC0415 - only these tests keep a pwf call running

        call = subprocess.Popen(
            [str(Path(sys.executable).with_name("pwf")), "call", "--db", str(db), "--wait", "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert call.stdout is not None
        try:
            assert call.stdin is not None
            call.stdin.write(run_start(1) + b"\n")
            call.stdin.close()
            time.sleep(0.3)
            assert call.poll() is None  # still waiting: no host yet
            host = Served(db)
            try:
                assert "accepted" == json.loads(call.stdout.readline())["outcome"]
                assert 0 == call.wait(60)
            finally:
                host.close()
        finally:
            if call.poll() is None:
                call.kill()
                call.wait(60)
            call.stdout.close()

    def test_restore_is_refused_while_the_host_serves(self, db: Path) -> None:
        """``pwf state restore`` leaves a served database alone and says why."""
        backup = db.with_name("b.db")
        assert 0 == pwf("state", "backup", str(backup), "--db", str(db)).returncode
        served = Served(db)
        try:
            before = pwf("log", "head", "--db", str(db)).stdout
            done = pwf("state", "restore", str(backup), "--db", str(db))
            after = pwf("log", "head", "--db", str(db)).stdout
        finally:
            served.close()
        assert 0 != done.returncode
        [message] = done.stderr.decode().splitlines()
        assert message.startswith("Error: "), message
        assert "host" in message, message
        assert not list(db.parent.glob("state.db.before-restore-*"))
        assert before == after

    def test_call_imports_no_heavy_module(self) -> None:
        """``pwf call`` loads neither click, pydantic, structlog nor the command modules."""
        import subprocess  # noqa: PLC0415
        import sys  # noqa: PLC0415

        probe = (
            "import sys;sys.argv=['pwf','call','--help'];from pwf._entry import main\n"
            "try:\n main()\nexcept SystemExit:\n pass\n"
            "heavy=('click','pydantic','structlog','msgspec','sqlite3','asyncio')\n"
            "bad=[m for m in sys.modules if m.split('.')[0] in heavy"
            " or m=='pwf.cli' or m.startswith('pwf.cli.')]\n"
            "print(bad)"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, check=True, env=os.environ
        ).stdout.decode()
        assert "[]" == out.strip().splitlines()[-1]
