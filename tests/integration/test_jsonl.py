"""JSONL export and import: byte-for-byte round trips, and whole-file refusal of any fault."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pwf.errors import ImportRefusedError
from pwf.events import Entry, Sealed
from pwf.projections import Sql
from pwf.readmodel import ReadModel
from pwf.store import Head
from pwf.store.jsonl import export_jsonl, import_jsonl
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests._dbfile import rows
else:
    from _dbfile import rows

AppendBatches = Callable[..., list[list[Sealed]]]
Reseal = Callable[[dict[str, Any]], bytes]

SIZES = (1, 3, 2, 1)
EVENTS = sum(SIZES)
LIMIT = 8 * 1_048_576


def _export(store: SqliteStore, first: int = 1, last: int | None = None) -> bytes:
    out = io.BytesIO()
    export_jsonl(store, out, first, last)
    return out.getvalue()


def _rows(store: SqliteStore) -> list[tuple[object, ...]]:
    return rows(store.path, "SELECT * FROM events ORDER BY seq")


def _file(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


@pytest.fixture
def log(store: SqliteStore, fill: AppendBatches) -> SqliteStore:
    """A store holding seven events in four batches."""
    fill(store, SIZES)
    return store


@pytest.fixture
def lines(log: SqliteStore) -> list[bytes]:
    """The exported log, one stored body per item, without newlines."""
    return _export(log).splitlines()


@pytest.fixture
def target(tmp_path: Path) -> Iterator[SqliteStore]:
    """A new, empty database to import into."""
    with SqliteStore(tmp_path / "copy" / "pwf.db", create=True) as opened:
        yield opened


class TestExport:
    """Export writes the stored bytes and a newline, nothing else."""

    def test_export_is_the_stored_bytes(self, log: SqliteStore) -> None:
        """Each line is one stored body, in seq order, each ending in a newline."""
        expected = b"".join(stored.body + b"\n" for stored in log.read())
        assert expected == _export(log)

    def test_export_counts_what_it_wrote(self, log: SqliteStore) -> None:
        """``export_jsonl`` returns how many events it wrote."""
        assert EVENTS == export_jsonl(log, io.BytesIO())

    def test_export_of_a_range(self, log: SqliteStore) -> None:
        """``first`` and ``last`` bound the exported seqs."""
        assert [json.loads(line)["seq"] for line in _export(log, 2, 4).splitlines()] == [2, 3, 4]

    def test_two_exports_are_identical(self, log: SqliteStore) -> None:
        """Exporting twice gives identical files."""
        assert _export(log) == _export(log)

    def test_export_of_an_empty_log_is_empty(self, store: SqliteStore) -> None:
        """Nothing to export writes nothing."""
        assert b"" == _export(store)


class TestRoundTrip:
    """Export, then import into a new database, gives the same log byte for byte."""

    def test_round_trip_is_byte_for_byte(self, log: SqliteStore, target: SqliteStore) -> None:
        """The imported log exports the same file and holds the same rows and head."""
        exported = _export(log)
        head = import_jsonl(target, io.BytesIO(exported))
        assert log.head() == head
        assert log.head() == target.head()
        assert exported == _export(target)
        assert _rows(log) == _rows(target)
        assert target.verify().ok

    def test_round_trip_through_a_file(
        self, log: SqliteStore, target: SqliteStore, tmp_path: Path
    ) -> None:
        """Export to a file on disk and import from it."""
        path = tmp_path / "log.jsonl"
        with path.open("wb") as out:
            export_jsonl(log, out)
        with path.open("rb") as source:
            import_jsonl(target, source)
        assert path.read_bytes() == _export(target)

    def test_import_runs_the_append_hooks(self, log: SqliteStore, target: SqliteStore) -> None:
        """Imported events are projected and checkpointed like appended ones."""

        class Seqs:
            NAME: str = "test_seqs"
            VERSION: int = 1
            DDL: tuple[str, ...] = (
                "CREATE TABLE IF NOT EXISTS test_seqs (seq INTEGER PRIMARY KEY) STRICT",
            )

            def apply(self, entry: Entry) -> list[Sql]:
                return [Sql("INSERT INTO test_seqs (seq) VALUES (?)", (entry.seq,))]

        read_model = ReadModel([Seqs()])
        target.install(read_model.install)
        target.hooks.append(read_model)
        import_jsonl(target, io.BytesIO(_export(log)))
        assert [(EVENTS,)] == rows(
            target.path, "SELECT last_seq FROM _pwf_checkpoint WHERE projection = 'test_seqs'"
        )
        assert [(EVENTS,)] == rows(target.path, "SELECT count(*) FROM test_seqs")


def _swap(lines: list[bytes], first: int, second: int) -> list[bytes]:
    swapped = list(lines)
    swapped[first - 1], swapped[second - 1] = lines[second - 1], lines[first - 1]
    return swapped


def _reordered(line: bytes) -> bytes:
    """The same members, compact, but in reverse order."""
    document = json.loads(line)
    return json.dumps(
        dict(reversed(document.items())), separators=(",", ":"), ensure_ascii=False
    ).encode()


def _resealed(
    forge: Reseal, lines: list[bytes], line_no: int, change: Callable[[dict[str, Any]], None]
) -> list[bytes]:
    """The lines with one event edited and re-sealed, so only the edit itself is wrong."""
    document = json.loads(lines[line_no - 1])
    change(document)
    edited = list(lines)
    edited[line_no - 1] = forge(document)
    return edited


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    """A change that sets one (dotted) member of an event document."""

    def change(document: dict[str, Any]) -> None:
        *parents, name = path.split(".")
        for parent in parents:
            document = document[parent]
        document[name] = value

    return change


Case = Callable[[list[bytes], Reseal], tuple[bytes, int, str]]

CASES: dict[str, Case] = {
    "whitespace": lambda lines, _: (
        _file([*lines[:2], lines[2].replace(b'":', b'": ', 1), *lines[3:]]),
        3,
        "not canonical",
    ),
    "key order": lambda lines, _: (
        _file([*lines[:1], _reordered(lines[1]), *lines[2:]]),
        2,
        "not canonical",
    ),
    "duplicate key": lambda lines, _: (
        _file([*lines[:1], lines[1].replace(b'"seq":2', b'"seq":2,"seq":2'), *lines[2:]]),
        2,
        "not canonical",
    ),
    "tampered body": lambda lines, _: (
        _file(
            [*lines[:3], lines[3].replace(b'"status":"running"', b'"status":"stopped"'), *lines[4:]]
        ),
        4,
        "content hash",
    ),
    "gap in seq": lambda lines, _: (_file(lines[:2] + lines[3:]), 3, "expected seq 3, found 4"),
    "starts after seq 1": lambda lines, _: (_file(lines[1:]), 1, "expected seq 1, found 2"),
    "wrong prevHash": lambda lines, forge: (
        _file(_resealed(forge, lines, 5, _set("prevHash", "0" * 64))),
        5,
        "prevHash",
    ),
    "first event has a prevHash": lambda lines, forge: (
        _file(_resealed(forge, lines, 1, _set("prevHash", "0" * 64))),
        1,
        "prevHash",
    ),
    "batch skips ahead": lambda lines, forge: (
        _file(_resealed(forge, lines, 5, _set("batch", 9))),
        5,
        "batch 9",
    ),
    "batch goes back": lambda lines, forge: (
        _file(_resealed(forge, lines, 5, _set("batch", 1))),
        5,
        "batch 1",
    ),
    "reordered pair": lambda lines, _: (_file(_swap(lines, 2, 3)), 2, "expected seq 2"),
    "reordered far apart": lambda lines, _: (_file(_swap(lines, 3, 6)), 3, "expected seq 3"),
    "duplicated line": lambda lines, _: (
        _file([*lines[:3], lines[2], *lines[3:]]),
        4,
        "expected seq 4, found 3",
    ),
    "missing final newline": lambda lines, _: (_file(lines)[:-1], EVENTS, "no newline"),
    "empty line": lambda lines, _: (_file([*lines[:3], b"", *lines[3:]]), 4, "not JSON"),
    "blank line at the end": lambda lines, _: (_file([*lines, b""]), EVENTS + 1, "not JSON"),
    "crlf": lambda lines, _: (_file([line + b"\r" for line in lines]), 1, "not canonical"),
    "byte order mark": lambda lines, _: (
        _file([b"\xef\xbb\xbf" + lines[0], *lines[1:]]),
        1,
        "byte order mark",
    ),
    "invalid utf-8": lambda lines, _: (
        _file([lines[0], lines[1].replace(b"running", b"runn\xffng"), *lines[2:]]),
        2,
        "UTF-8",
    ),
    "line over the limit": lambda lines, _: (
        _file([lines[0], b'{"pad":"' + b"x" * LIMIT + b'"}', *lines[1:]]),
        2,
        "too long",
    ),
    "not JSON": lambda lines, _: (_file([lines[0], b"{seq: 2}", *lines[1:]]), 2, "not JSON"),
    "a JSON array": lambda lines, _: (_file([b"[1,2,3]", *lines]), 1, "envelope"),
    "an empty object": lambda lines, _: (_file([*lines, b"{}"]), EVENTS + 1, "envelope"),
    "unknown envelope field": lambda lines, forge: (
        _file(_resealed(forge, lines, 2, _set("origin", "elsewhere"))),
        2,
        "origin",
    ),
    "unknown data field": lambda lines, forge: (
        _file(_resealed(forge, lines, 3, _set("data.surprise", value=True))),
        3,
        "surprise",
    ),
    "unknown type": lambda lines, forge: (
        _file(_resealed(forge, lines, 6, _set("type", "command.vanished"))),
        6,
        "unknown event type: command.vanished",
    ),
    "seq as text": lambda lines, forge: (
        _file(_resealed(forge, lines, 2, _set("seq", "2"))),
        2,
        "envelope",
    ),
    "revision as text": lambda lines, forge: (
        _file(_resealed(forge, lines, 4, _set("data.revision", "four"))),
        4,
        "revision",
    ),
    "unknown actor type": lambda lines, forge: (
        _file(_resealed(forge, lines, 7, _set("actor.type", "robot"))),
        7,
        "envelope",
    ),
    "unknown outcome": lambda lines, forge: (
        _file(_resealed(forge, lines, 1, _set("data.outcome", "maybe"))),
        1,
        "outcome",
    ),
    "wrong schema": lambda lines, forge: (
        _file(_resealed(forge, lines, 1, _set("schema", "pwf.event.v0"))),
        1,
        "envelope",
    ),
}


class TestImportRefuses:
    """Any fault refuses the whole file, names its line, and writes nothing."""

    @pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
    def test_fault_refuses_the_whole_file(
        self, lines: list[bytes], forge: Reseal, target: SqliteStore, case: str
    ) -> None:
        """The import raises ImportRefusedError at the faulty line; the target stays empty."""
        data, line_no, says = CASES[case](lines, forge)
        with pytest.raises(ImportRefusedError) as caught:
            import_jsonl(target, io.BytesIO(data))
        error = caught.value
        assert line_no == error.line_no
        assert str(error).startswith(f"line {line_no}: ")
        assert says in error.reason
        assert "\n" not in str(error)
        assert 2 == error.exit_code
        assert Head(seq=0, content_hash=None, batch=0) == target.head()
        assert [] == _rows(target)
        assert [] == rows(target.path, "SELECT * FROM _pwf_head")

    def test_the_unchanged_lines_import(self, lines: list[bytes], target: SqliteStore) -> None:
        """The fixture's own export imports cleanly (the faults above are the only difference)."""
        assert EVENTS == import_jsonl(target, io.BytesIO(_file(lines))).seq

    def test_non_empty_target_is_refused(
        self, log: SqliteStore, target: SqliteStore, fill: AppendBatches
    ) -> None:
        """Importing into a database that holds events is refused before any line is read."""
        fill(target, [2])
        before = (target.head(), _rows(target))
        with pytest.raises(ImportRefusedError, match="already holds 2 events") as caught:
            import_jsonl(target, io.BytesIO(_export(log)))
        assert 0 == caught.value.line_no
        assert before == (target.head(), _rows(target))

    def test_empty_file_is_refused(self, target: SqliteStore) -> None:
        """A file without events imports nothing and says so."""
        with pytest.raises(ImportRefusedError, match="no events") as caught:
            import_jsonl(target, io.BytesIO(b""))
        assert 0 == caught.value.line_no
        assert Head(0, None, 0) == target.head()

    def test_nothing_is_visible_while_importing(
        self, lines: list[bytes], target: SqliteStore
    ) -> None:
        """Rows checked so far stay invisible to other connections until the import commits."""
        seen: list[int] = []

        class Watching(io.BytesIO):
            def readline(self, size: int | None = -1, /) -> bytes:
                other = sqlite3.connect(target.path)
                try:
                    seen.append(other.execute("SELECT count(*) FROM events").fetchone()[0])
                finally:
                    other.close()
                return super().readline(size)

        with pytest.raises(ImportRefusedError):
            import_jsonl(target, Watching(_file(lines)[:-1]))
        assert [0] * EVENTS == seen
        assert [] == _rows(target)
