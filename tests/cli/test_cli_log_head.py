"""``pwf log head`` and ``pwf log verify --expect-head SEQ:HASH``: anchoring a log out of band."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from click.testing import Result

if TYPE_CHECKING:
    from pathlib import Path

    from tests.cli._cli import one_line
else:
    from _cli import one_line

Run = Callable[..., Result]


def _log(run: Run, path: Path, client_line: Callable[..., bytes], *numbers: int) -> None:
    if not path.exists():
        assert 0 == run("init", "--db", str(path)).exit_code
    lines = b"".join(client_line(number, at=number * 1000) for number in numbers)
    assert 0 == run("request", "--db", str(path), stdin=lines).exit_code


def _stored_head(path: Path) -> tuple[int, str, int]:
    connection = sqlite3.connect(path)
    try:
        row = connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
    finally:
        connection.close()
    return row[0], row[1], row[2]


def test_head_prints_the_anchor(
    run: Run, tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    db = tmp_path / "s.db"
    _log(run, db, client_line, 1, 2)
    seq, content_hash, batch = _stored_head(db)
    text = run("log", "head", "--db", str(db))
    assert (0, f"{seq}:{content_hash} batch {batch}\n") == (text.exit_code, text.stdout)
    shown = json.loads(run("log", "head", "--db", str(db), "--json").stdout)
    assert {"seq": seq, "contentHash": content_hash, "batch": batch} == shown


def test_head_of_an_empty_log(run: Run, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert 0 == run("init", "--db", str(db)).exit_code
    shown = json.loads(run("log", "head", "--db", str(db), "--json").stdout)
    assert {"seq": 0, "contentHash": None, "batch": 0} == shown


def test_an_anchor_holds_while_the_log_grows(
    run: Run, tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    db = tmp_path / "s.db"
    _log(run, db, client_line, 1)
    anchor = run("log", "head", "--db", str(db)).stdout.split()[0]
    _log(run, db, client_line, 2, 3)
    done = run("log", "verify", "--db", str(db), "--expect-head", anchor)
    seq, content_hash = anchor.split(":")
    assert 0 == done.exit_code
    assert f"ok: seq {seq} still has contentHash {content_hash}" == done.stdout.splitlines()[-1]
    data = json.loads(
        run("log", "verify", "--db", str(db), "--expect-head", anchor, "--json").stdout
    )
    assert {"contentHash": content_hash, "failure": None, "ok": True, "seq": int(seq)} == data[
        "expectHead"
    ]


def test_a_consistently_rewritten_log_fails_its_anchor(
    run: Run, tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    """A log rebuilt from scratch verifies on its own; only the anchor tells it apart."""
    original, forged = tmp_path / "a.db", tmp_path / "b.db"
    _log(run, original, client_line, 1, 2)
    _log(run, forged, client_line, 1, 5)
    anchor = run("log", "head", "--db", str(original)).stdout.split()[0]
    seq = anchor.split(":")[0]
    assert 0 == run("log", "verify", "--db", str(forged)).exit_code
    done = run("log", "verify", "--db", str(forged), "--expect-head", anchor)
    _, other, _ = _stored_head(forged)
    assert 1 == done.exit_code
    assert f"bad: expected head seq {seq}: it has {other}" == one_line(done.stderr)


def test_an_anchor_beyond_the_head_fails(
    run: Run, tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    db = tmp_path / "s.db"
    _log(run, db, client_line, 1)
    seq, _, _ = _stored_head(db)
    done = run("log", "verify", "--db", str(db), "--expect-head", f"{seq + 5}:{'a' * 64}")
    assert 1 == done.exit_code
    assert f"bad: expected head seq {seq + 5}: the log's head is seq {seq}" == one_line(done.stderr)


def test_a_malformed_anchor_is_a_usage_error(run: Run, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert 0 == run("init", "--db", str(db)).exit_code
    for bad in ("7", "0:" + "a" * 64, "3:" + "A" * 64, "3:abc"):
        done = run("log", "verify", "--db", str(db), "--expect-head", bad)
        assert 2 == done.exit_code, bad
        assert "--expect-head" in done.stderr


def test_an_anchor_before_a_prune_holds_without_the_backup(
    run: Run, tmp_path: Path, client_line: Callable[..., bytes]
) -> None:
    """A prune keeps every seq and hash (ADR 0103): every anchor written before it still holds."""
    db = tmp_path / "s.db"
    _log(run, db, client_line, 1)
    early = run("log", "head", "--db", str(db)).stdout.split()[0]
    lines = client_line(1, "run.cancel", at=4000)
    assert 0 == run("request", "--db", str(db), stdin=lines).exit_code
    _log(run, db, client_line, 2)
    late = run("log", "head", "--db", str(db)).stdout.split()[0]
    backup = tmp_path / "b.sqlite"
    args = ("--before", "1970-01-01T00:00:05.000Z", "--apply", "--backup", str(backup))
    assert 0 == run("state", "prune", "--db", str(db), *args, "--at", "9000").exit_code
    assert 0 == run("log", "verify", "--db", str(db), "--expect-head", late).exit_code
    held = run("log", "verify", "--db", str(db), "--expect-head", early)
    assert 0 == held.exit_code, held.stderr
