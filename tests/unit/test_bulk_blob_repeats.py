"""A bulk fold's statements skip a blob its transaction already upserted (ADR 0108)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.fold.bulk import run_statements
from pwf.projections import blobs
from pwf.projections.blobs import UPSERT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pwf.projections import Statement

DIGEST = bytes(range(32))


def _blob(media: str, at: int) -> Statement:
    return (UPSERT, (DIGEST, media, 2, b"{}", at))


def _connection() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    for statement in blobs.DDL:
        connection.execute(statement)
    return connection


def test_a_repeat_is_not_executed_and_the_first_carrier_dates_the_blob() -> None:
    connection = _connection()
    ran: list[Sequence[object]] = []

    def execute(text: str, params: Sequence[object]) -> object:
        ran.append(params)
        return connection.execute(text, params)

    stored: set[tuple[object, object]] = set()
    run_statements(execute, [_blob("application/json", 1), _blob("application/json", 2)], stored)
    run_statements(execute, [_blob("application/json", 3)], stored)
    assert [params[4] for params in ran] == [1]
    assert connection.execute("SELECT created_at FROM blobs").fetchall() == [(1,)]
    assert stored == {(DIGEST, "application/json")}


def test_the_same_hash_under_another_media_type_still_raises_the_conflict() -> None:
    connection = _connection()
    stored: set[tuple[object, object]] = set()
    statements = [_blob("application/json", 1), _blob("text/plain", 2)]
    with pytest.raises(
        sqlite3.IntegrityError, match=r"NOT NULL constraint failed: blobs\.media_type"
    ):
        run_statements(connection.execute, statements, stored)


def test_a_blob_not_in_the_set_is_upserted_again_and_changes_nothing() -> None:
    connection = _connection()
    run_statements(connection.execute, [_blob("application/json", 1)], set())
    run_statements(connection.execute, [_blob("application/json", 5)], set())
    assert connection.execute("SELECT created_at FROM blobs").fetchall() == [(1,)]
