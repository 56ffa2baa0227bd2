"""``pwf state prune`` and ``pwf log verify --backup`` from the command line (DOMAIN §13.2).

Three runs are started through ``pwf request`` at 1 000, 2 000 and 3 000;
``run-1`` is cancelled at 4 000 and ``run-2`` at 6 000, ``run-3`` stays queued.
A cutoff of 5 000 makes ``run-1`` the only tree to go.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

Run = Callable[..., Result]
CUTOFF = "1970-01-01T00:00:05.000Z"


def _runs(run: Run, live: Path) -> list[str]:
    listing = run("query", "runs", "--db", str(live)).stdout.splitlines()
    return sorted(line.split()[0] for line in listing[1:])


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    path = tmp_path / "live.db"
    assert run("init", "--db", str(path)).exit_code == 0
    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2, 3))
    lines += client_line(1, "run.cancel", at=4000) + client_line(2, "run.cancel", at=6000)
    done = run("request", "--db", str(path), stdin=lines)
    assert (done.exit_code, done.stdout.count('"outcome":"accepted"')) == (0, 5), done.stdout
    return path


def test_a_dry_run_reports_and_changes_nothing(run: Run, live: Path) -> None:
    before = run("log", "verify", "--db", str(live)).stdout
    done = run("state", "prune", "--db", str(live), "--before", CUTOFF, "--at", "9000", "--json")
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    report = answer["report"]
    assert (answer["outcome"], report["applied"], report["selectedRuns"]) == ("accepted", False, 1)
    assert report["databaseBytesAfter"] == report["databaseBytesBefore"]
    assert _runs(run, live) == ["run-1", "run-2", "run-3"]
    assert before != run("log", "verify", "--db", str(live)).stdout  # only the record was added


def test_apply_prints_the_report_and_the_backup_proves_the_log(
    run: Run, live: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "backups" / "b.sqlite"
    done = run(
        "state", "prune", "--db", str(live), "--before", CUTOFF, "--apply",
        "--backup", str(backup), "--at", "9000",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "selected runs: 1\n" in done.stdout
    assert "applied: true\n" in done.stdout
    assert _runs(run, live) == ["run-2", "run-3"]
    proved = run("log", "verify", "--db", str(live), "--backup", str(backup))
    assert proved.exit_code == 0, proved.output
    assert "1 runs removed" in proved.stdout
    assert run("verify", "--db", str(live)).exit_code == 0
    chain = run("log", "verify", "--db", str(live), "--chain-only", "--json")
    assert json.loads(chain.stdout)["ok"] is True


def test_a_wrong_backup_fails_verification(run: Run, live: Path, tmp_path: Path) -> None:
    backup = tmp_path / "b.sqlite"
    args = ("--before", CUTOFF, "--apply", "--backup", str(backup), "--at", "9000")
    assert run("state", "prune", "--db", str(live), *args).exit_code == 0
    other = tmp_path / "other.sqlite"
    other.write_bytes(backup.read_bytes()[:-1] + b"\x01")
    bad = run("log", "verify", "--db", str(live), "--backup", str(other))
    assert bad.exit_code == 1
    assert bad.stderr.strip().splitlines() == [
        f"bad: backup {other}: {other}: its SHA-256 is not the one log.compacted records"
    ]


def test_verify_backup_of_a_log_never_compacted_is_one_line(run: Run, live: Path) -> None:
    done = run("log", "verify", "--db", str(live), "--backup", "/nowhere.sqlite")
    assert done.exit_code == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "never compacted" in done.stderr


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("--before", "yesterday"), "state prune --before requires a valid timestamp"),
        (("--before", CUTOFF, "--apply"), "state prune --apply requires --backup <absolute-path>"),
        (
            ("--before", CUTOFF, "--backup", "rel/x.sqlite"),
            "state prune backup path must be absolute",
        ),
    ],
)
def test_bad_options_are_one_line_and_delete_nothing(
    run: Run, live: Path, args: tuple[str, ...], error: str
) -> None:
    done = run("state", "prune", "--db", str(live), *args)
    assert done.exit_code == 2
    assert done.stderr.strip().splitlines() == [f"Error: {error}"]
    assert _runs(run, live) == ["run-1", "run-2", "run-3"]


def test_a_zone_less_cutoff_warns(run: Run, live: Path) -> None:
    done = run("state", "prune", "--db", str(live), "--before", "1970-01-01T00:00:05")
    assert done.exit_code == 0
    assert "has no time zone; it is read in local time" in done.stderr


def test_a_missing_backup_is_one_line(run: Run, live: Path, tmp_path: Path) -> None:
    backup = tmp_path / "b.sqlite"
    args = ("--before", CUTOFF, "--apply", "--backup", str(backup), "--at", "9000")
    assert run("state", "prune", "--db", str(live), *args).exit_code == 0
    done = run("log", "verify", "--db", str(live), "--backup", str(tmp_path / "gone.sqlite"))
    assert done.exit_code == 2
    assert done.stderr.strip().splitlines() == [f"Error: no backup at {tmp_path / 'gone.sqlite'}"]


def test_a_compacted_export_without_its_opening_is_refused(
    run: Run, live: Path, tmp_path: Path
) -> None:
    args = ("--before", CUTOFF, "--apply", "--backup", str(tmp_path / "b.sqlite"), "--at", "9000")
    assert run("state", "prune", "--db", str(live), *args).exit_code == 0
    exported = run("log", "export", "--db", str(live)).stdout_bytes
    first, rest = exported.split(b"\n", 1)
    assert b'"type":"log.compacted"' in first
    target = tmp_path / "copy.db"
    assert run("init", "--db", str(target)).exit_code == 0
    refused = run("log", "import", "--db", str(target), stdin=rest)
    assert refused.exit_code == 2
    assert "line 1: " in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert run("log", "verify", "--db", str(target)).stdout.startswith("ok: 0 events")
    whole = run("log", "import", "--db", str(target), stdin=exported)
    assert whole.exit_code == 0, whole.stderr


def test_a_compacted_log_is_counted_from_its_origin(run: Run, live: Path, tmp_path: Path) -> None:
    """Import, replay and rebuild say how many events the compacted log holds, and its head seq."""
    args = ("--before", CUTOFF, "--apply", "--backup", str(tmp_path / "b.sqlite"), "--at", "9000")
    assert run("state", "prune", "--db", str(live), *args).exit_code == 0
    chain = json.loads(run("log", "verify", "--db", str(live), "--json").stdout)
    held, head = chain["events"], chain["headSeq"]
    assert held < head
    imported = run(
        "log",
        "import",
        "--db",
        str(tmp_path / "copy.db"),
        "--json",
        stdin=(run("log", "export", "--db", str(live)).stdout_bytes),
    )
    assert (json.loads(imported.stdout)["events"], json.loads(imported.stdout)["seq"]) == (
        held,
        head,
    )
    replayed = json.loads(
        run("replay", "--db", str(live), "--out", str(tmp_path / "r.db"), "--json").stdout
    )
    assert (replayed["events"], replayed["seq"]) == (held, head)
    rebuilt = json.loads(run("rebuild", "--db", str(live), "--json").stdout)
    assert (rebuilt["events"], rebuilt["seq"]) == (held, head)
    gone = run("replay", "--db", str(live), "--until", "2", "--out", str(tmp_path / "g.db"))
    assert gone.exit_code == 2
    assert "seq 2 was compacted away by a prune" in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "g.db").exists()


def test_dry_run_is_explicit_and_the_default(run: Run, live: Path) -> None:
    """``--dry-run`` (the original's spelling) reports and deletes nothing, as no flag does."""
    explicit = run("state", "prune", "--db", str(live), "--before", CUTOFF, "--dry-run", "--json")
    assert 0 == explicit.exit_code, explicit.output
    assert False is json.loads(explicit.stdout)["report"]["applied"]
    assert _runs(run, live) == ["run-1", "run-2", "run-3"]
    default = run("state", "prune", "--db", str(live), "--before", CUTOFF, "--json")
    strip = {"databaseBytesAfter", "databaseBytesBefore"}
    reports = [
        {k: v for k, v in json.loads(r.stdout)["report"].items() if k not in strip}
        for r in (explicit, default)
    ]
    assert reports[0] == reports[1]
