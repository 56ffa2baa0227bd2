"""``pwf serve`` on a database made before the readable views gives it them (ADR 0049)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.sqlviews import views_current

if TYPE_CHECKING:
    from tests.integration._served import Served, init, pwf, rows, short_dir
else:
    from _served import Served, init, pwf, rows, short_dir

pytestmark = [pytest.mark.slow, pytest.mark.sqlite_only]

VIEWS = (
    "SELECT name FROM sqlite_master WHERE type = 'view' AND name LIKE 'readable\\_%' ESCAPE '\\'"
    " ORDER BY name"
)


def test_a_served_host_adds_the_views_and_leaves_the_log() -> None:
    with short_dir() as directory:
        db = directory / "state.db"
        init(db)
        made = rows(db, VIEWS)
        connection = sqlite3.connect(db, isolation_level=None)
        for (name,) in made:
            connection.execute(f'DROP VIEW "{name}"')
        connection.close()
        assert [] == rows(db, VIEWS)
        events = rows(db, "SELECT seq, content_hash FROM events ORDER BY seq")
        served = Served(db)
        try:
            assert 0 == served.terminate(), served.stderr()
        finally:
            served.close()
        assert made == rows(db, VIEWS)
        assert (
            events == rows(db, "SELECT seq, content_hash FROM events ORDER BY seq")[: len(events)]
        )
        # host_state is made by the host's first claim, after the views; the
        # next writing command adds its view, and then all are current.
        assert 0 == pwf("request", "--db", str(db)).returncode
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            assert views_current(connection)
        finally:
            connection.close()
        assert ("readable_host_state",) in rows(db, VIEWS)
