"""A host keeps a bounded number of subscriptions, one client process half of them (ADR 0124).

Before, one connection made 81 000 ``view.runs.watch`` subscriptions in
20 s, and every change then held the writer half a second publishing them.
The bound is set to 8 here (4 per process).
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from pwf.server._watches import WatchBound

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration._hosted import Hosted
    from tests.integration._served import init, line, short_dir, until

    from pwf.client import HostClient
else:
    from _hosted import Hosted
    from _served import init, line, short_dir, until


@pytest.fixture
def hosted() -> Iterator[Hosted]:
    """A host whose bound is 8 subscriptions."""
    with short_dir() as folder:
        init(folder / "state.db")
        host = Hosted(folder / "state.db")
        try:
            assert host.server.views is not None
            host.server.views.bound = WatchBound(most=8)
            yield host
        finally:
            host.close()


def _watch(client: HostClient, subscription_id: str, operation: str = "view.runs.watch") -> Any:
    payload = {"subscriptionId": subscription_id}
    if operation == "view.session.watch":
        payload["sessionId"] = "s-1"
    return client.request(line(operation, payload, rid=f"watch-{subscription_id}"))


def test_a_process_keeps_half_the_bound_and_an_unwatch_or_a_close_frees_room(
    hosted: Hosted,
) -> None:
    with hosted.client() as client:
        for number in range(4):
            assert _watch(client, f"w-{number}")["outcome"] == "accepted"
        refused = _watch(client, "w-4")
        assert refused["outcome"] == "rejected", refused
        assert "at most 4 subscriptions of one client process" in refused["error"]
        assert _watch(client, "w-0")["outcome"] == "accepted"  # the same id again takes no room
        gone = client.request(line("view.run.unwatch", {"subscriptionId": "w-1"}, rid="un"))
        assert gone["outcome"] == "accepted"
        assert _watch(client, "w-4")["outcome"] == "accepted"
        session = _watch(client, "session-1", "view.session.watch")
        assert session["outcome"] == "rejected", session  # refused before any coordinator
        assert "subscriptions of one client process" in session["error"]
    with hosted.client() as again:  # the closed connection's subscriptions are gone
        assert all(_watch(again, f"v-{n}")["outcome"] == "accepted" for n in range(4))
        elsewhere = subprocess.run(
            [sys.executable, "-m", "pwf", "call", "--db", str(hosted.server.options.db)],
            input=line("view.runs.watch", {"subscriptionId": "x"}, rid="x") + b"\n",
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert b'"outcome":"accepted"' in elsewhere.stdout, elsewhere  # another process has room
    views = hosted.server.views
    assert views is not None
    until(lambda: views.bound.total == 0, 10, "every subscription ended with its connection")
