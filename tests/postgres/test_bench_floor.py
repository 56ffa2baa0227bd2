"""The PostgreSQL bench's raw floor writes the shared log's own tables (never timed here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from collections.abc import Callable


def test_the_floor_writes_chained_rows_of_the_store_format(
    bench: Callable[[str], Any], pg_url: str
) -> None:
    assert bench("bench_postgres").time_floor(pg_url, 5) > 0
    with psycopg.connect(pg_url) as connection:
        rows = connection.execute("SELECT seq, link FROM _pwf_events ORDER BY seq").fetchall()
        head = connection.execute("SELECT seq, batch FROM _pwf_head").fetchone()
    assert [seq for seq, _ in rows] == [1, 2, 3, 4, 5]
    assert rows[0][1] is None
    assert all(link is not None for _, link in rows[1:])
    assert head == (5, 5)
