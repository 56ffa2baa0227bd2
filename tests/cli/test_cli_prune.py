"""``pwf state prune`` and ``pwf log verify --backup`` from the command line (DOMAIN §13.2).

Three runs are started through ``pwf request`` at 1 000, 2 000 and 3 000;
``run-1`` is cancelled at 4 000 and ``run-2`` at 6 000, ``run-3`` stays queued.
A cutoff of 5 000 makes ``run-1`` the only tree to go.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import PRUNE_CUTOFF, prunable
else:
    from _cli import PRUNE_CUTOFF, prunable

Run = Callable[..., Result]
CUTOFF = PRUNE_CUTOFF


def _runs(run: Run, live: Path) -> list[str]:
    listing = run("query", "runs", "--db", str(live)).stdout.splitlines()
    return sorted(line.split()[0] for line in listing[1:])


def _prune(run: Run, live: Path, tmp_path: Path) -> Path:
    """Prune ``live`` at the cutoff, its backup at ``b.sqlite``; the backup's path."""
    backup = tmp_path / "b.sqlite"
    args = ("--before", CUTOFF, "--apply", "--backup", str(backup), "--at", "9000")
    assert run("state", "prune", "--db", str(live), *args).exit_code == 0
    return backup


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    return prunable(run, tmp_path / "live.db", client_line)


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
    assert "events log.pruned took, with the content hash and Merkle leaf" in proved.stdout
    assert run("verify", "--db", str(live)).exit_code == 0
    chain = run("log", "verify", "--db", str(live), "--chain-only", "--json")
    assert json.loads(chain.stdout)["ok"] is True


def test_a_wrong_backup_fails_verification(run: Run, live: Path, tmp_path: Path) -> None:
    backup = _prune(run, live, tmp_path)
    other = tmp_path / "other.sqlite"
    other.write_bytes(backup.read_bytes()[:-1] + b"\x01")
    bad = run("log", "verify", "--db", str(live), "--backup", str(other))
    assert bad.exit_code == 1
    assert bad.stderr.strip().splitlines() == [
        f"bad: backup {other}: its SHA-256 is not the one any log.pruned records"
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
    _prune(run, live, tmp_path)
    done = run("log", "verify", "--db", str(live), "--backup", str(tmp_path / "gone.sqlite"))
    assert done.exit_code == 2
    assert done.stderr.strip().splitlines() == [f"Error: no backup at {tmp_path / 'gone.sqlite'}"]


def test_a_pruned_log_is_not_exported_without_its_removed_bytes(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """An export needs every event's bytes: a pruned range is refused, naming the backup."""
    backup = _prune(run, live, tmp_path)
    out = tmp_path / "log.jsonl"
    refused = run("log", "export", "--db", str(live), "--out", str(out))
    assert refused.exit_code == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert f"its bytes are in the backup {backup}" in refused.stderr
    with contextlib.closing(sqlite3.connect(live)) as connection:
        first = connection.execute("SELECT min(seq) FROM _pwf_pruned").fetchone()[0]
    assert refused.stderr == (
        f"Error: seq {first} was pruned: its bytes are in the backup {backup.absolute()};"
        " export that backup, or the range after the pruned seqs (--from)\n"
    )
    assert not out.exists()
    whole = run("log", "export", "--db", str(backup))
    assert whole.exit_code == 0, whole.stderr


def test_log_show_says_which_seqs_a_prune_took_and_where_their_bytes_are(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """The listing shows the events kept; stderr names the seqs passed over and the backup."""
    backup = _prune(run, live, tmp_path)
    with contextlib.closing(sqlite3.connect(live)) as connection:
        taken = list(connection.execute("SELECT seq, taken FROM _pwf_pruned"))
        head = connection.execute("SELECT seq FROM _pwf_head").fetchone()[0]
    gone = sorted(seq for seq, _taken in taken)
    (at,) = {at for _seq, at in taken}
    assert gone == [1, 7, 8]  # run-1's reservation, its cancel's clearing and finish
    note = (
        f"note: seqs 1, 7-8 are not shown: the log.pruned at seq {at} took their bytes"
        f" to the backup {backup.absolute()}\n"
    )
    shown = run("log", "show", "--db", str(live), "--json")
    assert shown.exit_code == 0, shown.stderr
    seqs = [json.loads(line)["seq"] for line in shown.stdout.splitlines()]
    assert seqs == [seq for seq in range(1, head + 1) if seq not in gone]
    assert shown.stderr == note
    table = run("log", "show", "--db", str(live))
    assert (table.exit_code, table.stderr) == (0, note)
    after = run("log", "show", "--db", str(live), "--from", "9")
    assert (after.exit_code, after.stderr) == (0, "")
    short = run("log", "show", "--db", str(live), "--limit", "3", "--json")  # seqs 2 to 4
    assert short.stderr == note.replace("seqs 1, 7-8", "seqs 1")


def test_explain_says_a_prune_removed_what_it_cannot_find(
    run: Run, live: Path, tmp_path: Path
) -> None:
    """A removed run is named with its prune and backup; a missing interaction hears of it."""
    before = run("explain", "run", "run-9", "--db", str(live))
    assert (before.exit_code, before.stderr) == (2, "Error: no run run-9 in the log\n")
    backup = _prune(run, live, tmp_path)
    with contextlib.closing(sqlite3.connect(live)) as connection:
        (taken,) = connection.execute("SELECT DISTINCT taken FROM _pwf_pruned").fetchone()
    removed = run("explain", "run", "run-1", "--db", str(live))
    assert removed.exit_code == 2
    assert removed.stderr == (
        f"Error: no run run-1 in the log: the log.pruned at seq {taken} removed it;"
        f" its events' bytes are in the backup {backup.absolute()}\n"
    )
    other = run("explain", "run", "run-9", "--db", str(live))
    assert (other.exit_code, other.stderr) == (2, "Error: no run run-9 in the log\n")
    asked = run("explain", "interaction", "int-9", "--db", str(live))
    assert asked.exit_code == 2
    assert asked.stderr == (
        f"Error: no interaction int-9 in the log (the log was pruned at seq {taken}:"
        " a removed run's interactions went with it)\n"
    )
    kept = run("explain", "run", "run-2", "--db", str(live))
    assert kept.exit_code == 0, kept.stderr
    before = run("explain", "run", "run-2", "--db", str(live), "--at", "9")
    assert before.exit_code == 2  # seqs 1, 7 and 8 went with the prune at a later seq
    assert before.stderr == (
        f"Error: seq 1, before seq 9, was pruned (its bytes moved to the backup): explain the"
        f" state at seq 9 in the backup {backup.absolute()} instead\n"
    )
    in_backup = run("explain", "run", "run-1", "--db", str(backup), "--at", "9")
    assert in_backup.exit_code == 0, in_backup.stderr
    after = run("explain", "run", "run-2", "--db", str(live), "--at", str(taken))
    assert after.exit_code == 0, after.stderr


def test_a_pruned_log_is_counted_to_its_head(run: Run, live: Path, tmp_path: Path) -> None:
    """Every seq stays (ADR 0103): verify, replay and rebuild count the log to its head seq."""
    backup = _prune(run, live, tmp_path)
    chain = json.loads(run("log", "verify", "--db", str(live), "--json").stdout)
    assert chain["events"] == chain["headSeq"]
    head = chain["headSeq"]
    replayed = json.loads(
        run("replay", "--db", str(live), "--out", str(tmp_path / "r.db"), "--json").stdout
    )
    assert replayed["seq"] == head
    rebuilt = json.loads(run("rebuild", "--db", str(live), "--json").stdout)
    assert rebuilt["seq"] == head
    gone = run("replay", "--db", str(live), "--until", "2", "--out", str(tmp_path / "g.db"))
    assert gone.exit_code == 2
    assert f"replay the backup {backup} instead" in gone.stderr
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
