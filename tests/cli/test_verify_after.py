"""A verify after a head an earlier verify proved walks only what follows it.

``EventLog.verify(after=HEAD)`` is what lets the web view's log page cost
what was appended since its last page, not the whole log again.  These
tests hold it to what a whole walk says on every log it may shorten: the
same report on an intact log, the same first bad seq, events and reason on
a log damaged after the head, and a whole walk where the head no longer
stands or a prune followed it.  A byte changed before the head is what shows
that only the events after it were read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from click.testing import Result

from pwf import merkle
from pwf.store import Head
from pwf.store.chainwalk import walk_chain
from pwf.store.opening import open_file

if TYPE_CHECKING:
    from pathlib import Path

    from tests._tamper import editable
    from tests.cli._cli import PRUNE_CUTOFF, prunable

    from pwf.store import VerifyReport
else:
    from _cli import PRUNE_CUTOFF, prunable

    from _tamper import editable

Run = Callable[..., Result]


def _request(run: Run, path: Path, lines: bytes) -> None:
    done = run("request", "--db", str(path), stdin=lines)
    assert done.exit_code == 0, done.output
    assert '"outcome":"rejected"' not in done.stdout, done.stdout


@pytest.fixture
def live(run: Run, tmp_path: Path, client_line: Callable[..., bytes]) -> Path:
    """Runs 1-3 started, 1 and 2 cancelled: 1 finished before the cutoff."""
    return prunable(run, tmp_path / "live.db", client_line)


def _more(run: Run, path: Path, client_line: Callable[..., bytes], first: int = 4) -> None:
    """Ten more runs started, so that the events after the first head complete tree nodes."""
    lines = b"".join(client_line(number, at=7000) for number in range(first, first + 10))
    _request(run, path, lines)


def _head_then_more(
    run: Run, path: Path, client_line: Callable[..., bytes], *, deep: bool = True
) -> Head:
    """The head a verify of ``path`` finds intact; then :func:`_more` appends ten runs."""
    first = _verify(path, deep=deep)
    assert first.ok, first
    _more(run, path, client_line)
    return first.head


def _verify(path: Path, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
    with open_file(path, read_only=True) as store:
        return store.verify(deep=deep, after=after)


def _damage(path: Path, seq: int) -> None:
    """Change one byte of the bytes stored at ``seq``."""
    connection = editable(sqlite3.connect(path))
    try:
        (body,) = connection.execute("SELECT body FROM events WHERE seq = ?", (seq,)).fetchone()
        at = len(body) // 3
        changed = body[:at] + (b"0" if body[at : at + 1] != b"0" else b"1") + body[at + 1 :]
        with connection:
            connection.execute("UPDATE events SET body = ? WHERE seq = ?", (changed, seq))
    finally:
        connection.close()


@pytest.mark.parametrize("deep", [True, False])
def test_an_intact_log_gets_the_whole_walks_report(
    run: Run, live: Path, client_line: Callable[..., bytes], deep: bool
) -> None:
    first = _head_then_more(run, live, client_line, deep=deep)
    whole = _verify(live, deep=deep)
    assert whole.ok
    assert whole.head.seq > first.seq
    assert _verify(live, deep=deep, after=first) == whole
    assert _verify(live, deep=deep, after=whole.head) == whole  # nothing since: nothing walked


@pytest.mark.parametrize("deep", [True, False])
def test_only_the_events_after_the_head_are_read(
    run: Run, live: Path, client_line: Callable[..., bytes], deep: bool
) -> None:
    _more(run, live, client_line)
    first = _verify(live, deep=deep)
    # Seq 2 feeds a stored node of 16 leaves, which the frontier at the head reads as stored;
    # below that, the frontier is made from the events' own bytes, and a change there shows.
    assert first.head.seq >= 1 << merkle.STORED_LEVEL
    _more(run, live, client_line, 14)
    _damage(live, 2)
    assert _verify(live, deep=deep).first_bad_seq == 2
    resumed = _verify(live, deep=deep, after=first.head)
    assert resumed.ok, resumed


@pytest.mark.parametrize("deep", [True, False])
def test_a_fault_after_the_head_is_named_as_a_whole_walk_names_it(
    run: Run, live: Path, client_line: Callable[..., bytes], deep: bool
) -> None:
    first = _head_then_more(run, live, client_line, deep=deep)
    _damage(live, first.seq + 3)
    whole = _verify(live, deep=deep)
    assert whole.first_bad_seq == first.seq + 3
    assert _verify(live, deep=deep, after=first) == whole


def test_a_tree_node_completed_after_the_head_is_checked(
    run: Run, live: Path, client_line: Callable[..., bytes]
) -> None:
    first = _head_then_more(run, live, client_line)
    connection = sqlite3.connect(live)
    try:
        (last,) = connection.execute("SELECT max(pos) FROM _pwf_tree").fetchone()
        assert last >= merkle.stored_for(first.seq)  # completed by the events after it
        with connection:
            connection.execute("UPDATE _pwf_tree SET hash = zeroblob(32) WHERE pos = ?", (last,))
    finally:
        connection.close()
    whole = _verify(live)
    assert whole.reason is not None
    assert "Merkle tree" in whole.reason
    assert _verify(live, after=first) == whole


def test_a_head_the_log_no_longer_holds_walks_the_whole_log(
    run: Run, live: Path, client_line: Callable[..., bytes]
) -> None:
    first = _head_then_more(run, live, client_line)
    _damage(live, 2)
    other = Head(first.seq, "0" * 64, first.batch)
    assert _verify(live, after=other).first_bad_seq == 2
    later = Head(first.seq + 10_000, first.content_hash, first.batch)
    assert _verify(live, after=later).first_bad_seq == 2


def test_a_prune_after_the_head_walks_the_whole_log(
    run: Run, live: Path, client_line: Callable[..., bytes], tmp_path: Path
) -> None:
    first = _head_then_more(run, live, client_line)
    done = run(
        "state", "prune", "--db", str(live), "--before", PRUNE_CUTOFF, "--apply",
        "--backup", str(tmp_path / "b.sqlite"), "--at", "9000",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    connection = sqlite3.connect(live)
    try:
        kept = connection.execute(
            "SELECT max(seq) FROM events WHERE seq <= ? AND body IS NOT NULL", (first.seq,)
        ).fetchone()[0]
    finally:
        connection.close()
    _damage(live, kept)
    assert _verify(live).first_bad_seq == kept
    assert _verify(live, after=first).first_bad_seq == kept


@pytest.mark.parametrize("processes", [1, 3])
def test_a_walk_from_a_proven_head_reads_nothing_before_it(
    run: Run, live: Path, client_line: Callable[..., bytes], processes: int
) -> None:
    first = _head_then_more(run, live, client_line)
    whole = _verify(live)
    _damage(live, 2)
    walked = walk_chain(live, first, processes=processes, deep=True, proven=True)
    assert walked == whole.head
