"""``pwf serve`` on a shared PostgreSQL log: its decisions land there; direct hosts see them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import psycopg

from pwf.client import HostClient

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.postgres._served_shared import served
    from tests.postgres.conftest import Hosts
else:
    from _served_shared import served

AT = 1_800_000_000_000


def test_a_served_host_writes_the_shared_log(
    hosts: Hosts, client_line: Callable[..., bytes]
) -> None:
    """Requests through the socket land in PostgreSQL, and another host folds them."""
    with served(hosts, AT) as server, HostClient.connect(server.paths.socket, timeout=30) as client:
        answers = [client.request(client_line(n).strip()) for n in (1, 2, 1)]
    assert ["accepted", "accepted", "adopted"] == [a["outcome"] for a in answers]
    with psycopg.connect(hosts.url) as connection:
        recorded = connection.execute(
            "SELECT count(*) FROM events WHERE type = 'command.recorded'"
        ).fetchone()
    assert (2,) == recorded
    listed = hosts("b", "query", "runs", "--json")
    assert ["run-1", "run-2"] == sorted(row["run_id"] for row in json.loads(listed.output))
    verified = hosts("b", "log", "verify", "--json")
    assert json.loads(verified.output)["ok"]
