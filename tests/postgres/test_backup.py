"""``pwf state backup`` on the shared log: one snapshot, as a pwf SQLite database (ADR 0106)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from click.testing import CliRunner

from pwf import canonical
from pwf._sqlite import exact_text
from pwf.cli import cli
from pwf.errors import StoreError
from pwf.store.mirror import Mirror
from pwf.store.postgres import snapshot, tree

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.postgres._served_shared import call, served
    from tests.postgres.conftest import Hosts
    from tests.web._web_served import get, serve
else:
    from _served_shared import call, served

    sys.path.insert(0, str(Path(__file__).parents[1] / "web"))
    from _web_served import get, serve

AT = 1_800_000_000_000


def _pg(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as connection:
        return connection.execute(sql).fetchall()


def _pg_head(url: str) -> int:
    return int(_pg(url, "SELECT seq FROM _pwf_head")[0][0])


def _file(path: Path, sql: str) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def _pwf(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _ok(path: Path) -> None:
    """``pwf log verify`` and ``pwf verify`` accept the file as it is."""
    logged = _pwf("log", "verify", "--db", str(path), "--json")
    assert (0, True) == (logged.exit_code, json.loads(logged.output)["ok"]), logged.output
    checked = _pwf("verify", "--db", str(path), "--json")
    assert 0 == checked.exit_code, checked.output


def _digest(path: Path) -> object:
    result = _pwf("digest", str(path), "--json")
    assert 0 == result.exit_code, result.output
    return json.loads(result.output)


def _requests(hosts: Hosts, name: str, line: Callable[..., bytes], numbers: range) -> None:
    lines = b"".join(line(number) for number in numbers)
    result = hosts(name, "request", "--at", str(AT), stdin=lines)
    assert 0 == result.exit_code, result.output


@pytest.fixture
def during_snapshot(monkeypatch: pytest.MonkeyPatch) -> list[Callable[[], None]]:
    """Work run while the snapshot's transaction is open, after its first rows of events."""
    work: list[Callable[[], None]] = []
    rows = snapshot._rows

    def stepping(connection: Any, table: str, names: tuple[str, ...]) -> Iterator[Any]:
        for index, chunk in enumerate(rows(connection, table, names)):
            if table == "_pwf_events" and index == 0:
                for step in work:
                    step()
            yield chunk

    monkeypatch.setattr(snapshot, "_rows", stepping)
    monkeypatch.setattr(snapshot, "_CHUNK", 8)
    return work


class TestBackup:
    """The backup of a shared log is a pwf database that proves itself."""

    def test_two_hosts_log_backs_up_and_verifies(
        self, hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
    ) -> None:
        """Its head is the log's at the snapshot; its digest is a caught-up host's."""
        _requests(hosts, "a", client_line, range(1, 6))
        _requests(hosts, "b", client_line, range(6, 11))
        assert 0 == hosts("b", "status").exit_code  # b catches up to the head
        head = _pg_head(hosts.url)
        target = tmp_path / "out" / "backup.db"
        result = hosts("a", "state", "backup", str(target))
        assert (0, f"backed up to {target}\n") == (result.exit_code, result.output)
        _ok(target)
        assert [(head,)] == _file(target, "SELECT seq FROM _pwf_head")
        assert _digest(target) == _digest(hosts.db("b"))
        # the backup's own command is recorded after the snapshot, in the shared log
        recorded = _pg(
            hosts.url,
            "SELECT seq FROM events WHERE type = 'command.recorded'"
            " AND request_id LIKE 'state.backup-%'",
        )
        assert [(head + 1,)] == recorded
        assert 0o600 == target.stat().st_mode & 0o777
        assert [target.name] == [path.name for path in target.parent.iterdir()]
        # It restores as any pwf database, and can be a host's local file on the log.
        restored = tmp_path / "restored.db"
        assert 0 == _pwf("state", "restore", str(target), "--db", str(restored)).exit_code
        shutil.copyfile(target, hosts.db("c"))
        assert 0 == hosts("c", "status").exit_code
        assert [(head + 1,)] == _file(hosts.db("c"), "SELECT seq FROM _pwf_head")

    def test_pwf_web_serves_the_backup(
        self, hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
    ) -> None:
        """``pwf web`` opens the backup as it is and lists the shared log's runs."""
        _requests(hosts, "a", client_line, range(1, 4))
        _requests(hosts, "b", client_line, range(4, 6))
        target = tmp_path / "backup.db"
        assert 0 == hosts("a", "state", "backup", str(target)).exit_code
        with serve(target) as base:
            status, _headers, page = get(f"{base}/runs")
        assert 200 == status
        assert all(f"run-{n}" in page for n in range(1, 6))

    def test_the_log_rows_meta_and_tree_are_the_shared_logs(
        self, hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
    ) -> None:
        """Every log table's rows, ``_pwf_meta`` and the tree are copied as the log stores them."""
        _requests(hosts, "a", client_line, range(1, 30))
        with psycopg.connect(hosts.url) as connection:
            connection.execute("INSERT INTO _pwf_meta (key, value) VALUES ('origin', 'pwf.test/o')")
        target = tmp_path / "backup.db"
        assert 0 == hosts("a", "state", "backup", str(target)).exit_code
        head = _file(target, "SELECT seq FROM _pwf_head")[0][0]
        for table, names in snapshot.TABLES:
            key = names[0]
            columns = ", ".join(names)
            shared = _pg(
                hosts.url,
                f"SELECT {columns} FROM {table} WHERE {key} <= {head} ORDER BY {key}",  # noqa: S608
            )
            kept = _file(target, f"SELECT {columns} FROM {table} ORDER BY {key}")  # noqa: S608
            if table != "_pwf_tree":  # the tree's positions are not seqs
                assert kept == [tuple(row) for row in shared], table
        assert _pg(hosts.url, "SELECT key, value FROM _pwf_meta ORDER BY key") == _file(
            target, "SELECT key, value FROM _pwf_meta ORDER BY key"
        )
        tree = _file(target, "SELECT pos, hash FROM _pwf_tree ORDER BY pos")
        assert tree
        assert set(tree) <= {
            tuple(row) for row in _pg(hosts.url, "SELECT pos, hash FROM _pwf_tree")
        }

    def test_ids_with_lone_surrogates_keep_their_sqlite_form(
        self, hosts: Hosts, tmp_path: Path
    ) -> None:
        """Text the shared log holds escaped (ADR 0071) is given back as SQLite keeps it.

        The backup then verifies: each id column says what its event's bytes say.
        """
        cuts = ["\ud800", "\udc01", "\ufffd", "\ufffdd800"]
        lines = b"\n".join(_surrogate_start(cut) for cut in cuts) + b"\n"
        assert 0 == hosts("a", "request", "--at", str(AT), stdin=lines).exit_code
        assert 0 == hosts("b", "status").exit_code  # b folds them from the shared log
        target = tmp_path / "backup.db"
        assert 0 == hosts("a", "state", "backup", str(target)).exit_code
        _ok(target)
        connection = exact_text(sqlite3.connect(target))
        try:
            kept = {row[0] for row in connection.execute("SELECT request_id FROM _pwf_batches")}
        finally:
            connection.close()
        assert {f"r-{cut}" for cut in cuts} <= kept
        assert _digest(target) == _digest(hosts.db("b"))

    def test_a_failed_snapshot_leaves_nothing(
        self,
        hosts: Hosts,
        client_line: Callable[..., bytes],
        tmp_path: Path,
        during_snapshot: list[Callable[[], None]],
    ) -> None:
        """The snapshot fails midway: one line, exit 2, no file at DEST or beside it."""
        _requests(hosts, "a", client_line, range(1, 21))

        def fail() -> None:
            raise StoreError("the server went away")

        during_snapshot.append(fail)
        target = tmp_path / "out" / "backup.db"
        result = hosts("a", "state", "backup", str(target))
        assert 2 == result.exit_code
        assert [f"Error: backup to {target} failed: the server went away"] == (
            result.output.splitlines()
        )
        assert [] == list(target.parent.iterdir())


def _surrogate_start(cut: str) -> bytes:
    payload = {
        "definitionDigest": "d1",
        "definitionSnapshot": {},
        "input": {},
        "originSessionId": f"s-{cut}",
        "projectPath": "/p",
        "workflowName": "echo",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "workflowSourceRef": "builtin:echo",
    }
    return canonical.encode(
        {
            "clientId": f"c-{cut}",
            "idempotencyKey": f"k-{cut}",
            "operation": "run.start",
            "payload": payload,
            "requestId": f"r-{cut}",
            "runId": f"run-{cut}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
        }
    )


class TestWriters:
    """Writers on the shared log commit while the snapshot is read, and none of it is copied."""

    def test_a_writer_commits_during_the_snapshot(
        self,
        hosts: Hosts,
        client_line: Callable[..., bytes],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        during_snapshot: list[Callable[[], None]],
    ) -> None:
        """Requests acknowledged while the snapshot is open are in the log, not in the backup.

        The writer runs inside the snapshot's transaction, in the same
        thread: had the snapshot taken any lock the writer waits for, it
        would fail on its lock timeout instead.
        """
        monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=2000")
        monkeypatch.setenv("PWF_BUSY_TIMEOUT_MS", "50")
        _requests(hosts, "a", client_line, range(1, 21))
        before = _pg_head(hosts.url)
        during_snapshot.append(lambda: _requests(hosts, "w", client_line, range(21, 26)))
        target = tmp_path / "backup.db"
        result = hosts("a", "state", "backup", str(target))
        assert 0 == result.exit_code, result.output
        _ok(target)
        # The writer's five run starts came after the snapshot: in the log, not in the backup.
        shared = {row[0] for row in _pg(hosts.url, "SELECT request_id FROM _pwf_batches")}
        kept = {row[0] for row in _file(target, "SELECT request_id FROM _pwf_batches")}
        assert {f"r-{n}" for n in range(21, 26)} <= shared - kept
        assert {f"r-{n}" for n in range(1, 21)} <= kept
        assert [(before,)] == _file(target, "SELECT seq FROM _pwf_head")
        assert before < _pg_head(hosts.url)
        assert 0 == hosts("a", "status").exit_code
        assert 0 == hosts("w", "status").exit_code
        assert json.loads(hosts("w", "log", "verify", "--json").output)["ok"]

    def test_the_backing_up_host_folds_other_hosts_events_before_the_lock(
        self,
        hosts: Hosts,
        client_line: Callable[..., bytes],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        during_snapshot: list[Callable[[], None]],
    ) -> None:
        """What others appended during the snapshot is not folded under the log's lock.

        The lock is held for the backup's record alone, so other hosts'
        writers wait for no fold of the events they wrote meanwhile.
        """
        _requests(hosts, "a", client_line, range(1, 11))
        during_snapshot.append(lambda: _requests(hosts, "w", client_line, range(11, 31)))
        folded: list[int] = []
        applied = Mirror._apply

        def applying(
            mirror: Mirror, local: Any, target: Any, prefetched: Any = None, **options: Any
        ) -> int:
            count = applied(mirror, local, target, prefetched, **options)
            if prefetched is not None and local.store.path == hosts.db("a"):
                folded.append(count)  # under the lock: it came with the lock's round trip
            return count

        monkeypatch.setattr(Mirror, "_apply", applying)
        result = hosts("a", "state", "backup", str(tmp_path / "backup.db"))
        assert 0 == result.exit_code, result.output
        assert [0, 0] == folded  # the validation's transaction and the record's

    def test_a_writer_killed_during_the_backup_loses_nothing_acknowledged(
        self,
        hosts: Hosts,
        client_line: Callable[..., bytes],
        tmp_path: Path,
        during_snapshot: list[Callable[[], None]],
    ) -> None:
        """A writer killed mid-stream while the snapshot is read: what it acknowledged is kept."""
        _requests(hosts, "a", client_line, range(1, 11))
        acknowledged: list[str] = []

        def killed_writer() -> None:
            lines = b"".join(client_line(n) for n in range(11, 211))
            with subprocess.Popen(
                [sys.executable, "-c", WRITER, str(hosts.db("w")), hosts.url, str(AT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            ) as writer:
                assert writer.stdin is not None
                assert writer.stdout is not None
                writer.stdin.write(lines)
                writer.stdin.close()
                for answer in writer.stdout:
                    acknowledged.append(answer.decode().strip())
                    if len(acknowledged) == 5:
                        os.kill(writer.pid, signal.SIGKILL)
                        break
                writer.wait(60)

        during_snapshot.append(killed_writer)
        target = tmp_path / "backup.db"
        result = hosts("a", "state", "backup", str(target))
        assert 0 == result.exit_code, result.output
        _ok(target)
        assert len(acknowledged) == 5
        shared = {row[0] for row in _pg(hosts.url, "SELECT request_id FROM _pwf_batches")}
        assert set(acknowledged) <= shared
        kept = {row[0] for row in _file(target, "SELECT request_id FROM _pwf_batches")}
        assert not set(acknowledged) & kept
        assert json.loads(hosts("b", "log", "verify", "--json").output)["ok"]


WRITER = r"""
import sys
from pwf.host import Host
from pwf.protocol.client import parse_request
from pwf.readmodel import ReadModel
from pwf.store.mirror import MirroredStore
from pwf.store.postgres import PostgresStore

db, url, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = ReadModel()
store = MirroredStore(db, PostgresStore(url), hooks=[model], install=model.install)
host = Host(store)
for line in sys.stdin.buffer:
    request = parse_request(line.strip())
    answer = host.request(request, at)
    assert answer.outcome == "accepted", answer
    print(request.request_id, flush=True)
"""


class TestDestinations:
    """The SQLite backup's destination rules, the live file being the host's local one."""

    @pytest.mark.parametrize(
        ("name", "message"),
        [
            ("{live}", "destination must differ from the live database"),
            ("{live}-wal", "destination is a file the live database keeps beside it"),
            ("{live}.maintenance.lock", "destination is a file the live database keeps beside it"),
            ("{folder}", "backup destination is a directory"),
            ("{existing}", "Backup destination already exists"),
        ],
    )
    def test_a_bad_destination_is_refused_and_nothing_is_written(
        self,
        hosts: Hosts,
        client_line: Callable[..., bytes],
        tmp_path: Path,
        name: str,
        message: str,
    ) -> None:
        """One line, exit 2; no file appears and the local file is not changed."""
        _requests(hosts, "a", client_line, range(1, 3))
        folder = tmp_path / "folder"
        folder.mkdir()
        existing = tmp_path / "existing.db"
        existing.write_bytes(b"kept")
        live = hosts.db("a")
        before = sorted(path.name for path in tmp_path.iterdir())
        target = name.format(live=live, folder=folder, existing=existing)
        result = hosts("a", "state", "backup", target)
        assert 2 == result.exit_code
        [line] = result.output.splitlines()
        assert line.startswith(f"Error: {message}"), line
        assert before == sorted(path.name for path in tmp_path.iterdir())
        assert b"kept" == existing.read_bytes()
        assert [] == list(folder.iterdir())
        assert json.loads(hosts("a", "log", "verify", "--json").output)["ok"]


def test_a_served_host_on_the_shared_log_backs_it_up(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    """``state.backup`` by ``pwf call``: accepted, the file proves, a retry is adopted."""
    _requests(hosts, "a", client_line, range(1, 6))
    target = tmp_path / "served-backup.db"
    request = {
        "schema": "pi-workflows.client.v1",
        "type": "request",
        "requestId": "backup-1",
        "clientId": "ops",
        "idempotencyKey": "backup-1",
        "operation": "state.backup",
        "payload": {"destination": str(target)},
    }
    line = canonical.encode(request)
    with served(hosts, AT):
        first, again = call(hosts.db("served"), line, line)
    assert ("accepted", "adopted") == (first["outcome"], again["outcome"]), (first, again)
    _ok(target)
    head = _file(target, "SELECT seq FROM _pwf_head")[0][0]
    recorded = _pg(
        hosts.url,
        "SELECT seq FROM events WHERE request_id = 'backup-1' AND type = 'command.recorded'",
    )
    assert [(head + 1,)] == recorded


def test_a_stale_writer_reads_the_logs_first_seq_from_its_key(
    hosts: Hosts, client_line: Callable[..., bytes]
) -> None:
    """The first seq a writer with a stale tree reads under the lock is one index probe.

    The ``events`` view's ``min(seq)`` is planned as a scan of the whole
    log, which a host back from a backup paid under the lock (ADR 0106).
    """
    _requests(hosts, "a", client_line, range(1, 40))
    with psycopg.connect(hosts.url, autocommit=True) as connection:
        connection.execute("ANALYZE")
        plan = "\n".join(
            str(row[0]) for row in connection.execute(f"EXPLAIN {tree.SIZES}").fetchall()
        )
    log_tables = ("_pwf_events", "_pwf_batches", "_pwf_whole", "_pwf_pruned")
    assert not [table for table in log_tables if f"Seq Scan on {table}" in plan], plan


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing.db", "no backup at {path}"),
        ("folder", "no backup at {path}"),
        ("text.db", "{path}: not a pwf database or damaged"),
        ("v1.db", "{path}: a pwf database in format pwf.store.v1;"),
        ("damaged.db", "{path} does not prove, so it is not restored:"),
    ],
)
def test_a_backup_that_cannot_be_restored_into_the_shared_log_is_one_line_and_changes_nothing(
    hosts: Hosts, client_line: Callable[..., bytes], tmp_path: Path, name: str, message: str
) -> None:
    """``pwf state restore BACKUP --store URL``: exit 2, one line, the shared log still empty."""
    good = tmp_path / "good.db"
    assert 0 == _pwf("init", "--db", str(good)).exit_code
    request = ["request", "--db", str(good), "--at", str(AT)]
    assert 0 == CliRunner().invoke(cli, request, input=client_line(1)).exit_code
    (tmp_path / "folder").mkdir()
    (tmp_path / "text.db").write_text("not a database\n")
    golden = Path(__file__).resolve().parents[1] / "golden" / "main-before-0033.db.gz"
    (tmp_path / "v1.db").write_bytes(gzip.decompress(golden.read_bytes()))
    shutil.copyfile(good, tmp_path / "damaged.db")
    connection = sqlite3.connect(tmp_path / "damaged.db")
    try:
        connection.execute("UPDATE _pwf_batches SET at = at + 1")
        connection.commit()
    finally:
        connection.close()
    path = tmp_path / name
    refused = CliRunner().invoke(cli, ["state", "restore", str(path), "--store", hosts.url])
    assert 2 == refused.exit_code
    [line] = refused.output.splitlines()
    assert line.startswith("Error: " + message.format(path=path)), line
    assert [(0,)] == _pg(hosts.url, "SELECT count(*) FROM _pwf_events")
    assert 0 == _pg_head(hosts.url)
    restored = CliRunner().invoke(cli, ["state", "restore", str(good), "--store", hosts.url])
    assert 0 == restored.exit_code, restored.output
