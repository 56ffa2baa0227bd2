"""Comparing read models: rows paired by key, digests of a canonical dump, where two logs part.

A live database is built through the command path (fixture F plus one
submission); its twins are a JSONL re-import of its log and a fold of its log
into fresh tables.  Corruptions are made by hand with plain SQL, outside pwf.
"""

from __future__ import annotations

import hashlib
import io
import re
import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf import canonical
from pwf._sqlite import transaction
from pwf.cli._options import open_store
from pwf.diff import (
    Difference,
    LogDiff,
    diff_databases,
    diff_logs,
    digest_database,
    open_read_only,
)
from pwf.errors import InputError
from pwf.fold.bulk import rebuild_into
from pwf.store.jsonl import export_jsonl, import_jsonl

if TYPE_CHECKING:
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import RUN, Fixture, edit
else:
    from _harness import RUN, Fixture, edit

if TYPE_CHECKING:
    from tests._dbfile import opened
else:
    from _dbfile import opened


def _copy_log(source: Path, target: Path, last: int | None = None) -> Path:
    """Export the log of ``source`` (up to ``last``) and import it into a new database."""
    out = io.BytesIO()
    with open_store(str(source), read_only=True) as store:
        export_jsonl(store, out, 1, last)
    with open_store(str(target), create=True) as store:
        import_jsonl(store, io.BytesIO(out.getvalue()))
    return target


@pytest.fixture
def live(tmp_path: Path) -> Path:
    """Fixture F (``run-1`` waiting on an interaction) plus one submission, closed."""
    fixture = Fixture.f(tmp_path / "live.db")
    fixture.submit({"answer": "hi"})
    fixture.close()
    return tmp_path / "live.db"


@pytest.fixture
def copy(live: Path, tmp_path: Path) -> Path:
    """A second database made by re-importing the live log (which re-projects it)."""
    return _copy_log(live, tmp_path / "copy.db")


@pytest.fixture
def rebuilt(live: Path, tmp_path: Path) -> Path:
    """A third database whose projections are a fold of the live log into fresh tables."""
    path = tmp_path / "rebuilt.db"
    open_store(str(path), create=True).close()
    with (
        open_store(str(live), read_only=True) as source,
        opened(path) as connection,
        transaction(connection, "BEGIN IMMEDIATE"),
    ):
        rebuild_into(connection, source.entries())
    return path


class TestDiffDatabases:
    """``diff_databases`` pairs rows by primary key and names every difference."""

    def test_live_equals_a_reimport_of_its_log(self, live: Path, copy: Path) -> None:
        """A database and an independent re-projection of its log are equal."""
        report = diff_databases(live, copy)
        assert ({}, True) == (report.tables, report.equal)
        assert "runs" in report.compared

    def test_live_equals_a_rebuild_into_fresh_tables(self, live: Path, rebuilt: Path) -> None:
        """Folding the log into fresh tables gives what the live path wrote."""
        assert diff_databases(live, rebuilt).equal

    def test_two_rebuilds_are_equal(self, copy: Path, rebuilt: Path) -> None:
        """Two independent rebuilds of the same log are equal."""
        assert diff_databases(copy, rebuilt).equal

    def test_a_changed_cell_is_named_exactly(self, live: Path, copy: Path) -> None:
        """Table, key, column and both values of one hand-corrupted cell."""
        edit(copy, "UPDATE runs SET status = 'failed' WHERE run_id = 'run-1'")
        report = diff_databases(live, copy)
        expected = {"runs": [Difference("changed", (RUN,), "status", "waiting", "failed")]}
        # failed beside a parked queue entry: the runs' kept totals count it (ADR 0094)
        expected["runs_totals"] = [Difference("changed", (1,), "contradictions", 0, 1)]
        assert (expected, 2) == (report.tables, report.count)

    def test_every_changed_column_of_a_row_is_named(self, live: Path, copy: Path) -> None:
        """Two cells of one row are two differences, in the table's column order."""
        connection = sqlite3.connect(live)
        [revision] = connection.execute("SELECT revision FROM runs").fetchone()
        connection.close()
        edit(copy, "UPDATE runs SET revision = 99, status = 'failed' WHERE run_id = 'run-1'")
        expected = [
            Difference("changed", (RUN,), "status", "waiting", "failed"),
            Difference("changed", (RUN,), "revision", revision, 99),
        ]
        assert expected == diff_databases(live, copy).tables["runs"]

    def test_a_deleted_row_is_only_in_a(self, live: Path, copy: Path) -> None:
        """A row missing from B is reported by its key, only in A."""
        connection = sqlite3.connect(live)
        [revision] = connection.execute("SELECT revision FROM runs").fetchone()
        connection.close()
        edit(copy, "DELETE FROM runs WHERE run_id = 'run-1'")
        totals = [  # the runs' kept totals lose the run (ADR 0094)
            Difference("changed", (1,), "listed", 1, 0),
            Difference("changed", (1,), "revisions", revision, 0),
        ]
        expected = {"runs": [Difference("onlyInA", (RUN,))], "runs_totals": totals}
        assert expected == diff_databases(live, copy).tables

    def test_an_added_row_is_only_in_b(self, live: Path, copy: Path) -> None:
        """A row only B has is reported by its key, only in B."""
        edit(
            copy,
            "INSERT INTO run_bindings (run_id, origin_session_id, execution_mode, created_at)"
            " VALUES ('run-9', 's-9', 'interactive', 1)",
        )
        found = diff_databases(live, copy).tables
        assert {"run_bindings": [Difference("onlyInB", ("run-9",))]} == found

    def test_blobs_are_shown_as_lower_case_hex(self, live: Path, copy: Path) -> None:
        """BLOB values (and BLOB keys) are reported as lower-case hex text."""
        edit(copy, "UPDATE runs SET input_hash = zeroblob(32) WHERE run_id = 'run-1'")
        [item] = diff_databases(live, copy).tables["runs"]
        connection = sqlite3.connect(live)
        [before] = connection.execute("SELECT input_hash FROM runs").fetchone()
        connection.close()
        assert ("input_hash", before.hex(), "00" * 32) == (item.column, item.a, item.b)

    def test_composite_keys_pair_every_key_column(self, live: Path, copy: Path) -> None:
        """A table keyed by two columns reports both key values, in key order."""
        connection = sqlite3.connect(live)
        epoch, message = connection.execute(
            "SELECT worker_epoch, message_id FROM worker_messages ORDER BY 1, 2 LIMIT 1"
        ).fetchone()
        connection.close()
        edit(
            copy,
            "DELETE FROM worker_messages WHERE (worker_epoch, message_id) ="
            " (SELECT worker_epoch, message_id FROM worker_messages ORDER BY 1, 2 LIMIT 1)",
        )
        expected = {"worker_messages": [Difference("onlyInA", (epoch, message))]}
        assert expected == diff_databases(live, copy).tables

    def test_tables_restrict_the_comparison(self, live: Path, copy: Path) -> None:
        """Only the named tables are compared."""
        edit(copy, "UPDATE runs SET status = 'failed' WHERE run_id = 'run-1'")
        report = diff_databases(live, copy, ["blobs", "run_bindings"])
        assert (("blobs", "run_bindings"), True) == (report.compared, report.equal)
        assert not diff_databases(live, copy, ["runs"]).equal

    def test_an_unknown_table_is_bad_input(self, live: Path, copy: Path) -> None:
        """A table that is not a projection table is refused, by name."""
        with pytest.raises(InputError, match=r"^no projection table events \(tables: blobs, "):
            diff_databases(live, copy, ["events"])

    def test_a_file_is_equal_to_itself(self, live: Path) -> None:
        """Comparing a database with itself finds nothing."""
        assert diff_databases(live, live).equal


class TestKeyOrder:
    """Rows pair in SQLite's own key order, whatever the storage classes."""

    def test_mixed_storage_classes_in_a_key(self, live: Path, copy: Path) -> None:
        """NULL, numbers, text and BLOBs in one key column merge in SQLite's order."""
        create = "CREATE TABLE mixed (k PRIMARY KEY, v)"
        rows = "INSERT INTO mixed VALUES (NULL, 1), (1.5, 1), (2, 1), ('a', 1), (x'00', 1)"
        edit(live, create, rows)
        edit(copy, create, rows, "DELETE FROM mixed WHERE k = 'a'", "UPDATE mixed SET v = 2")
        found = diff_databases(live, copy).tables["mixed"]
        expected = [
            Difference("changed", (None,), "v", 1, 2),
            Difference("changed", (1.5,), "v", 1, 2),
            Difference("changed", (2,), "v", 1, 2),
            Difference("onlyInA", ("a",)),
            Difference("changed", ("00",), "v", 1, 2),
        ]
        assert expected == found

    def test_a_table_without_a_key_pairs_whole_rows(self, live: Path, copy: Path) -> None:
        """Without a primary key every column is the key; duplicates pair one by one."""
        create = "CREATE TABLE loose (a, b)"
        edit(live, create, "INSERT INTO loose VALUES (1, 'x'), (1, 'x'), (2, NULL)")
        edit(copy, create, "INSERT INTO loose VALUES (1, 'x'), (2, NULL), (3, 'z')")
        found = diff_databases(live, copy).tables["loose"]
        assert [Difference("onlyInA", (1, "x")), Difference("onlyInB", (3, "z"))] == found


class TestSchemaMismatch:
    """Databases whose shape differs are refused (exit 2) with one line naming the difference."""

    def test_projection_versions_differ(self, live: Path, copy: Path) -> None:
        """A checkpoint at another projection version is named with both versions."""
        edit(copy, "UPDATE _pwf_checkpoint SET version = 2 WHERE projection = 'blobs'")
        with pytest.raises(
            InputError, match=r"^A has projection blobs at version 1, B at version 2$"
        ):
            diff_databases(live, copy)

    def test_a_projection_only_one_side_has(self, live: Path, copy: Path) -> None:
        """A projection with no checkpoint on one side is named."""
        edit(copy, "DELETE FROM _pwf_checkpoint WHERE projection = 'blobs'")
        with pytest.raises(InputError, match=r"^A has projection blobs at version 1, B has none$"):
            diff_databases(live, copy)
        with pytest.raises(InputError, match=r"^A has no projection blobs, B has it at version 1$"):
            diff_databases(copy, live)

    def test_a_table_only_one_side_has(self, live: Path, copy: Path) -> None:
        """An extra or missing table is named with its side."""
        edit(copy, "CREATE TABLE extra (x TEXT PRIMARY KEY)")
        with pytest.raises(InputError, match=r"^table extra is only in B$"):
            diff_databases(live, copy)

    def test_columns_differ(self, live: Path, copy: Path) -> None:
        """Another column list is named with both lists."""
        edit(copy, "ALTER TABLE run_bindings ADD COLUMN note TEXT")
        expected = (
            r"^table run_bindings has columns \(run_id, origin_session_id, execution_mode,"
            r" created_at\) in A, \(run_id, origin_session_id, execution_mode, created_at, note\)"
            r" in B$"
        )
        with pytest.raises(InputError, match=expected):
            diff_databases(live, copy)

    def test_keys_differ(self, live: Path, copy: Path) -> None:
        """The same columns under another primary key are named with both keys."""
        edit(live, "CREATE TABLE pair (a TEXT, b TEXT, PRIMARY KEY (a, b))")
        edit(copy, "CREATE TABLE pair (a TEXT, b TEXT, PRIMARY KEY (b, a))")
        with pytest.raises(
            InputError, match=r"^table pair is keyed by \(a, b\) in A, \(b, a\) in B$"
        ):
            diff_databases(live, copy)


class TestOpening:
    """Both sides are opened read-only, and only pwf databases are accepted."""

    def test_a_missing_file_is_bad_input(self, live: Path, tmp_path: Path) -> None:
        """A path that does not exist is named."""
        missing = tmp_path / "nope.db"
        with pytest.raises(InputError, match=f"^no such database: {re.escape(str(missing))}$"):
            diff_databases(live, missing)
        assert not missing.exists()

    def test_a_plain_sqlite_file_is_not_a_pwf_database(self, live: Path, tmp_path: Path) -> None:
        """A SQLite file without pwf's format row is refused."""
        other = tmp_path / "other.db"
        edit(other, "CREATE TABLE t (x)")
        with pytest.raises(InputError, match=f"^not a pwf database: {re.escape(str(other))} "):
            diff_databases(other, live)

    def test_a_text_file_is_not_a_pwf_database(self, tmp_path: Path) -> None:
        """A file that is not SQLite at all is refused the same way."""
        text = tmp_path / "notes.txt"
        text.write_text("hello, this is not a database\n" * 10, encoding="utf-8")
        with pytest.raises(InputError, match=r"^not a pwf database: "):
            digest_database(text)

    def test_files_are_opened_read_only(self, live: Path) -> None:
        """The connection refuses writes."""
        connection = open_read_only(live)
        try:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                connection.execute("DELETE FROM runs")
        finally:
            connection.close()


class TestDigest:
    """``digest_database`` hashes each table's canonical dump, and all of them."""

    def test_live_and_rebuilds_digest_alike(self, live: Path, copy: Path, rebuilt: Path) -> None:
        """A live database and two rebuilds of its log have the same digests."""
        digests = [digest_database(path) for path in (live, copy, rebuilt)]
        assert digests[0] == digests[1] == digests[2]
        assert digests[0].all == digests[2].all

    def test_a_corrupted_cell_changes_its_table_and_all(self, live: Path, copy: Path) -> None:
        """Only the corrupted table's digest moves, and with it ``all``."""
        edit(copy, "UPDATE runs SET status = 'failed' WHERE run_id = 'run-1'")
        before, after = digest_database(live), digest_database(copy)
        moved = {name for name in before.tables if before.tables[name] != after.tables[name]}
        # with the runs' kept totals, which count the contradiction it makes (ADR 0094)
        assert ({"runs", "runs_totals"}, True) == (moved, before.all != after.all)

    def test_the_dump_is_canonical_rows_in_key_order(self, live: Path) -> None:
        """A table's digest is SHA-256 over canonical JSON arrays, one per line, in key order."""
        connection = sqlite3.connect(live)
        rows = connection.execute("SELECT * FROM blobs ORDER BY blob_hash").fetchall()
        connection.close()
        dump = b"".join(
            canonical.encode([v.hex() if isinstance(v, bytes) else v for v in row]) + b"\n"
            for row in rows
        )
        found = digest_database(live)
        assert hashlib.sha256(dump).hexdigest() == found.tables["blobs"]
        assert hashlib.sha256(b"").hexdigest() == found.tables["run_updates"]

    def test_all_covers_one_line_per_table(self, live: Path) -> None:
        """``all`` is SHA-256 over ``TABLE HEX`` lines in table-name order."""
        found = digest_database(live)
        lines = "".join(f"{name} {found.tables[name]}\n" for name in sorted(found.tables))
        assert hashlib.sha256(lines.encode()).hexdigest() == found.all
        assert list(found.tables) == sorted(found.tables)
        assert "events" not in found.tables
        assert not any(name.startswith("_pwf_") for name in found.tables)


class TestDiffLogs:
    """``diff_logs`` walks two logs seq by seq over their stored bytes."""

    def test_a_reimported_log_is_identical(self, live: Path, copy: Path) -> None:
        """Every event, byte for byte."""
        with open_store(str(live), read_only=True) as store:
            events = store.head().seq
        found = diff_logs(live, copy)
        assert (LogDiff(events), True) == (found, found.identical)

    def test_a_tampered_body_is_the_first_divergence(self, live: Path, copy: Path) -> None:
        """The first seq whose bytes differ is named; the events before it are common."""
        edit(copy, "UPDATE events SET body = CAST(body || ' ' AS BLOB) WHERE seq IN (5, 9)")
        assert LogDiff(4, 5) == diff_logs(live, copy)

    def test_a_prefix_names_the_shorter_side(self, live: Path, tmp_path: Path) -> None:
        """When one log is a prefix of the other, the side that ends first is named."""
        short = _copy_log(live, tmp_path / "short.db", last=7)
        assert LogDiff(7, 8, "B", 7) == diff_logs(live, short)
        assert LogDiff(7, 8, "A", 7) == diff_logs(short, live)

    def test_an_empty_log_ends_at_zero(self, live: Path, tmp_path: Path) -> None:
        """An empty log is a prefix of every log."""
        empty = tmp_path / "empty.db"
        open_store(str(empty), create=True).close()
        assert LogDiff(0, 1, "A", 0) == diff_logs(empty, live)
        assert LogDiff(0) == diff_logs(empty, empty)

    def test_a_gap_diverges_at_the_missing_seq(self, live: Path, copy: Path) -> None:
        """A deleted event makes its seq the first divergence."""
        edit(copy, "DELETE FROM events WHERE seq = 3")
        assert LogDiff(2, 3) == diff_logs(live, copy)
