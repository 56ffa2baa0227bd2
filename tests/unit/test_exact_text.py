"""Text bound and read by its code units, lone surrogates included (ADR 0071)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pwf._sqlite import exact_statement, exact_text, execute, execute_many
from pwf.store.rows import shared_text

UNITS = st.sampled_from("ad80f\\\ufffd\ufffe\ud800\udbff\udc00\udfff\u00e9") | st.characters(
    blacklist_categories=()
)
"""Code units near the escape: lone surrogates of both halves, U+FFFD, hex digits, any other."""


@pytest.fixture
def connection() -> sqlite3.Connection:
    """A STRICT table with a text key, as pwf's tables are."""
    opened = exact_text(sqlite3.connect(":memory:"))
    opened.execute("CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL) STRICT")
    return opened


def test_text_without_a_lone_surrogate_is_bound_as_it_was() -> None:
    assert ("SELECT ?", ("a\ufffd", 1, None, b"\xed")) == exact_statement(
        "SELECT ?", ["a\ufffd", 1, None, b"\xed"]
    )


def test_each_parameter_holding_a_lone_surrogate_is_cast_from_its_wtf8() -> None:
    sql = "SELECT '?', \"?\" FROM t WHERE a = ?1 OR (b = ?2 AND c = ?3) -- ?\n AND d = ?1"
    cast = (
        "SELECT '?', \"?\" FROM t WHERE a = CAST(?1 AS TEXT) OR (b = ?2 AND c = CAST(?3 AS TEXT))"
        " -- ?\n AND d = CAST(?1 AS TEXT)"
    )
    assert (cast, (b"r-\xed\xa0\x80", "x", b"k\xed\xb0\x80")) == exact_statement(
        sql, ("r-\ud800", "x", "k\udc00")
    )
    assert ("VALUES (?, CAST(? AS TEXT), ?)", (1, b"\xed\xbf\xbf", None)) == exact_statement(
        "VALUES (?, ?, ?)", (1, "\udfff", None)
    )


def test_ids_that_differ_in_a_lone_surrogate_are_two_rows(connection: sqlite3.Connection) -> None:
    for number, key in enumerate(("r-\ud800", "r-\ud801", "r-\udc00", "r-\ufffd", "r-?")):
        execute(connection, "INSERT INTO t (id, n) VALUES (?, ?)", (key, number))
    assert [("r-\ud801", 1)] == execute(
        connection, "SELECT id, n FROM t WHERE id = ?", ("r-\ud801",)
    ).fetchall()
    assert ["722D3F", "722DEDA080", "722DEDA081", "722DEDB080", "722DEFBFBD"] == [
        row[0] for row in connection.execute("SELECT hex(id) FROM t ORDER BY id")
    ]


def test_many_rows_resume_after_the_row_the_driver_refused(connection: sqlite3.Connection) -> None:
    """Rows before the refused one are run once, the rest each exactly once, in order."""
    rows = [("a", 0), ("b\ud800", 1), ("c", 2), ("d\udc00", 3), ("e", 4)]
    execute_many(connection, "INSERT INTO t (id, n) VALUES (?, ?)", iter(rows))
    assert rows == connection.execute("SELECT id, n FROM t ORDER BY n").fetchall()


@given(st.text(alphabet=UNITS), st.text(alphabet=UNITS))
def test_the_shared_logs_text_keeps_ids_apart_and_is_utf8(first: str, second: str) -> None:
    """PostgreSQL's form of an id: valid UTF-8, one per id, plain text kept as it is."""
    shared = shared_text(first)
    shared.encode()
    assert (first == second) == (shared == shared_text(second))
    assert (shared == first) == all(not "\ud800" <= c <= "\udfff" and c != "\ufffd" for c in first)
    assert shared_text(first + second) == shared + shared_text(second)


def test_the_shared_logs_text_of_a_lone_surrogate() -> None:
    assert ["r-\ufffdd800", "r-\ufffddc01", "r-\ufffdfffd", "r-\u00e9"] == [
        shared_text(text) for text in ("r-\ud800", "r-\udc01", "r-\ufffd", "r-\u00e9")
    ]
