"""One fault corpus against every walker of a log: each names the same first bad seq.

The walkers are every place pwf walks a hash chain: the deep and the
chain-only verify (through the store, and their sequential walks on their
own), the walk split over processes (bytes only and deep), replay,
rebuild, the JSONL import of the stored bytes and, on a compacted log, the
proof against its backup.  Two logs are damaged: seven events in four
batches (seqs 1 | 2 3 4 | 5 6 | 7), and the same log compacted (its
``log.compacted`` at seq 8 opens seqs 9-15).  Each fault is made straight in
the ``events`` table, as an attacker or a damaged disk would.

The faults: every single-byte flip of the third event's body and of each
of its hash columns, a deleted first, middle and last event, two swapped
events, a batch that skips one, a batch that goes back, a forged tail (the
last event re-sealed, so only the head row disagrees) and a forged
``log.compacted`` inside the log.  On the plain log every flip runs
against the in-process walkers and every sixteenth against all of them
(:func:`_sampled`); the compacted log gets every sixteenth flip.

A walker that never reads what a fault changed cannot see it, and must say
so by finding nothing: the hash columns are read only by the verifies
(``prev_hash`` only by the deep ones), the head row by everything but the
JSONL import, whose file carries no head.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NamedTuple

import pytest

from pwf import canonical
from pwf.cli._options import open_store
from pwf.errors import ChainError, ImportRefusedError, PwfError
from pwf.events import Actor, open_body
from pwf.fold.replay import rebuild, replay
from pwf.host._backup import backup_database
from pwf.host._compacting import prepared, swap
from pwf.store import Head
from pwf.store.chainwalk import walk_chain, walk_rows
from pwf.store.compaction import attached, prove
from pwf.store.jsonl import import_jsonl
from pwf.store.rows import COLUMNS, columns, verify_rows
from pwf.store.sqlite import SqliteStore

SIZES: Final = (1, 3, 2, 1)
COMPACTED_AT: Final = 8
"""The seq of ``log.compacted`` in the compacted log; its events are 9-15."""
BODY, CONTENT, PREV, HEAD = "body", "content_hash", "prev_hash", "head"
"""What a fault changes: a body (seen by all), a hash column, or only the head row."""

Walker = Callable[[Path, Path], int | None]


# --------------------------------------------------------------------------- the walkers


def _head(path: Path) -> Head:
    connection = sqlite3.connect(path)
    try:
        row = connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
    finally:
        connection.close()
    return Head(*row)


def _against_head(path: Path, last: Head) -> int | None:
    """What a caller of a bare walk checks after it: the walk ends at the stored head."""
    head = _head(path)
    if last == head:
        return None
    return last.seq if last.seq == head.seq else min(last.seq, head.seq) + 1


def _origin(path: Path) -> Head:
    with SqliteStore(path, read_only=True) as store:
        return store.origin()


def _verify(deep: bool) -> Walker:
    def walk(path: Path, _work: Path) -> int | None:
        with SqliteStore(path, read_only=True) as store:
            return store.verify(deep=deep).first_bad_seq

    return walk


def _rows(path: Path, _work: Path) -> int | None:
    origin = _origin(path)
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq")  # noqa: S608 - constant
        return _against_head(path, verify_rows(rows, origin))
    finally:
        connection.close()


def _bytes(path: Path, _work: Path) -> int | None:
    origin = _origin(path)
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            "SELECT seq, CAST(content_hash AS BLOB), body FROM events ORDER BY seq"
        )
        return _against_head(path, walk_rows(rows, origin))
    finally:
        connection.close()


def _split(deep: bool) -> Walker:
    def walk(path: Path, _work: Path) -> int | None:
        return _against_head(path, walk_chain(path, _origin(path), processes=3, deep=deep))

    return walk


def _replay(path: Path, work: Path) -> int | None:
    with open_store(str(path)) as store:
        replay(store, work / "replayed.db", chunk=2)
    return None


def _rebuild(path: Path, _work: Path) -> int | None:
    with open_store(str(path)) as store:
        rebuild(store, chunk=2)
    return None


def _jsonl(path: Path, work: Path) -> int | None:
    connection = sqlite3.connect(path)
    try:
        lines = b"".join(
            body + b"\n" for (body,) in connection.execute("SELECT body FROM events ORDER BY seq")
        )
    finally:
        connection.close()
    exported = work / "log.jsonl"
    exported.write_bytes(lines)
    first = json.loads(lines.split(b"\n", 1)[0]) if lines else {}
    opening = first.get("seq", 1) - 1 if first.get("type") == "log.compacted" else 0
    try:
        with SqliteStore(work / "imported.db", create=True) as store, exported.open("rb") as f:
            import_jsonl(store, f)
    except ImportRefusedError as error:
        return opening + error.line_no
    return None


def _proof(path: Path, work: Path) -> int | None:
    with SqliteStore(path, read_only=True) as store:
        found = prove(store, work.parent / "backup.sqlite")
    if found.ok:
        return None
    assert found.failure is not None
    assert found.failure.startswith("seq "), found.failure
    return int(found.failure.split()[1].rstrip(":"))


IN_PROCESS: Final = frozenset(
    {"verify", "verify --chain-only", "deep rows", "bytes rows", "jsonl import"}
)
"""The walkers that cost a few milliseconds; the others fork or fold into scratch files."""
WALKERS: Final[dict[str, tuple[Walker, frozenset[str]]]] = {
    "verify": (_verify(deep=True), frozenset({BODY, CONTENT, PREV, HEAD})),
    "verify --chain-only": (_verify(deep=False), frozenset({BODY, CONTENT, HEAD})),
    "deep rows": (_rows, frozenset({BODY, CONTENT, PREV, HEAD})),
    "bytes rows": (_bytes, frozenset({BODY, CONTENT, HEAD})),
    "split walk": (_split(deep=False), frozenset({BODY, CONTENT, HEAD})),
    "split deep walk": (_split(deep=True), frozenset({BODY, CONTENT, PREV, HEAD})),
    "replay": (_replay, frozenset({BODY, HEAD})),
    "rebuild": (_rebuild, frozenset({BODY, HEAD})),
    "jsonl import": (_jsonl, frozenset({BODY})),
    "backup proof": (_proof, frozenset({BODY, HEAD})),
}


def _first_bad(walker: Walker, path: Path, work: Path) -> int | None:
    try:
        return walker(path, work)
    except ChainError as error:
        return error.seq
    except PwfError as error:
        raise AssertionError(f"a fault outside the chain's errors: {error}") from error


# --------------------------------------------------------------------------- the logs


def _document(connection: sqlite3.Connection, seq: int) -> dict[str, Any]:
    body = connection.execute("SELECT body FROM events WHERE seq = ?", (seq,)).fetchone()[0]
    document: dict[str, Any] = json.loads(body)
    return document


def _reseal(document: dict[str, Any]) -> bytes:
    draft = {key: value for key, value in document.items() if key != "contentHash"}
    draft["contentHash"] = hashlib.sha256(canonical.encode(draft)).hexdigest()
    return canonical.encode(draft)


def _store_body(connection: sqlite3.Connection, seq: int, body: bytes) -> None:
    """Write a forged but well-formed event at ``seq``, its columns agreeing with its bytes."""
    values = columns(open_body(body))
    names = [name.strip() for name in COLUMNS.split(",")]
    sets = ", ".join(f"{name} = ?" for name in names)
    connection.execute(f"UPDATE events SET {sets} WHERE seq = ?", (*values, body, seq))  # noqa: S608


def _make_log(path: Path, *, compacted: bool, fill: Callable[..., object]) -> None:
    with open_store(str(path), create=True) as store:
        fill(store, SIZES)
        if compacted:
            backup = path.parent / "backup.sqlite"
            backup_database(store.path, store.connection, backup)
            with prepared(store, frozenset()) as scratch:
                scratch.extend(backup)
                with attached(store, scratch.path), store.transaction() as tx:
                    swap(
                        tx,
                        backup,
                        scratch,
                        cutoff=0,
                        at=1_764_403_300_000,
                        actor=Actor(type="host", id="pwf-direct"),
                        cause=None,
                    )
        store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class Fault(NamedTuple):
    """A change to the log, what it touches, and the first bad seq it makes (relative)."""

    name: str
    touches: str
    bad: int
    """The first bad seq, counted from the log's first event (1)."""
    apply: Callable[[sqlite3.Connection, int], None]
    """Damage the log whose first event is at the given seq."""
    every_walker: bool = True
    """False for the byte flips that only the in-process walkers get (see :func:`_sampled`)."""


def _flip(column: str, offset: int, at: int) -> Callable[[sqlite3.Connection, int], None]:
    def apply(connection: sqlite3.Connection, first: int) -> None:
        seq = first + at - 1
        value = connection.execute(
            f"SELECT CAST({column} AS BLOB) FROM events WHERE seq = ?",  # noqa: S608 - constant
            (seq,),
        ).fetchone()[0]
        changed = bytearray(value)
        changed[offset] ^= 0x01 if column == BODY else 0x03
        stored = bytes(changed) if column == BODY else bytes(changed).decode(errors="replace")
        connection.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (stored, seq))  # noqa: S608

    return apply


def _delete(at: int) -> Callable[[sqlite3.Connection, int], None]:
    def apply(connection: sqlite3.Connection, first: int) -> None:
        connection.execute("DELETE FROM events WHERE seq = ?", (first + at - 1,))

    return apply


def _swap(connection: sqlite3.Connection, first: int) -> None:
    """Events 3 and 4 trade places, each row whole."""
    third, fourth = first + 2, first + 3
    connection.execute("UPDATE events SET seq = 1000000 WHERE seq = ?", (third,))
    connection.execute("UPDATE events SET seq = ? WHERE seq = ?", (third, fourth))
    connection.execute("UPDATE events SET seq = ? WHERE seq = 1000000", (fourth,))


def _rebatch(at: int, delta: int) -> Callable[[sqlite3.Connection, int], None]:
    def apply(connection: sqlite3.Connection, first: int) -> None:
        seq = first + at - 1
        document = _document(connection, seq)
        document["batch"] += delta
        _store_body(connection, seq, _reseal(document))

    return apply


def _forge_tail(connection: sqlite3.Connection, first: int) -> None:
    """The last event re-sealed with other data: its chain holds, the head row disagrees."""
    seq = first + 6
    document = _document(connection, seq)
    document["data"]["outcome"] = "rejected"
    _store_body(connection, seq, _reseal(document))


def _forge_compacted(connection: sqlite3.Connection, first: int) -> None:
    """Event 4 replaced by a well-sealed ``log.compacted`` that links to event 3."""
    seq = first + 3
    document = _document(connection, seq)
    before = _document(connection, seq - 1)
    document.update(
        type="log.compacted",
        data={
            "backupPath": "/elsewhere/backup.sqlite",
            "backupSha256": "0" * 64,
            "cutoff": 0,
            "removedEvents": 0,
            "removedRunIds": [],
            "replacedBatch": max(before["batch"] - 1, 1),
            "replacedHash": before["contentHash"],
            "replacedSeq": max(seq - 1, 1),
            "retainedEvents": 0,
        },
    )
    document.pop("cause", None)
    _store_body(connection, seq, _reseal(document))


def _sampled(offset: int, step: int) -> bool:
    """Every flip goes to the in-process walkers; every ``step``-th also to the forking ones.

    The forking walkers (split walks, replay, rebuild, proof) cost a tenth
    of a second per damaged log each, so every single flip for all of them
    would take minutes; they share the checks the in-process ones run, and
    the sample still hits every member of the event's bytes.
    """
    return offset % step == 0


def _faults(body_length: int) -> list[Fault]:
    found = [
        Fault(
            f"body byte {offset} of event 3",
            BODY,
            3,
            _flip(BODY, offset, 3),
            every_walker=_sampled(offset, 16),
        )
        for offset in range(body_length)
    ]
    found += [
        Fault(
            f"{column} char {offset} of event 3",
            touches,
            3,
            _flip(column, offset, 3),
            every_walker=_sampled(offset, 16),
        )
        for column, touches in ((CONTENT, CONTENT), (PREV, PREV))
        for offset in range(64)
    ]
    found += [
        Fault("first event deleted", BODY, 1, _delete(1)),
        Fault("middle event deleted", BODY, 4, _delete(4)),
        Fault("last event deleted", HEAD, 7, _delete(7)),
        Fault("events 3 and 4 swapped", BODY, 3, _swap),
        Fault("a batch that skips one", BODY, 5, _rebatch(5, +1)),
        Fault("a batch that goes back", BODY, 6, _rebatch(6, -1)),
        Fault("a forged tail", HEAD, 7, _forge_tail),
        Fault("a forged log.compacted", BODY, 4, _forge_compacted),
    ]
    return found


# --------------------------------------------------------------------------- the test


class Log(NamedTuple):
    path: Path
    first: int


@pytest.fixture(scope="module", params=["plain", "compacted"])
def template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, fill: Any
) -> Log:
    directory = tmp_path_factory.mktemp(request.param)
    path = directory / "template.db"
    compacted = request.param == "compacted"
    _make_log(path, compacted=compacted, fill=fill)
    return Log(path, COMPACTED_AT + 1 if compacted else 1)


BODY_LENGTH: Final = 910
"""At least as long as the third event's body, so every one of its bytes is flipped."""
FAULTS: Final = _faults(BODY_LENGTH)


def _damaged(template: Log, fault: Fault, work: Path) -> Path:
    path = work / "damaged" / "pwf.db"
    path.parent.mkdir(parents=True)
    shutil.copyfile(template.path, path)
    backup = template.path.parent / "backup.sqlite"
    if backup.exists():
        shutil.copyfile(backup, work / "backup.sqlite")
    connection = sqlite3.connect(path)
    try:
        fault.apply(connection, template.first)
        connection.commit()
    finally:
        connection.close()
    return path


def test_the_template_logs_are_sound(template: Log, tmp_path: Path) -> None:
    """Undamaged, no walker finds anything, and the third body is as long as assumed."""
    (tmp_path / "w").mkdir()
    path = _damaged(template, Fault("none", BODY, 0, lambda _c, _f: None), tmp_path)
    for name, (walker, _) in WALKERS.items():
        if name == "backup proof" and template.first == 1:
            continue
        assert _first_bad(walker, path, tmp_path / "w") is None, name
    connection = sqlite3.connect(path)
    try:
        length = connection.execute(
            "SELECT length(body) FROM events WHERE seq = ?", (template.first + 2,)
        ).fetchone()[0]
    finally:
        connection.close()
    assert length <= BODY_LENGTH


_CASES: Final = [
    pytest.param(kind, fault, id=f"{kind}-{fault.name}")
    for kind in ("plain", "compacted")
    for fault in FAULTS
    if kind == "plain" or fault.every_walker
]
"""The compacted log gets the sampled flips only: the others would cost minutes more."""


@pytest.mark.parametrize(("template", "fault"), _CASES, indirect=["template"])
def test_every_walker_names_the_same_first_bad_seq(
    template: Log, fault: Fault, tmp_path: Path
) -> None:
    """Each walker that reads what the fault changed names its first bad seq; the others none."""
    body = sqlite3.connect(template.path)
    try:
        length = body.execute(
            "SELECT length(body) FROM events WHERE seq = ?", (template.first + 2,)
        ).fetchone()[0]
    finally:
        body.close()
    if fault.touches == BODY and fault.name.startswith("body byte"):
        offset = int(fault.name.split()[2])
        if offset >= length:
            pytest.skip("beyond this event's body")
    path = _damaged(template, fault, tmp_path)
    expected = template.first + fault.bad - 1
    found = {}
    for name, (walker, sees) in WALKERS.items():
        if name == "backup proof" and template.first == 1:
            continue
        if not fault.every_walker and name not in IN_PROCESS:
            continue
        work = tmp_path / name.replace(" ", "-")
        work.mkdir()
        found[name] = _first_bad(walker, path, work)
        assert found[name] == (expected if fault.touches in sees else None), (name, found)
