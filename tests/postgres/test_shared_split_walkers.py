"""The whole-log walkers on a mirrored served log, either side of every split.

The served host claims the shared log, answers and releases: its host events
make ``host_state``, the table a read model makes on its first event.  Each
host's local projection file is then verified, rebuilt and replayed with
every split threshold below the log's length and above it (ADR 0074).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import pwf.fold.parallel
import pwf.store.chainwalk
from pwf.cli import cli
from pwf.client import HostClient

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.postgres._served_shared import served
    from tests.postgres.conftest import Hosts
else:
    from _served_shared import served

AT = 1_800_000_000_000


def _serve(hosts: Hosts, client_line: Callable[..., bytes], numbers: range) -> None:
    """A served host in this process answers ``run.start`` for ``numbers``, then stops."""
    with served(hosts, AT) as server, HostClient.connect(server.paths.socket, timeout=30) as client:
        answers = [client.request(client_line(n).strip()) for n in numbers]
    assert {"accepted"} == {answer["outcome"] for answer in answers}


@pytest.mark.parametrize("split", [False, True])
def test_walkers_of_a_mirrored_served_log(
    hosts: Hosts,
    client_line: Callable[..., bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    split: bool,
) -> None:
    """``verify``, ``rebuild`` and ``replay`` of each host's file agree, split or not."""
    _serve(hosts, client_line, range(1, 4))
    assert hosts("a", "request", stdin=client_line(10)).exit_code == 0
    _serve(hosts, client_line, range(20, 23))
    monkeypatch.setattr(pwf.fold.parallel, "SPLIT_FROM", 1 if split else 10**9)
    monkeypatch.setattr(pwf.fold.parallel, "processors", lambda: 2)
    monkeypatch.setattr(pwf.store.chainwalk, "PARALLEL_FROM", 2 if split else 10**9)
    monkeypatch.setattr(pwf.store.chainwalk, "DEEP_PARALLEL_FROM", 2 if split else 10**9)
    digests = set()
    for name in ("served", "a", "b"):
        checked = hosts(name, "verify", "--json")
        assert checked.exit_code == 0, checked.output
        assert json.loads(checked.output)["ok"] is True
        rebuilt = hosts(name, "rebuild")
        assert rebuilt.exit_code == 0, rebuilt.output
        out = tmp_path / f"replay-{name}.db"
        head = json.loads(hosts(name, "log", "head", "--json").output)["seq"]
        replayed = hosts(name, "replay", "--until", str(head), "--out", str(out))
        assert replayed.exit_code == 0, replayed.output
        digested = CliRunner().invoke(cli, ["digest", str(hosts.db(name)), "--json"])
        digests.add(json.loads(digested.output)["all"])
    assert len(digests) == 1
