"""A served host runs one ``state.verify`` at a time; those that come while it runs share the next.

At a million events a verify costs about a minute of processor time (an
integrity check, a walk of the log, a rebuild compared with the
projections).  Before, each pipelined ``state.verify`` took a worker thread
of its own: four clients with 64 each kept six verifies running at once.
These tests drive :class:`pwf.server._statereads.StateReads` with a verify
that sleeps and counts its runs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from pwf import canonical
from pwf.host.served import STOPPING
from pwf.protocol.client import ClientResponse, parse_request
from pwf.server._statereads import StateReads

if TYPE_CHECKING:
    from pwf.protocol.client import ClientRequest

VERIFY_SECONDS = 0.2


def _request(number: int, operation: str = "state.verify") -> ClientRequest:
    return parse_request(
        canonical.encode(
            {
                "clientId": "c", "idempotencyKey": f"k-{number}", "operation": operation,
                "payload": {}, "requestId": f"r-{number}", "schema": "pi-workflows.client.v1",
                "type": "request",
            }
        )
    )  # fmt: skip


class _Reads:
    """A hub with its own file, and a state read that sleeps, counts its runs, and may fail."""

    def __init__(self) -> None:
        self.hub = SimpleNamespace(
            options=SimpleNamespace(store_url=None), stopping=False, clock=lambda: 0
        )
        self.runs = 0
        self.failing = False
        self._lock = threading.Lock()
        self.reads = StateReads(self.hub)
        self.reads._read_file = self._read_file  # type: ignore[method-assign]

    def _read_file(self, request: ClientRequest) -> ClientResponse:
        with self._lock:
            self.runs += 1
            number = self.runs
        time.sleep(VERIFY_SECONDS)
        if self.failing:
            raise OSError("the disk is gone")
        return ClientResponse(
            request_id=request.request_id, outcome="accepted", receipt={"run": number}
        )


@pytest.fixture
def reads() -> _Reads:
    return _Reads()


def test_requests_that_come_while_one_runs_share_the_next(reads: _Reads) -> None:
    async def ask() -> list[ClientResponse]:
        first = asyncio.ensure_future(reads.reads.answer(_request(0)))
        await asyncio.sleep(VERIFY_SECONDS / 4)  # the first verify runs
        rest = [asyncio.ensure_future(reads.reads.answer(_request(n))) for n in range(1, 20)]
        return [await first, *await asyncio.gather(*rest)]

    answers = asyncio.run(ask())
    assert reads.runs == 2
    assert [answer.request_id for answer in answers] == [f"r-{n}" for n in range(20)]
    assert answers[0].receipt == {"run": 1}
    assert {str(answer.receipt) for answer in answers[1:]} == {str({"run": 2})}


def test_a_request_after_a_verify_ended_gets_a_verify_of_its_own(reads: _Reads) -> None:
    async def ask() -> list[ClientResponse]:
        return [await reads.reads.answer(_request(number)) for number in range(3)]

    answers = asyncio.run(ask())
    assert reads.runs == 3
    assert [answer.receipt for answer in answers] == [{"run": 1}, {"run": 2}, {"run": 3}]


def test_state_status_runs_for_each_request(reads: _Reads) -> None:
    async def ask() -> list[ClientResponse]:
        return await asyncio.gather(
            *(reads.reads.answer(_request(number, "state.status")) for number in range(4))
        )

    asyncio.run(ask())
    assert reads.runs == 4


def test_a_failed_verify_fails_every_request_that_shared_it(reads: _Reads) -> None:
    reads.failing = True

    async def ask() -> list[Any]:
        asked = [reads.reads.answer(_request(number)) for number in range(5)]
        return await asyncio.gather(*asked, return_exceptions=True)

    found = asyncio.run(ask())
    assert reads.runs == 2  # the first, then one for the four that came while it ran
    assert all(isinstance(error, OSError) for error in found)


def test_a_stopping_host_answers_the_waiting_requests_unavailable(reads: _Reads) -> None:
    async def ask() -> list[ClientResponse]:
        first = asyncio.ensure_future(reads.reads.answer(_request(0)))
        await asyncio.sleep(VERIFY_SECONDS / 4)
        rest = [asyncio.ensure_future(reads.reads.answer(_request(n))) for n in range(1, 4)]
        await asyncio.sleep(0)
        reads.hub.stopping = True
        return [await first, *await asyncio.gather(*rest)]

    answers = asyncio.run(ask())
    assert reads.runs == 1
    assert answers[0].outcome == "accepted"
    assert [(answer.request_id, answer.outcome, answer.error) for answer in answers[1:]] == [
        (f"r-{number}", "unavailable", STOPPING) for number in range(1, 4)
    ]


def test_an_asker_that_goes_leaves_the_others_their_verify(reads: _Reads) -> None:
    async def ask() -> ClientResponse:
        first = asyncio.ensure_future(reads.reads.answer(_request(0)))
        await asyncio.sleep(VERIFY_SECONDS / 4)
        gone = asyncio.ensure_future(reads.reads.answer(_request(1)))
        kept = asyncio.ensure_future(reads.reads.answer(_request(2)))
        await asyncio.sleep(0)
        gone.cancel()  # its connection closed
        await first
        return await kept

    answer = asyncio.run(ask())
    assert (answer.request_id, answer.outcome, answer.receipt) == ("r-2", "accepted", {"run": 2})
