"""``pwf state prune`` on the shared log: every seq and proof kept, every host alike (ADR 0107).

Three runs are started at 1 000, 2 000 and 3 000 from host ``a``; ``run-1``
is cancelled at 4 000 and ``run-2`` at 6 000, ``run-3`` stays queued.  A
cutoff of 5 000 makes ``run-1`` the only tree to go.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import psycopg
from click.testing import CliRunner

from pwf.cli import cli

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.postgres.conftest import Hosts

CUTOFF = "1970-01-01T00:00:05.000Z"


def _pg(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as connection:
        return connection.execute(sql).fetchall()


def _runs(hosts: Hosts, name: str) -> list[str]:
    listing = hosts(name, "query", "runs").stdout.splitlines()
    return sorted(line.split()[0] for line in listing[1:])


def _digest(hosts: Hosts, name: str) -> object:
    result = CliRunner().invoke(cli, ["digest", str(hosts.db(name)), "--json"])
    assert 0 == result.exit_code, result.output
    return json.loads(result.output)["all"]


def _traffic(hosts: Hosts, client_line: Callable[..., bytes]) -> None:
    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2, 3))
    lines += client_line(1, "run.cancel", at=4000) + client_line(2, "run.cancel", at=6000)
    done = hosts("a", "request", stdin=lines)
    assert (0, 5) == (done.exit_code, done.stdout.count('"outcome":"accepted"')), done.output


def test_a_prune_of_the_shared_log_keeps_every_seq_and_every_host_agrees(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    _traffic(hosts, client_line)
    assert 0 == hosts("b", "status").exit_code  # host b has folded every run
    assert _runs(hosts, "b") == ["run-1", "run-2", "run-3"]
    before = _pg(hosts.url, "SELECT seq, content_hash FROM events ORDER BY seq")
    key = tmp_path / "log.key"
    made = CliRunner().invoke(cli, ["log", "keygen", "example.com/shared", "--out", str(key)])
    assert 0 == made.exit_code, made.output
    vkey = made.stdout.splitlines()[-1]
    note = tmp_path / "before.checkpoint"
    note.write_text(hosts("a", "log", "checkpoint", "--key", str(key)).stdout)
    backup = tmp_path / "b.sqlite"
    pruned = hosts(
        "a", "state", "prune", "--before", CUTOFF, "--apply", "--backup", str(backup),
        "--at", "9000",
    )  # fmt: skip
    assert 0 == pruned.exit_code, pruned.output
    assert "applied: true\n" in pruned.stdout
    after = _pg(hosts.url, "SELECT seq, content_hash FROM events ORDER BY seq")
    assert after[: len(before)] == before  # no seq moved, no hash changed
    gone = _pg(hosts.url, "SELECT seq FROM events WHERE body IS NULL ORDER BY seq")
    assert gone
    assert _runs(hosts, "a") == ["run-2", "run-3"]
    assert _runs(hosts, "b") == ["run-2", "run-3"]  # b's catch-up took in the prune
    assert _runs(hosts, "c") == ["run-2", "run-3"]  # c is made from the pruned log
    assert _digest(hosts, "a") == _digest(hosts, "b") == _digest(hosts, "c")
    for name in ("a", "b", "c"):
        verified = hosts(name, "verify")
        assert 0 == verified.exit_code, (name, verified.output)
        assert 0 == hosts(name, "log", "verify").exit_code, name
    proved = hosts("b", "log", "verify", "--backup", str(backup))
    assert 0 == proved.exit_code, proved.output
    assert "events log.pruned took" in proved.stdout
    checked = hosts("c", "log", "verify", "--checkpoint", str(note), "--vkey", vkey)
    assert 0 == checked.exit_code, checked.output


def test_a_dry_run_of_the_shared_log_deletes_nothing(
    hosts: Hosts, client_line: Callable[..., bytes]
) -> None:
    _traffic(hosts, client_line)
    done = hosts("a", "state", "prune", "--before", CUTOFF, "--json")
    assert 0 == done.exit_code, done.output
    assert json.loads(done.stdout)["report"]["applied"] is False
    assert _pg(hosts.url, "SELECT count(*) FROM events WHERE body IS NULL") == [(0,)]
    assert _runs(hosts, "a") == ["run-1", "run-2", "run-3"]


def test_a_refused_backup_destination_prunes_nothing(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    _traffic(hosts, client_line)
    taken = tmp_path / "taken.sqlite"
    taken.write_bytes(b"mine")
    done = hosts(
        "a", "state", "prune", "--before", CUTOFF, "--apply", "--backup", str(taken), "--at", "9000"
    )  # fmt: skip
    assert done.exit_code != 0
    assert taken.read_bytes() == b"mine"
    assert _pg(hosts.url, "SELECT count(*) FROM events WHERE body IS NULL") == [(0,)]
    assert _runs(hosts, "a") == ["run-1", "run-2", "run-3"]


def test_a_prune_that_fails_under_the_lock_leaves_the_shared_log_and_the_host_as_they_were(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path, monkeypatch: Any
) -> None:
    """The shared log's strip ran; the host's failed: the one transaction takes back both."""
    from pwf.errors import StoreError  # noqa: PLC0415 - this test's
    from pwf.host import prune  # noqa: PLC0415

    _traffic(hosts, client_line)
    before = _pg(hosts.url, "SELECT seq, content_hash, body FROM events ORDER BY seq")

    def failing(*_args: object, **_kwargs: object) -> None:
        raise StoreError("the disk went away")

    monkeypatch.setattr(prune, "strip", failing)
    done = hosts(
        "a", "state", "prune", "--before", CUTOFF, "--apply", "--backup",
        str(tmp_path / "b.sqlite"), "--at", "9000", "--json",
    )  # fmt: skip
    assert json.loads(done.stdout)["outcome"] == "rejected", done.output
    assert "the disk went away" in done.stdout
    after = _pg(hosts.url, "SELECT seq, content_hash, body FROM events ORDER BY seq")
    assert after[: len(before)] == before
    assert _pg(hosts.url, "SELECT count(*) FROM _pwf_pruned") == [(0,)]
    assert _runs(hosts, "a") == ["run-1", "run-2", "run-3"]
    assert 0 == hosts("a", "verify").exit_code
