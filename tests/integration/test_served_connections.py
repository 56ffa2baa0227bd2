"""A client that leaks connections cannot take a served host's file descriptors (ADR 0110).

Before, a host admitted every connection.  One client process that opened
1 100 and kept them idle took every descriptor of a host started with the
common soft limit of 1 024: no other client got a hello, and nothing the
host opens for itself (its database files, a verify's forked walk, a
worker's pipes) could be opened either.  Now the host admits at most
``most`` connections at once and one client process at most half of them;
a connection past either bound is closed before its hello.
"""

from __future__ import annotations

import logging
import resource
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from pwf.client import HelloError, HostClient
from pwf.server._listener import (
    CLOSINGS_BURST,
    MOST_CONNECTIONS,
    RESERVED_DESCRIPTORS,
    most_connections,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._hosted import Hosted
    from tests.integration._served import init, line, short_dir, until
else:
    from _hosted import Hosted
    from _served import init, line, short_dir, until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="peers are told apart on Linux")

MOST = 8

_ELSEWHERE = """
import sys, time
from pwf.client import HelloError, HostClient
held = []
for _ in range(int(sys.argv[2])):
    try:
        held.append(HostClient.connect(sys.argv[1], timeout=10))
    except HelloError:
        print("refused", flush=True)
        break
else:
    print("admitted", flush=True)
sys.stdin.read()  # hold them until the test is done
"""


@pytest.fixture
def hosted() -> Iterator[Hosted]:
    with short_dir() as tmp:
        db = tmp / "state.db"
        init(db)
        host = Hosted(db, connections=MOST)
        try:
            yield host
        finally:
            host.close()


def _elsewhere(path: Path, count: int) -> tuple[subprocess.Popen[str], str]:
    """Another client process that opens ``count`` connections and holds them."""
    process = subprocess.Popen(
        [sys.executable, "-c", _ELSEWHERE, str(path), str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _refused(path: Path) -> bool:
    """A new connection of this process gets no hello."""
    try:
        HostClient.connect(path, timeout=10).close()
    except HelloError:
        return True
    return False


def _answered(client: HostClient, rid: str) -> str:
    client.send(line("host.status", rid=rid))
    return str(client.response(rid)[0]["outcome"])


def test_one_process_holds_at_most_half_and_others_are_still_admitted(hosted: Hosted) -> None:
    path = hosted.server.paths.socket
    mine = [HostClient.connect(path, timeout=10) for _ in range(MOST // 2)]
    try:
        assert _refused(path)
        assert hosted.server.listener.refused == 1
        other, said = _elsewhere(path, 1)
        try:
            assert said == "admitted"
        finally:
            other.communicate("")
        assert all(_answered(client, f"r-{n}") == "accepted" for n, client in enumerate(mine))
        mine.pop().close()  # a closed connection frees its place
        until(lambda: len(hosted.server.listener.admitted) == MOST // 2 - 1, 10, "the close")
        mine.append(HostClient.connect(path, timeout=10))
    finally:
        for client in mine:
            client.close()


def test_the_host_admits_at_most_its_bound(hosted: Hosted) -> None:
    path = hosted.server.paths.socket
    mine = [HostClient.connect(path, timeout=10) for _ in range(MOST // 2)]
    other, said = _elsewhere(path, MOST // 2)
    try:
        assert said == "admitted"
        assert len(hosted.server.listener.admitted) == MOST
        third, refused = _elsewhere(path, 1)
        third.communicate("")
        assert refused == "refused"
    finally:
        other.communicate("")
        for client in mine:
            client.close()
    until(lambda: not hosted.server.listener.admitted, 10, "every connection closed")
    with HostClient.connect(path, timeout=10) as client:
        assert _answered(client, "after") == "accepted"


def test_a_refused_connection_costs_the_writer_nothing(hosted: Hosted) -> None:
    """Many connections refused in a row: no detach is decided for any of them."""
    path = hosted.server.paths.socket
    mine = [HostClient.connect(path, timeout=10) for _ in range(MOST // 2)]
    submitted: list[object] = []
    writer = hosted.server.writer
    assert writer is not None
    real = writer.submit

    def counting(work: Any, **kwargs: Any) -> Any:
        submitted.append(work)
        return real(work, **kwargs)

    writer.submit = counting  # type: ignore[method-assign]
    try:
        for _ in range(50):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(10)
                sock.connect(str(path))
                assert sock.recv(1) == b""  # closed before any hello
        time.sleep(0.2)
        assert submitted == []
        assert hosted.server.listener.refused == 50
    finally:
        writer.submit = real  # type: ignore[method-assign]
        for client in mine:
            client.close()


_LIMITS = """
import resource
from pwf.server._listener import most_connections
print(most_connections(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


@pytest.mark.parametrize("soft", [64, 1024])
def test_the_bound_comes_from_the_raised_descriptor_limit(soft: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < soft:
        pytest.skip("the hard limit is below the soft limit this case sets")
    found = subprocess.run(
        [sys.executable, "-c", _LIMITS],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    wanted = MOST_CONNECTIONS + RESERVED_DESCRIPTORS
    raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    assert int(found[1]) == raised
    assert int(found[0]) == max(16, min(MOST_CONNECTIONS, raised - RESERVED_DESCRIPTORS))
    assert most_connections() <= MOST_CONNECTIONS


def test_connections_closed_for_what_their_clients_sent_are_logged_within_a_budget(
    hosted: Hosted, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, each was one log line: 455 KB a second from one rude client (ADR 0122 D6)."""
    path = str(hosted.server.paths.socket)
    caplog.set_level(logging.INFO, logger="pwf.server")
    for _ in range(CLOSINGS_BURST * 3):
        with socket.socket(socket.AF_UNIX) as rude:
            rude.connect(path)
            rude.recv(4096)  # the hello
            rude.sendall(b"{not json\n")
            while rude.recv(4096):  # until the host closes it
                pass
    said = [record.getMessage() for record in caplog.records if record.name == "pwf.server"]
    closings = [text for text in said if text.startswith("closing connection-")]
    assert CLOSINGS_BURST <= len(closings) < CLOSINGS_BURST * 2, said
    assert "Client protocol message must use canonical JSON" in closings[0]
    assert any(
        text.endswith("more connections closed for what their clients sent or did") for text in said
    )
    with HostClient.connect(path, timeout=10) as client:
        assert _answered(client, "after") == "accepted"
