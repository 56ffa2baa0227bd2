"""``pwf state prune`` on the shared log: every seq and proof kept, every host alike (ADR 0107).

Three runs are started at 1 000, 2 000 and 3 000 from host ``a``; ``run-1``
is cancelled at 4 000 and ``run-2`` at 6 000, ``run-3`` stays queued.  A
cutoff of 5 000 makes ``run-1`` the only tree to go.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from click.testing import CliRunner

from pwf import canonical
from pwf.cli import cli

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests._pg import Server as Postgres
    from tests.postgres._served_shared import call, served
    from tests.postgres.conftest import Hosts
else:
    from _served_shared import call, served

CUTOFF = "1970-01-01T00:00:05.000Z"


def _pg(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as connection:
        return connection.execute(sql).fetchall()


def _runs(hosts: Hosts | _Hosts, name: str) -> list[str]:
    listing = hosts(name, "query", "runs").stdout.splitlines()
    return sorted(line.split()[0] for line in listing[1:])


def _dated(hosts: Hosts | _Hosts, name: str) -> int:
    """When host ``name``'s blobs date run-2's launch options (the same as run-1's)."""
    connection = sqlite3.connect(hosts.db(name))
    try:
        [(at,)] = connection.execute(
            "SELECT b.created_at FROM blobs AS b JOIN runs AS r"
            " ON b.blob_hash = r.launch_options_hash WHERE r.run_id = 'run-2'"
        ).fetchall()
    finally:
        connection.close()
    return int(at)


def _digest(hosts: Hosts | _Hosts, name: str) -> object:
    result = CliRunner().invoke(cli, ["digest", str(hosts.db(name)), "--json"])
    assert 0 == result.exit_code, result.output
    return json.loads(result.output)["all"]


def _traffic(hosts: Hosts | _Hosts, client_line: Callable[..., bytes]) -> None:
    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2, 3))
    lines += client_line(1, "run.cancel", at=4000) + client_line(2, "run.cancel", at=6000)
    done = hosts("a", "request", stdin=lines)
    assert (0, 5) == (done.exit_code, done.stdout.count('"outcome":"accepted"')), done.output


def _prune(hosts: Hosts | _Hosts, tmp_path: Path) -> Path:
    """Host ``a`` prunes the shared log at the cutoff, its backup at ``b.sqlite``; its path."""
    backup = tmp_path / "b.sqlite"
    pruned = hosts(
        "a", "state", "prune", "--before", CUTOFF, "--apply", "--backup", str(backup),
        "--at", "9000",
    )  # fmt: skip
    assert 0 == pruned.exit_code, pruned.output
    assert "applied: true\n" in pruned.stdout
    return backup


def test_a_prune_of_the_shared_log_keeps_every_seq_and_every_host_agrees(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    _traffic(hosts, client_line)
    assert 0 == hosts("b", "status").exit_code  # host b has folded every run
    assert _runs(hosts, "b") == ["run-1", "run-2", "run-3"]
    before = _pg(hosts.url, "SELECT seq, content_hash FROM events ORDER BY seq")
    assert _dated(hosts, "b") == 1000  # run-1 carried the launch options first
    key = tmp_path / "log.key"
    made = CliRunner().invoke(cli, ["log", "keygen", "example.com/shared", "--out", str(key)])
    assert 0 == made.exit_code, made.output
    vkey = made.stdout.splitlines()[-1]
    note = tmp_path / "before.checkpoint"
    note.write_text(hosts("a", "log", "checkpoint", "--key", str(key)).stdout)
    backup = _prune(hosts, tmp_path)
    after = _pg(hosts.url, "SELECT seq, content_hash FROM events ORDER BY seq")
    assert after[: len(before)] == before  # no seq moved, no hash changed
    gone = _pg(hosts.url, "SELECT seq FROM events WHERE body IS NULL ORDER BY seq")
    assert gone
    assert _runs(hosts, "a") == ["run-2", "run-3"]
    assert _runs(hosts, "b") == ["run-2", "run-3"]  # b's catch-up took in the prune
    assert _runs(hosts, "c") == ["run-2", "run-3"]  # c is made from the pruned log
    assert _digest(hosts, "a") == _digest(hosts, "b") == _digest(hosts, "c")
    # a blob the removed run carried first is dated by the first kept carrier, on every host
    assert [_dated(hosts, name) for name in ("a", "b", "c")] == [2000, 2000, 2000]
    for name in ("a", "b", "c"):
        verified = hosts(name, "verify")
        assert 0 == verified.exit_code, (name, verified.output)
        assert 0 == hosts(name, "log", "verify").exit_code, name
    proved = hosts("b", "log", "verify", "--backup", str(backup))
    assert 0 == proved.exit_code, proved.output
    assert "events log.pruned took" in proved.stdout
    checked = hosts("c", "log", "verify", "--checkpoint", str(note), "--vkey", vkey)
    assert 0 == checked.exit_code, checked.output


def test_the_shared_log_s_pruned_seqs_are_named_by_export_and_show(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    """An export that would leave a pruned seq out is refused, and a listing says what it skips.

    On the host that pruned and on one that took the prune in at its catch-up alike.
    """
    _traffic(hosts, client_line)
    assert 0 == hosts("b", "status").exit_code
    backup = _prune(hosts, tmp_path)
    [(taken,)] = _pg(hosts.url, "SELECT DISTINCT taken FROM _pwf_pruned")
    gone = [seq for (seq,) in _pg(hosts.url, "SELECT seq FROM _pwf_pruned ORDER BY seq")]
    assert gone == [1, 7, 8]
    for name in ("a", "b"):
        assert 0 == hosts(name, "status").exit_code  # b takes the prune in
        refused = hosts(name, "log", "export")
        assert (refused.exit_code, refused.stdout) == (2, ""), refused.output
        assert refused.stderr == (
            f"Error: seq 1 was pruned: its bytes are in the backup {backup.absolute()};"
            " export that backup, or the range after the pruned seqs (--from)\n"
        )
        shown = hosts(name, "log", "show", "--json")
        assert 0 == shown.exit_code, shown.output
        assert 1 not in [json.loads(line)["seq"] for line in shown.stdout.splitlines()]
        assert shown.stderr == (
            f"note: seqs 1, 7-8 are not shown: the log.pruned at seq {taken} took their bytes"
            f" to the backup {backup.absolute()}\n"
        )
        whole = hosts(name, "log", "export", "--from", "9")
        assert 0 == whole.exit_code, whole.output


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


class _Hosts:
    """``pwf`` as host ``name`` on the shared log at ``url`` (the ``hosts`` fixture's, for a
    server of the test's own)."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder

    def db(self, name: str) -> Path:
        return self.folder / f"{name}.db"

    def __call__(self, name: str, *args: str, stdin: bytes | None = None) -> Any:
        return CliRunner().invoke(
            cli, [*args, "--db", str(self.db(name)), "--store", self.url], input=stdin
        )


def _writer(url: str, db: Path, lines: Path) -> subprocess.Popen[bytes]:
    """Host ``db`` answering ``lines`` through ``pwf request`` on the shared log, in a process."""
    with lines.open("rb") as stdin:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "pwf", "request"),
                *("--db", str(db), "--store", url, "--at", "10000"),
            ],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def _accepted(out: bytes) -> set[str]:
    return {
        answer["requestId"]
        for answer in (json.loads(line) for line in out.splitlines())
        if answer["outcome"] == "accepted"
    }


@pytest.mark.slow
def test_a_writer_killed_during_a_prune_loses_nothing_and_every_host_agrees(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    """A second host writes through the prune and is killed in it: nothing it was told is lost."""
    _traffic(hosts, client_line)
    lines = tmp_path / "w.jsonl"
    lines.write_bytes(b"".join(client_line(number, at=10_000) for number in range(100, 400)))
    writer = _writer(hosts.url, hosts.db("w"), lines)
    time.sleep(0.5)
    pruned = hosts(
        "a", "state", "prune", "--before", CUTOFF, "--apply", "--backup",
        str(tmp_path / "b.sqlite"), "--at", "9000",
    )  # fmt: skip
    writer.send_signal(signal.SIGKILL)
    out, _ = writer.communicate(timeout=60)
    assert 0 == pruned.exit_code, pruned.output
    told = _accepted(out)
    recorded = {str(row[0]) for row in _pg(hosts.url, "SELECT request_id FROM _pwf_recorded")}
    assert told <= recorded, sorted(told - recorded)
    assert "run-1" not in _runs(hosts, "a")
    for name in ("a", "b", "w"):
        verified = hosts(name, "verify")
        assert 0 == verified.exit_code, (name, verified.output)
    assert _digest(hosts, "a") == _digest(hosts, "b") == _digest(hosts, "w")


@pytest.mark.slow
def test_postgresql_crashed_during_a_prune_leaves_a_log_that_verifies(
    tmp_path: Path, client_line: Callable[..., bytes], postgres_server: Postgres
) -> None:
    """PostgreSQL stops as a crash would while a prune runs: the log verifies after, pruned or not.

    The prune's strip and ``log.pruned`` are one transaction: after the
    restart either none of it is in the log or all of it is, and the hosts'
    files, caught up again, agree.
    """
    server = type(postgres_server)(postgres_server.bin_dir, durable=True)
    server.start()
    try:
        url = server.create_database()
        made = _Hosts(url, tmp_path)
        assert 0 == made("a", "init").exit_code
        _traffic(made, client_line)
        lines = tmp_path / "w.jsonl"
        lines.write_bytes(b"".join(client_line(number, at=10_000) for number in range(100, 300)))
        writer = _writer(url, made.db("w"), lines)
        prune = subprocess.Popen(
            [
                *(sys.executable, "-m", "pwf", "state", "prune", "--before", CUTOFF, "--apply"),
                *("--backup", str(tmp_path / "b.sqlite"), "--at", "9000"),
                *("--db", str(made.db("a")), "--store", url),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.3)
        server.crash()
        prune.communicate(timeout=120)
        out, _ = writer.communicate(timeout=120)
        server.restart()
        told = _accepted(out)
        recorded = {str(row[0]) for row in _pg(url, "SELECT request_id FROM _pwf_recorded")}
        assert told <= recorded, sorted(told - recorded)
        taken = _pg(url, "SELECT count(*) FROM _pwf_pruned")[0][0]
        records = _pg(url, "SELECT count(*) FROM events WHERE type = 'log.pruned'")[0][0]
        assert (taken > 0) == (records == 1)  # all of the prune, or none of it
        for name in ("a", "b", "w"):
            verified = made(name, "verify")
            assert 0 == verified.exit_code, (name, verified.output)
        assert _digest(made, "a") == _digest(made, "b") == _digest(made, "w")
    finally:
        server.stop()


def test_a_backup_of_the_shared_log_restores_into_an_empty_one(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path, postgres_server: Postgres
) -> None:
    """Backed up, pruned, backed up again: each backup goes into a new shared log as it was."""
    _traffic(hosts, client_line)
    backup = tmp_path / "b.sqlite"
    assert 0 == hosts("a", "state", "prune", "--before", CUTOFF, "--apply", "--backup",
                      str(backup), "--at", "9000").exit_code  # fmt: skip
    second = tmp_path / "after.sqlite"
    assert 0 == hosts("a", "state", "backup", str(second)).exit_code
    for kept in (backup, second):
        url = postgres_server.create_database()
        other = _Hosts(url, tmp_path / kept.stem)
        other.folder.mkdir()
        assert 0 == other("x", "init").exit_code
        done = CliRunner().invoke(cli, ["state", "restore", str(kept), "--store", url])
        assert 0 == done.exit_code, done.output
        for name in ("x", "y"):
            verified = other(name, "verify")
            assert 0 == verified.exit_code, (name, verified.output)
            assert 0 == other(name, "log", "verify").exit_code
        restored = _digest(other, "y")
        with_it = CliRunner().invoke(cli, ["digest", str(kept), "--json"])
        assert restored == json.loads(with_it.output)["all"]
        again = CliRunner().invoke(cli, ["state", "restore", str(kept), "--store", url])
        assert 2 == again.exit_code
        assert "a backup is restored into an empty shared log only" in again.output


def test_a_served_host_on_the_shared_log_prunes_it(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    """``state.prune`` by ``pwf call`` to a served host: accepted, a retry adopted, hosts agree."""
    _traffic(hosts, client_line)
    backup = tmp_path / "served-prune.sqlite"
    line = canonical.encode(
        {
            "schema": "pi-workflows.client.v1",
            "type": "request",
            "requestId": "prune-1",
            "clientId": "ops",
            "idempotencyKey": "prune-1",
            "operation": "state.prune",
            "payload": {"before": CUTOFF, "apply": True, "backupPath": str(backup)},
        }
    )
    with served(hosts, 9000):
        first, again = call(hosts.db("served"), line, line)
    assert ("accepted", "adopted") == (first["outcome"], again["outcome"]), (first, again)
    assert _runs(hosts, "a") == ["run-2", "run-3"]
    assert _digest(hosts, "a") == _digest(hosts, "served")
    proved = hosts("a", "log", "verify", "--backup", str(backup))
    assert 0 == proved.exit_code, proved.output


def test_a_host_stopped_before_it_folded_again_folds_at_its_next_catch_up(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    """The strip and the mark that a fold is owed commit together: a host killed between its
    catch-up and its fold folds the next time it opens (ADR 0107)."""
    from pwf.readmodel import ReadModel  # noqa: PLC0415 - this test's
    from pwf.store.opening import open_mirror, open_shared_log  # noqa: PLC0415

    _traffic(hosts, client_line)
    assert _runs(hosts, "b") == ["run-1", "run-2", "run-3"]
    pruned = hosts(
        "a", "state", "prune", "--before", CUTOFF, "--apply", "--backup",
        str(tmp_path / "b.sqlite"), "--at", "9000",
    )  # fmt: skip
    assert 0 == pruned.exit_code, pruned.output
    with open_mirror(hosts.db("b"), open_shared_log(hosts.url), hooks=[ReadModel()]) as store:
        store.catch_up()  # takes the prune in, with no refold given: as if killed after it
    marked = sqlite3.connect(hosts.db("b"))
    try:
        assert marked.execute("SELECT 1 FROM _pwf_meta WHERE key = 'refold'").fetchall()
    finally:
        marked.close()
    assert 0 == hosts("b", "verify").exit_code  # its next catch-up folds first
    assert _runs(hosts, "b") == ["run-2", "run-3"]
    assert _digest(hosts, "a") == _digest(hosts, "b")


def test_a_host_made_from_the_pruned_log_reads_its_leaves_a_few_at_a_time_and_owes_no_fold(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new host copies the pruned rows with their kept leaves, read a window at a time, and
    never folded their bytes, so it owes no fold again; it agrees with the pruning host."""
    from pwf.readmodel import ReadModel  # noqa: PLC0415 - this test's
    from pwf.store import mirror  # noqa: PLC0415
    from pwf.store.opening import open_mirror, open_shared_log  # noqa: PLC0415

    _traffic(hosts, client_line)
    _prune(hosts, tmp_path)
    pruned = len(_pg(hosts.url, "SELECT seq FROM _pwf_pruned"))
    assert pruned > 2
    windows: list[object] = []
    execute = psycopg.Connection.execute

    def counted(self: psycopg.Connection[Any], query: Any, *args: Any, **options: Any) -> Any:
        if "FROM _pwf_pruned WHERE seq >=" in str(query):
            windows.append(args)
        return execute(self, query, *args, **options)

    monkeypatch.setattr(mirror, "_SMALL_GAP", 2)
    monkeypatch.setattr(psycopg.Connection, "execute", counted)
    model = ReadModel()
    log = open_shared_log(hosts.url)
    with open_mirror(hosts.db("c"), log, hooks=[model], install=model.install) as store:
        store.catch_up()  # no refold is given: one owed would stay marked
    monkeypatch.undo()
    assert len(windows) == -(-pruned // 2)
    marked = sqlite3.connect(hosts.db("c"))
    try:
        assert [] == marked.execute("SELECT 1 FROM _pwf_meta WHERE key = 'refold'").fetchall()
    finally:
        marked.close()
    assert _runs(hosts, "c") == ["run-2", "run-3"]
    assert _digest(hosts, "a") == _digest(hosts, "c")
    assert [_dated(hosts, name) for name in ("a", "c")] == [2000, 2000]
