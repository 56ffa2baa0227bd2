"""A served host's gate and the recording of raised refusals (DOMAIN §7.2, §7.3; HOST 1.20).

A stopping host, or one whose claim is no longer live, answers executed
commands ``unavailable`` "Workflow host is stopping" before any replay
lookup, and maintenance commands only after it; neither answer is
recorded.  A maintenance command whose handler raises is recorded as
``rejected`` with the raised message.  The host runs in this process, so the
gate is the served host's own.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

import pytest

from pwf import canonical
from pwf.cli._options import open_store
from pwf.commands.catalogue import CLIENT_OPERATIONS, Operation, Route
from pwf.errors import CommandError
from pwf.host.served import Identity, ServedHost
from pwf.protocol.client import ClientRequest, ClientResponse

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pwf.commands import Context, Result

NOW: Final = 1_764_403_200_000
LEASE: Final = 30_000
STOPPING: Final = "Workflow host is stopping"
"""HOST 1.20 and DOMAIN §7.3: the text of a closed gate."""
RAISED: Final = "Workflow session s-1 is not bound to run run-1"
"""What the raising maintenance handler of these tests says (any message is recorded as it is)."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedHost]:
    """A served host holding a live claim from :data:`NOW` for :data:`LEASE` ms."""
    store = open_store(str(tmp_path / "s.db"), create=True)
    host = ServedHost(store, Identity("host-1", os.getpid(), "start-1"))
    host.start("ab" * 32, LEASE, NOW)
    yield host
    store.close()


def _request(operation: str, rid: str, key: str, payload: object = None) -> ClientRequest:
    return ClientRequest(
        request_id=rid,
        client_id="client-1",
        operation=operation,
        idempotency_key=key,
        payload={} if payload is None else payload,
    )


def _records(host: ServedHost) -> list[dict[str, Any]]:
    names, rows = host.store.reader().table(
        "SELECT h.request_id, h.outcome, h.host_epoch, e.content AS error FROM host_commands h"
        " LEFT JOIN blobs e ON e.blob_hash = h.error_hash ORDER BY h.request_id"
    )
    return [dict(zip(names, row, strict=True)) for row in rows]


def _events(host: ServedHost) -> int:
    return len(list(host.store.read()))


def _unavailable(rid: str) -> ClientResponse:
    """HOST 1.20: ``unavailable`` with its error, no receipt and no revision."""
    return ClientResponse(request_id=rid, outcome="unavailable", error=STOPPING)


class TestExecutedCommands:
    """Executed commands meet the gate before the replay lookup (DOMAIN §7.3)."""

    def test_a_recorded_request_is_unavailable_not_adopted_while_stopping(
        self, served: ServedHost
    ) -> None:
        """Even a request that would be adopted is refused once the host stops."""
        first = served.request(_request("host.status", "r-1", "k-1"), NOW)
        assert "accepted" == first.outcome
        served.stopping = True
        events = _events(served)

        again = served.request(_request("host.status", "r-1", "k-1"), NOW + 1)
        by_key = served.request(_request("host.status", "r-2", "k-1"), NOW + 2)

        assert (_unavailable("r-1"), _unavailable("r-2")) == (again, by_key)
        assert again.receipt is canonical.MISSING
        assert [("r-1", "accepted")] == [
            (row["request_id"], row["outcome"]) for row in _records(served)
        ]
        assert events == _events(served)

    def test_an_unavailable_answer_is_not_recorded(self, served: ServedHost) -> None:
        """A retry once the gate is open again executes: nothing was kept of the refusal."""
        served.stopping = True
        refused = served.request(_request("host.status", "r-1", "k-1"), NOW)
        assert _unavailable("r-1") == refused
        assert [] == _records(served)

        served.stopping = False
        retried = served.request(_request("host.status", "r-1", "k-1"), NOW + 1)

        assert "accepted" == retried.outcome
        assert [("r-1", "accepted")] == [
            (row["request_id"], row["outcome"]) for row in _records(served)
        ]

    def test_a_lease_that_ran_out_closes_the_gate(self, served: ServedHost) -> None:
        """The claim is live while its lease has not expired at the request's ``now``."""
        last = served.request(_request("host.status", "r-1", "k-1"), NOW + LEASE - 1)
        late = served.request(_request("host.status", "r-2", "k-2"), NOW + LEASE)

        assert "accepted" == last.outcome
        assert _unavailable("r-2") == late
        assert ["r-1"] == [row["request_id"] for row in _records(served)]

    def test_the_record_carries_the_served_hosts_epoch(self, served: ServedHost) -> None:
        """DOMAIN §7.2 step 3: the stored response keeps the epoch of the host that ran it."""
        served.request(_request("host.status", "r-1", "k-1"), NOW)

        [row] = _records(served)
        assert served.host_epoch is not None
        assert served.host_epoch == row["host_epoch"]


def _raising(monkeypatch: pytest.MonkeyPatch, operation: str) -> list[str]:
    """Make ``operation``'s maintenance handler raise :data:`RAISED`; its calls, by requestId."""
    calls: list[str] = []

    def handler(_ctx: Context, request: ClientRequest) -> Result:
        calls.append(request.request_id)
        raise CommandError(RAISED)

    monkeypatch.setitem(CLIENT_OPERATIONS, operation, Operation(Route.MAINTENANCE, handler))
    return calls


class TestMaintenanceCommands:
    """Maintenance commands replay first, then meet the gate; raised errors are recorded."""

    def test_a_raised_error_is_recorded_as_rejected_with_its_message(
        self, served: ServedHost, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """DOMAIN §7.3: raised errors are converted to a recorded ``rejected``."""
        calls = _raising(monkeypatch, "session.record")

        first = served.request(_request("session.record", "m-1", "k-1"), NOW)
        again = served.request(_request("session.record", "m-2", "k-1"), NOW + 1)

        assert ClientResponse(request_id="m-1", outcome="rejected", error=RAISED) == first
        assert ClientResponse(request_id="m-2", outcome="rejected", error=RAISED) == again
        assert ["m-1"] == calls
        assert [("m-1", "rejected", RAISED.encode())] == [
            (row["request_id"], row["outcome"], row["error"]) for row in _records(served)
        ]

    def test_a_recorded_request_is_replayed_while_stopping(
        self, served: ServedHost, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The replay lookup comes first: the stored response is still returned."""
        calls = _raising(monkeypatch, "channel.reload")
        first = served.request(_request("channel.reload", "m-1", "k-1"), NOW)
        served.stopping = True

        again = served.request(_request("channel.reload", "m-1", "k-1"), NOW + 1)

        assert ("rejected", RAISED) == (first.outcome, first.error)
        assert first == again
        assert ["m-1"] == calls

    def test_a_new_request_is_unavailable_and_not_recorded_while_stopping(
        self, served: ServedHost, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Only after the replay lookup: no claim or stopping answers ``unavailable``."""
        calls = _raising(monkeypatch, "channel.reload")
        served.stopping = True

        refused = served.request(_request("channel.reload", "m-1", "k-1"), NOW)

        assert _unavailable("m-1") == refused
        assert ([], []) == (calls, _records(served))
