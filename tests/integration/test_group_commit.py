"""Group commit changes nothing a request can see (the served host's writer, ADR 0028).

The same request sequence goes through one client that sends it all at
once, through eight clients at the same time, and through ``pwf request``.
The served host decides requests that arrive during a commit together in
the next transaction, each in its own savepoint and batch, yet the log is
byte for byte the one that one transaction per request writes, and every
answer is the one the request gets alone.  The clock is fixed.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pwf.cli._options import open_store
from pwf.events import Actor
from pwf.host import Host
from pwf.protocol.client import encode_response, parse_request
from pwf.views.status import Live

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests._tally import tally
    from tests.integration._hosted import AT, Hosted
    from tests.integration._served import line, run_start, short_dir
else:
    from _hosted import AT, Hosted
    from _served import line, run_start, short_dir

    from _tally import tally

pytestmark = pytest.mark.slow

CLIENTS = 8


def _client_lines(client: int) -> list[bytes]:
    """One client's requests: starts, a replay, a key conflict, reads, refusals, a thrown one."""
    name = f"c-{client}"
    base = client * 100
    starts = [run_start(base + number, client=name) for number in range(5)]
    replay = json.loads(starts[0])
    replay["requestId"] = f"replay-{client}"
    conflict = json.loads(run_start(base + 1, client=name))
    conflict["requestId"] = f"conflict-{client}"
    conflict["payload"]["input"] = {"other": True}
    return [
        *starts,
        json.dumps(replay, separators=(",", ":"), sort_keys=True).encode(),
        json.dumps(conflict, separators=(",", ":"), sort_keys=True).encode(),
        line("run.status", rid=f"status-{client}", client=name, run_id=f"run-{base}"),
        line("run.cancel", rid=f"cancel-{client}", client=name, run_id=f"run-{base + 1}"),
        line("run.pause", rid=f"pause-{client}", client=name, run_id=f"run-{base + 2}"),
        line("run.status", rid=f"thrown-{client}", client=name),
        line("run.status", rid=f"status-late-{client}", client=name, run_id=f"run-{base + 3}"),
    ]


def _sequence(*, statuses: bool = True) -> list[bytes]:
    """Every client's lines interleaved round-robin, with host.status reads among them.

    ``host.status`` says ``running`` when served and ``direct`` in direct
    mode, so the comparison with ``pwf request`` leaves it out.
    """
    per_client = [_client_lines(client) for client in range(CLIENTS)]
    ordered: list[bytes] = []
    for index, row in enumerate(zip(*per_client, strict=True)):
        ordered.extend(row)
        if statuses:
            ordered.append(line("host.status", rid=f"host-status-{index}"))
    return ordered


def _rid(request: bytes) -> str:
    return str(json.loads(request)["requestId"])


def _events(db: Path, after: int) -> list[tuple[int, int, bytes]]:
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return connection.execute(
            "SELECT seq, batch, body FROM events WHERE seq > ? ORDER BY seq", (after,)
        ).fetchall()
    finally:
        connection.close()


def _head(db: Path) -> int:
    events = _events(db, 0)
    return events[-1][0] if events else 0


def _snapshot(db: Path, copy: Path) -> None:
    source = sqlite3.connect(db)
    target = sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def _alone(copy: Path, requests: list[bytes]) -> dict[str, bytes]:
    """Each request in its own transaction, in order, as the host's actor and epoch 1."""
    with open_store(str(copy)) as store:
        host = Host(store, actor=Actor(type="host", id="host-test"), host_epoch=1)
        # What the served host knew of itself: listening, one client, no workers (HOST §3.1).
        host.status_live = lambda: Live(
            socket_available=True, active_workers=0, connected_clients=1
        )
        return {
            _rid(request): encode_response(host.request(parse_request(request), AT))
            for request in requests
        }


@pytest.fixture
def db() -> Iterator[Path]:
    """A fresh database in a short directory."""
    with short_dir() as directory:
        path = directory / "state.db"
        open_store(str(path), create=True).close()
        yield path


def _serve(db: Path, send: Any) -> tuple[dict[str, bytes], list[bytes], Path, int]:
    """Start a host, snapshot its database, run ``send``; answers, served order, copy, head."""
    hosted = Hosted(db)
    counts = tally(hosted.server.writer) if hosted.server.writer else None
    try:
        head = _head(db)
        copy = db.with_name("alone.db")
        _snapshot(db, copy)
        answers, order = send(hosted)
        groups = counts["group"] if counts is not None else 0
    finally:
        hosted.close()
    assert groups < len(answers), "no two requests ever shared a transaction"
    return answers, order, copy, head


def test_one_client_sending_everything_at_once(db: Path) -> None:
    """Pipelined on one connection: the same log bytes and answers as one transaction each."""
    requests = _sequence()

    def send(hosted: Hosted) -> tuple[dict[str, bytes], list[bytes]]:
        with hosted.client() as client:
            client.send(b"\n".join(requests))
            return {_rid(r): client.response(_rid(r))[1] for r in requests}, requests

    answers, order, copy, head = _serve(db, send)
    served_log = _events(db, head)[: -_released(db, head)]
    alone = _alone(copy, order)
    assert alone == answers
    assert _events(copy, head) == served_log


def test_many_clients_at_once(db: Path) -> None:
    """Eight clients racing: the log equals the arrival order decided one transaction each."""
    per_client = [_client_lines(client) for client in range(CLIENTS)]

    def send(hosted: Hosted) -> tuple[dict[str, bytes], list[bytes]]:
        answers: dict[str, bytes] = {}
        barrier = threading.Barrier(CLIENTS)

        def work(lines: list[bytes]) -> None:
            with hosted.client() as client:
                barrier.wait()
                for request in lines:
                    client.send(request)
                    answers[_rid(request)] = client.response(_rid(request))[1]

        threads = [threading.Thread(target=work, args=(lines,)) for lines in per_client]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        return answers, _arrival(db, per_client)

    answers, order, copy, head = _serve(db, send)
    served_log = _events(db, head)[: -_released(db, head)]
    assert _alone(copy, order) == answers
    assert _events(copy, head) == served_log


def test_pwf_request_gives_the_same_log_apart_from_the_host(db: Path) -> None:
    """Direct mode writes the same events, batches and answers; only actor and epoch differ."""
    requests = _sequence(statuses=False)

    def send(hosted: Hosted) -> tuple[dict[str, bytes], list[bytes]]:
        with hosted.client() as client:
            client.send(b"\n".join(requests))
            return {_rid(r): client.response(_rid(r))[1] for r in requests}, requests

    answers, _, _, head = _serve(db, send)
    served = _normalised(_events(db, head)[: -_released(db, head)])
    direct_db = db.with_name("direct.db")
    pwf = str(Path(sys.executable).with_name("pwf"))
    assert 0 == subprocess.run([pwf, "init", "--db", str(direct_db)], check=False).returncode
    result = subprocess.run(
        [pwf, "request", "--db", str(direct_db), "--at", str(AT)],
        input=b"\n".join(requests) + b"\n",
        capture_output=True,
        check=False,
    )
    assert 0 == result.returncode, result.stderr
    assert [answers[_rid(r)] for r in requests] == result.stdout.splitlines()
    assert _normalised(_events(direct_db, 0)) == served


def _released(db: Path, head: int) -> int:
    """How many events the stop appended at the end (the release of the claim)."""
    tail = _events(db, head)
    return sum(1 for _, _, body in tail if json.loads(body)["type"] == "host.released")


def _arrival(db: Path, per_client: list[list[bytes]]) -> list[bytes]:
    """The served order: recorded requests as logged, each other one after its client's previous.

    Clients share no runs or keys, so a request that appends nothing depends only
    on its own client's earlier requests.
    """
    recorded = [
        json.loads(body)["cause"]["requestId"]
        for _, _, body in _events(db, 0)
        if json.loads(body)["type"] == "command.recorded"
    ]
    position = {rid: index for index, rid in enumerate(recorded)}
    keyed: list[tuple[float, int, bytes]] = []
    for lines in per_client:
        last = -1.0
        for offset, request in enumerate(lines):
            rid = _rid(request)
            last = position[rid] if rid in position else last + 1e-3
            keyed.append((last, offset, request))
    return [request for _, _, request in sorted(keyed, key=lambda item: (item[0], item[1]))]


def _normalised(events: list[tuple[int, int, bytes]]) -> list[dict[str, Any]]:
    """Events without what names the host or the chain position: seq, hashes, actor, epoch."""
    first = events[0][1] if events else 0
    kept = []
    for _, batch, body in events:
        event = json.loads(body)
        data = {key: value for key, value in event["data"].items() if key != "hostEpoch"}
        kept.append(
            {
                "at": event["at"],
                "batch": batch - first,
                "cause": event.get("cause"),
                "data": data,
                "type": event["type"],
            }
        )
    return kept
