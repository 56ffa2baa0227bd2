"""One fault corpus against every walker of a log: each names the same first bad seq.

The walkers are every place pwf walks a hash chain: the deep and the
chain-only verify (through the store, and their sequential walks on their
own), the walk split over seq ranges (bytes only and deep), replay,
rebuild, the JSONL import of the stored bytes and, on a compacted log, the
proof against its backup.  Two logs are damaged: seven events in four
batches (seqs 1 | 2 3 4 | 5 6 | 7), and the same log compacted (its
``log.compacted`` at seq 8 opens seqs 9-15).  Each fault is made straight in
the ``events`` view, as an attacker or a damaged disk would change format
v1's table (:func:`tests._tamper.editable`), or in format v2's own tables.

The faults: every single-byte flip of the third event's body and of each
of its hash columns (a content hash char becomes another hex digit: v2
stores it as 32 bytes), a deleted first, middle and last event, two swapped
events, a batch that skips one, a batch that goes back, a forged tail (the
last event re-sealed, so only the head row disagrees) and a forged
``log.compacted`` inside the log.  In v2's tables (:data:`STORED`): a byte
of an event's ``data``, of its batch row's ``head``, of its 32-byte content
hash and of its ``link``, an event naming another batch row, a deleted
batch row and a batch row's ``at``.  Every fault goes to every walker, on
both logs; under ``make test`` the flips take the three walkers that fold
or prove the whole log in turn (:data:`FOLDING`), ``make test-deep`` gives
each flip all three.

Every walker runs in this process, so a damaged log costs milliseconds:
the split walks cut the seven events into three ranges and walk them as
the forked processes would, their parts joined by the same code
(``_inprocess.py``); the forks themselves, one per fault class, are
walked for real by two more walkers (:data:`FORKED`).  The damaged logs
live in the system's memory file system when it has one.

A walker that never reads what a fault changed cannot see it, and must say
so by finding nothing: the hash columns are read only by the verifies
(``prev_hash`` and the other indexed columns only by the deep ones), the
head row by everything but the JSONL import, whose file carries no head.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, NamedTuple
from unittest import mock

import pytest

from pwf import canonical
from pwf.cli._options import open_store
from pwf.errors import ChainError, ImportRefusedError, PwfError
from pwf.events import open_body
from pwf.fold.rebuild import rebuild
from pwf.fold.replay import replay
from pwf.store import EMPTY, Head, compaction, origin_of
from pwf.store.chainwalk import walk_chain, walk_rows
from pwf.store.compaction import prove
from pwf.store.jsonl import import_jsonl
from pwf.store.rows import COLUMNS, columns, verify_rows
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from tests.integration._inprocess import ranges_in_process

    from pwf.store import VerifyReport
else:
    from _inprocess import ranges_in_process

if TYPE_CHECKING:
    from tests._compacted import compact_by_hand
    from tests._dbfile import assert_rows_as_viewed, checkpoint
    from tests._depth import DEEP
    from tests._tamper import editable
else:
    from _compacted import compact_by_hand
    from _dbfile import assert_rows_as_viewed, checkpoint
    from _depth import DEEP
    from _tamper import editable

SIZES: Final = (1, 3, 2, 1)
COMPACTED_AT: Final = 8
"""The seq of ``log.compacted`` in the compacted log; its events are 9-15."""
BODY, CONTENT, PREV, HEAD = "body", "content_hash", "prev_hash", "head"
"""What a fault changes: a body (seen by all), a hash column, or only the head row."""
COLUMN: Final = "column"
"""A fault that changes an indexed column only (``at``, an id), not the bytes: deep walks see it."""
HEX: Final = "0123456789abcdef"


class Damaged(NamedTuple):
    """One damaged log: its file, what its tables hold, and a directory to work in."""

    path: Path
    rows: list[tuple[Any, ...]]
    """Every event row, all columns, in seq order."""
    head: Head
    work: Path
    backup: Path
    """The backup of the compacted log (unused on the plain one)."""
    empty: Path
    """An empty pwf database to copy for an import."""

    def origin(self) -> Head:
        """Where the chain starts, as a walker's caller reads it from the first event.

        Raises:
            ChainError: the first event cannot start a log.
        """
        return EMPTY if not self.rows else origin_of(self.rows[0][0], self.rows[0][11])


Walker = Callable[[Damaged], int | None]


# --------------------------------------------------------------------------- the walkers


def _against_head(log: Damaged, last: Head) -> int | None:
    """What a caller of a bare walk checks after it: the walk ends at the stored head."""
    head = log.head
    if last == head:
        return None
    return last.seq if last.seq == head.seq else min(last.seq, head.seq) + 1


def _verify(deep: bool) -> Walker:
    def walk(log: Damaged) -> int | None:
        with SqliteStore(log.path, read_only=True) as store:
            return store.verify(deep=deep).first_bad_seq

    return walk


def _rows(log: Damaged) -> int | None:
    return _against_head(log, verify_rows(iter(log.rows), log.origin()))


def _bytes(log: Damaged) -> int | None:
    rows = ((row[0], row[9].encode(), row[11]) for row in log.rows)
    return _against_head(log, walk_rows(rows, log.origin()))


def _split(deep: bool, *, fork: bool) -> Walker:
    def walk(log: Damaged) -> int | None:
        with contextlib.nullcontext() if fork else ranges_in_process():
            return _against_head(log, walk_chain(log.path, log.origin(), processes=3, deep=deep))

    return walk


def _replay(log: Damaged) -> int | None:
    with open_store(str(log.path), read_only=True) as store:  # as `pwf replay` opens it
        replay(store, log.work / "replayed.db", chunk=2)
    return None


def _rebuild(log: Damaged) -> int | None:
    with open_store(str(log.path)) as store:
        rebuild(store, chunk=2)
    return None


def _jsonl(log: Damaged) -> int | None:
    lines = b"".join(row[11] + b"\n" for row in log.rows)
    exported = log.work / "log.jsonl"
    exported.write_bytes(lines)
    first = json.loads(lines.split(b"\n", 1)[0]) if lines else {}
    opening = first.get("seq", 1) - 1 if first.get("type") == "log.compacted" else 0
    target = log.work / "imported.db"
    shutil.copyfile(log.empty, target)
    try:
        with SqliteStore(target) as store, exported.open("rb") as f:
            import_jsonl(store, f)
    except ImportRefusedError as error:
        return opening + error.line_no
    return None


class _Backup(SqliteStore):
    """The backup's store in :func:`prove`: its deep verify runs once per backup file.

    No fault touches the backup, so every case would verify the same bytes
    again; the report is kept under the file's identity (ADR 0054), and the
    module checks at its end that each backup still holds the bytes it
    first had (:func:`template`), so no kept report outlives its bytes
    (ADR 0067).
    """

    reports: ClassVar[dict[tuple[object, ...], VerifyReport]] = {}

    def verify(self, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
        if after is not None:
            return super().verify(deep=deep, after=after)
        found = self.path.stat()
        key = (self.path, found.st_ino, found.st_size, found.st_mtime_ns, deep)
        if key not in self.reports:
            self.reports[key] = super().verify(deep=deep)
        return self.reports[key]


def _proof(log: Damaged) -> int | None:
    with (
        SqliteStore(log.path, read_only=True) as store,
        mock.patch.object(compaction, "SqliteStore", _Backup),
    ):
        found = prove(store, log.backup)
    if found.ok:
        return None
    assert found.failure is not None
    assert found.failure.startswith("seq "), found.failure
    return int(found.failure.split()[1].rstrip(":"))


WALKERS: Final[dict[str, tuple[Walker, frozenset[str]]]] = {
    "verify": (_verify(deep=True), frozenset({BODY, CONTENT, PREV, COLUMN, HEAD})),
    "verify --chain-only": (_verify(deep=False), frozenset({BODY, CONTENT, HEAD})),
    "deep rows": (_rows, frozenset({BODY, CONTENT, PREV, COLUMN, HEAD})),
    "bytes rows": (_bytes, frozenset({BODY, CONTENT, HEAD})),
    "split walk": (_split(deep=False, fork=False), frozenset({BODY, CONTENT, HEAD})),
    "split deep walk": (
        _split(deep=True, fork=False),
        frozenset({BODY, CONTENT, PREV, COLUMN, HEAD}),
    ),
    "replay": (_replay, frozenset({BODY, HEAD})),
    "rebuild": (_rebuild, frozenset({BODY, HEAD})),
    "jsonl import": (_jsonl, frozenset({BODY})),
    "backup proof": (_proof, frozenset({BODY, HEAD})),
}
"""Every walker, in this process; each meets every fault."""
FORKED: Final[dict[str, tuple[Walker, frozenset[str]]]] = {
    "split walk, forked": (_split(deep=False, fork=True), frozenset({BODY, CONTENT, HEAD})),
    "split deep walk, forked": (
        _split(deep=True, fork=True),
        frozenset({BODY, CONTENT, PREV, COLUMN, HEAD}),
    ),
}
"""The split walks with their ranges in forked processes: one fault of each class."""
FOLDING: Final = ("replay", "rebuild", "backup proof")
"""The walkers that fold or prove a whole copy of the log, each several times the others' cost.

Under ``make test`` a flip goes to one of them in turn (by its offset) beside all the others,
so each meets every third flip and every run of bytes longer than two; every fault of
another kind, and under ``make test-deep`` every flip too, goes to all three (ADR 0069).
"""


def _first_bad(walker: Walker, log: Damaged) -> int | None:
    try:
        return walker(log)
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
    if compacted:  # as pwf compacted before ADR 0103: its logs are still read and proven
        compact_by_hand(path, path.parent / "backup.sqlite", at=1_764_403_300_000)
    checkpoint(path)


class Fault(NamedTuple):
    """A change to the log, what it touches, and the first bad seq it makes (relative)."""

    name: str
    touches: str
    bad: int
    """The first bad seq, counted from the log's first event (1)."""
    apply: Callable[[sqlite3.Connection, int], None]
    """Damage the log whose first event is at the given seq."""


def _flip(column: str, offset: int, at: int) -> Callable[[sqlite3.Connection, int], None]:
    def apply(connection: sqlite3.Connection, first: int) -> None:
        seq = first + at - 1
        value = connection.execute(
            f"SELECT CAST({column} AS BLOB) FROM events WHERE seq = ?",  # noqa: S608 - constant
            (seq,),
        ).fetchone()[0]
        changed = bytearray(value)
        if column == CONTENT:  # 32 bytes in v2: the char becomes another hex digit
            changed[offset] = ord(HEX[HEX.index(chr(changed[offset])) ^ 0x03])
        else:
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


BODY_LENGTH: Final = 910
"""At least as long as the third event's body, so every one of its bytes is flipped."""
FLIPS: Final = 64
"""Flips of one column per test case: each case costs about a second."""


def _flips(column: str, touches: str, start: int, stop: int) -> list[Fault]:
    kind = "body byte" if column == BODY else f"{column} char"
    return [
        Fault(f"{kind} {offset} of event 3", touches, 3, _flip(column, offset, 3))
        for offset in range(start, stop)
    ]


# --------------------------------------------------------------------------- format v2's parts


def _in_parts(connection: sqlite3.Connection, seq: int) -> int:
    """The batch row of the event at ``seq``, which must be kept in parts (not whole)."""
    row = connection.execute(
        "SELECT e.head FROM _pwf_events e WHERE e.seq = ? AND e.data IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM _pwf_whole w WHERE w.seq = e.seq)",
        (seq,),
    ).fetchone()
    assert row is not None, f"event {seq} is not kept in parts"
    head: int = row[0]
    return head


def _flip_part(column: str, at: int, where: str) -> Callable[[sqlite3.Connection, int], None]:
    """Flip one byte (first, middle or last, by ``where``) of a stored part of event ``at``.

    ``column`` is ``table.column``: a ``_pwf_events`` column of the event's
    own row, or a ``_pwf_batches`` column of the batch row it names.  An
    event has a ``link`` only where its ``prevHash`` is not the hash of the
    row before; it is set first to the hash it shows, which changes no byte.
    """
    table, name = column.split(".")

    def apply(connection: sqlite3.Connection, first: int) -> None:
        seq = first + at - 1
        key = seq if table == "_pwf_events" else _in_parts(connection, seq)
        _in_parts(connection, seq)
        if name == "link":
            connection.execute(
                "UPDATE _pwf_events SET link = (SELECT content_hash FROM _pwf_events"
                " WHERE seq = ?) WHERE seq = ? AND link IS NULL",
                (seq - 1, seq),
            )
        (value,) = connection.execute(
            f"SELECT {name} FROM {table} WHERE seq = ?",  # noqa: S608 - the test's own names
            (key,),
        ).fetchone()
        changed = bytearray(value)
        changed[{"first": 0, "middle": len(changed) // 2, "last": -1}[where]] ^= 0x01
        connection.execute(
            f"UPDATE {table} SET {name} = ? WHERE seq = ?",  # noqa: S608 - the test's own names
            (bytes(changed), key),
        )

    return apply


def _other_batch_row(connection: sqlite3.Connection, first: int) -> None:
    """Event 3 names the batch row of events 5-6: its batch members become theirs."""
    _in_parts(connection, first + 2)
    connection.execute(
        "UPDATE _pwf_events SET head = ? WHERE seq = ?",
        (_in_parts(connection, first + 4), first + 2),
    )


def _batch_row_deleted(connection: sqlite3.Connection, first: int) -> None:
    """The batch row of events 5-6 is deleted: the view has neither."""
    connection.execute(
        "DELETE FROM _pwf_batches WHERE seq = ?", (_in_parts(connection, first + 4),)
    )


def _type_bytes(stored: bytes) -> Callable[[sqlite3.Connection, int], None]:
    """Event 3's ``_pwf_events.type`` holds ``stored``, bytes that are not its type's UTF-8.

    The view makes the body of the bytes as they are; so must every reader
    of the parts (ADR 0109), which then finds the body broken, never a text
    it cannot encode.
    """

    def apply(connection: sqlite3.Connection, first: int) -> None:
        _in_parts(connection, first + 2)
        connection.execute(
            "UPDATE _pwf_events SET type = CAST(? AS TEXT) WHERE seq = ?", (stored, first + 2)
        )

    return apply


def _text_or_bytes(data: bytes) -> str | bytes:
    """A TEXT cell as pwf reads it (lone surrogates kept, ADR 0071), else its bytes."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data


def _not_text(table: str, column: str, at: int) -> Callable[[sqlite3.Connection, int], None]:
    """``table.column`` of event ``at`` (of its batch row, for ``_pwf_batches``) is no text."""

    def apply(connection: sqlite3.Connection, first: int) -> None:
        seq = first + at - 1
        key = seq if table == "_pwf_events" else _in_parts(connection, seq)
        connection.execute(
            f"UPDATE {table} SET {column} = CAST(X'72FF' AS TEXT) WHERE seq = ?",  # noqa: S608 - the test's own names
            (key,),
        )

    return apply


def _batch_row_at(connection: sqlite3.Connection, first: int) -> None:
    """The batch row of events 2-4 says another ``at`` than their bytes."""
    connection.execute(
        "UPDATE _pwf_batches SET at = at + 1 WHERE seq = ?", (_in_parts(connection, first + 1),)
    )


STORED: Final = (
    Fault(
        "_pwf_events.data first byte of event 3",
        BODY,
        3,
        _flip_part("_pwf_events.data", 3, "first"),
    ),
    Fault(
        "_pwf_events.data last byte of event 3", BODY, 3, _flip_part("_pwf_events.data", 3, "last")
    ),
    Fault(
        "_pwf_batches.head byte of events 2-4",
        BODY,
        2,
        _flip_part("_pwf_batches.head", 3, "middle"),
    ),
    Fault(
        "_pwf_events.content_hash byte of event 3",
        BODY,
        3,
        _flip_part("_pwf_events.content_hash", 3, "middle"),
    ),
    Fault("_pwf_events.link byte of event 3", BODY, 3, _flip_part("_pwf_events.link", 3, "middle")),
    Fault("event 3 names another batch row", BODY, 3, _other_batch_row),
    Fault("the batch row of events 5-6 deleted", BODY, 5, _batch_row_deleted),
    Fault("_pwf_batches.at of events 2-4", COLUMN, 2, _batch_row_at),
    Fault(
        "_pwf_events.type of event 3, a lone surrogate", BODY, 3, _type_bytes(b"run.\xed\xa0\x80")
    ),
    Fault("_pwf_events.type of event 3, not UTF-8", BODY, 3, _type_bytes(b"run.\xff")),
    Fault(
        "_pwf_events.run_id of event 3, not UTF-8", COLUMN, 3, _not_text("_pwf_events", "run_id", 3)
    ),
    Fault(
        "_pwf_batches.client_id of events 2-4, not UTF-8",
        COLUMN,
        2,
        _not_text("_pwf_batches", "client_id", 3),
    ),
)
"""Faults in format v2's own tables (ADR 0102), made without the editable view.

A part of an event's bytes (its ``data``, its batch's members, its hash,
its ``link``, its type, here as bytes that are no type's UTF-8) changes
the bytes the view gives back, so every walker sees it; the batch row's
``at`` is an indexed column only.
"""

STRUCTURAL: Final = (
    Fault("first event deleted", BODY, 1, _delete(1)),
    Fault("middle event deleted", BODY, 4, _delete(4)),
    Fault("last event deleted", HEAD, 7, _delete(7)),
    Fault("events 3 and 4 swapped", BODY, 3, _swap),
    Fault("a batch that skips one", BODY, 5, _rebatch(5, +1)),
    Fault("a batch that goes back", BODY, 6, _rebatch(6, -1)),
    Fault("a forged tail", HEAD, 7, _forge_tail),
    Fault("a forged log.compacted", BODY, 4, _forge_compacted),
)
GROUPS: Final[dict[str, tuple[Fault, ...]]] = {
    **{
        f"body bytes {start}-{start + FLIPS - 1}": tuple(_flips(BODY, BODY, start, start + FLIPS))
        for start in range(0, BODY_LENGTH, FLIPS)
    },
    "content_hash chars": tuple(_flips(CONTENT, CONTENT, 0, 64)),
    "prev_hash chars": tuple(_flips(PREV, PREV, 0, 64)),
    **{fault.name: (fault,) for fault in STRUCTURAL},
    **{fault.name: (fault,) for fault in STORED},
}
"""The corpus in test cases: the flips of a column in runs, every other fault on its own."""
CLASS_SAMPLES: Final = frozenset(
    {"body byte 0 of event 3", "content_hash char 0 of event 3", "prev_hash char 0 of event 3"}
    | {fault.name for fault in STRUCTURAL + STORED}
)
"""One fault of each class, which the forked split walks meet too."""


# --------------------------------------------------------------------------- the test


class Log(NamedTuple):
    path: Path
    first: int
    body_length: int
    """The length of the third event's body: flips beyond it do not exist."""


@pytest.fixture(scope="module")
def memory_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the logs are damaged: the memory file system if there is one, else the test's."""
    shared = Path("/dev/shm")  # noqa: S108 - a private directory is made inside
    if shared.is_dir() and os.access(shared, os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="pwf-fault-corpus-", dir=shared))
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("corpus")


@pytest.fixture(scope="module", params=["plain", "compacted"])
def template(request: pytest.FixtureRequest, memory_root: Path, fill: Any) -> Iterator[Log]:
    # A directory of its own: a worker that comes back to this module makes the log again.
    directory = Path(tempfile.mkdtemp(prefix=f"{request.param}-", dir=memory_root))
    path = directory / "template.db"
    compacted = request.param == "compacted"
    _make_log(path, compacted=compacted, fill=fill)
    with SqliteStore(directory / "empty.db", create=True) as empty:
        empty.checkpoint()
    first = COMPACTED_AT + 1 if compacted else 1
    connection = sqlite3.connect(path)
    try:
        length = connection.execute(
            "SELECT length(body) FROM events WHERE seq = ?", (first + 2,)
        ).fetchone()[0]
    finally:
        connection.close()
    assert length <= BODY_LENGTH
    backup = directory / "backup.sqlite"
    kept = backup.read_bytes() if compacted else None
    yield Log(path, first, length)
    if kept is not None:
        assert backup.read_bytes() == kept, (
            "a case changed the backup its proof's report was kept for"
        )


def _damaged(template: Log, fault: Fault, name: str) -> Damaged:
    work = template.path.parent / "cases" / name
    work.mkdir(parents=True)
    path = work / "pwf.db"
    shutil.copyfile(template.path, path)
    connection = editable(sqlite3.connect(path))
    connection.text_factory = _text_or_bytes  # a cell no text decodes to stays its bytes
    try:
        fault.apply(connection, template.first)
        connection.commit()
        rows = connection.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq").fetchall()  # noqa: S608 - constant
        assert_rows_as_viewed(connection)
        row = connection.execute("SELECT seq, content_hash, batch FROM _pwf_head").fetchone()
    finally:
        connection.close()
    (work / "walk").mkdir()
    directory = template.path.parent
    return Damaged(
        path,
        rows,
        Head(*row),
        work / "walk",
        directory / "backup.sqlite",
        directory / "empty.db",
    )


def _walk_all(
    template: Log, fault: Fault, walkers: dict[str, tuple[Walker, frozenset[str]]]
) -> None:
    """Every walker on one damaged copy: the first bad seq where it reads the change, else none."""
    log = _damaged(template, fault, fault.name.replace(" ", "-"))
    try:
        expected = template.first + fault.bad - 1 if fault.bad else None
        for name, (walker, sees) in walkers.items():
            if name == "backup proof" and template.first == 1:
                continue
            for leftover in log.work.iterdir():
                leftover.unlink()
            found = _first_bad(walker, log)
            assert found == (expected if fault.touches in sees else None), (fault.name, name)
    finally:
        shutil.rmtree(log.work.parent, ignore_errors=True)


def test_the_template_logs_are_sound(template: Log) -> None:
    """Undamaged, no walker finds anything, the forked ones included."""
    _walk_all(template, Fault("none", BODY, 0, lambda _c, _f: None), {**WALKERS, **FORKED})


def _turn(
    walkers: dict[str, tuple[Walker, frozenset[str]]], fault: Fault
) -> dict[str, tuple[Walker, frozenset[str]]]:
    """The walkers a fault meets: a flip, outside the class samples, only one of :data:`FOLDING`."""
    words = fault.name.split()
    if DEEP or fault.name in CLASS_SAMPLES or words[1] not in {"byte", "char"}:
        return walkers
    keep = FOLDING[int(words[2]) % len(FOLDING)]
    return {name: each for name, each in walkers.items() if name not in FOLDING or name == keep}


@pytest.mark.parametrize("group", list(GROUPS))
def test_every_walker_names_the_same_first_bad_seq(template: Log, group: str) -> None:
    """Each walker that reads what the fault changed names its first bad seq; the others none.

    A flip beyond the third event's body does not exist on this log.
    """
    for fault in GROUPS[group]:
        if (
            fault.name.startswith("body byte")
            and int(fault.name.split()[2]) >= template.body_length
        ):
            break
        walkers = {**WALKERS, **FORKED} if fault.name in CLASS_SAMPLES else WALKERS
        _walk_all(template, fault, _turn(walkers, fault))
