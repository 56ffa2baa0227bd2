"""``same_dump`` says what comparing two :func:`pwf._sqlite.dump` results says, a row at a time."""

from __future__ import annotations

import sqlite3

import pytest

from pwf._sqlite import dump, same_dump

BASE = (
    "CREATE TABLE runs (run_id TEXT PRIMARY KEY, revision INTEGER, note BLOB)",
    "CREATE TABLE blobs (blob_hash BLOB PRIMARY KEY, content BLOB)",
    "INSERT INTO runs VALUES ('run-1', 1, x'00'), ('run-2', 2, NULL)",
    "INSERT INTO blobs VALUES (x'01', x'02')",
    "CREATE TABLE _pwf_checkpoint (projection TEXT PRIMARY KEY, last_seq INTEGER)",
    "INSERT INTO _pwf_checkpoint VALUES ('runs', 7)",
)


def _made(*more: str) -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    for statement in (*BASE, *more):
        connection.execute(statement)
    return connection


@pytest.mark.parametrize(
    "change",
    [
        (),
        ("UPDATE runs SET revision = 3 WHERE run_id = 'run-2'",),
        ("UPDATE runs SET revision = '2' WHERE run_id = 'run-2'",),  # text, not a number
        ("UPDATE runs SET note = x'0000' WHERE run_id = 'run-1'",),
        ("INSERT INTO runs VALUES ('run-3', 1, NULL)",),
        ("DELETE FROM blobs",),
        ("CREATE TABLE extra (id INTEGER)",),
        ("DROP TABLE blobs",),
        ("UPDATE _pwf_checkpoint SET last_seq = 9",),  # bookkeeping: not a projection
    ],
)
def test_it_agrees_with_comparing_the_dumps(change: tuple[str, ...]) -> None:
    one, other = _made(), _made(*change)
    try:
        assert same_dump(one, other) == (dump(one) == dump(other))
        assert same_dump(other, one) == (dump(one) == dump(other))
    finally:
        one.close()
        other.close()


def test_rows_inserted_in_another_order_are_the_same() -> None:
    one = _made()
    other = sqlite3.connect(":memory:")
    try:
        for statement in BASE[:2]:
            other.execute(statement)
        other.execute("INSERT INTO blobs VALUES (x'01', x'02')")
        other.execute("INSERT INTO runs VALUES ('run-2', 2, NULL), ('run-1', 1, x'00')")
        assert same_dump(one, other)
    finally:
        one.close()
        other.close()
