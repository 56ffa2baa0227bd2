"""The bytes of requests read and not yet answered: host-wide, half per process, woken in order."""

from __future__ import annotations

import asyncio

from pwf.server._held import Held


class _Holder:
    def __init__(self, peer: int | None, woken: list[str], name: str) -> None:
        self.peer, self.woken, self.name = peer, woken, name

    def wake(self) -> None:
        self.woken.append(self.name)


def test_one_process_holds_half_and_the_host_its_bound() -> None:
    held, woken = Held(most=100), list[str]()
    first, second = _Holder(1, woken, "a"), _Holder(1, woken, "b")
    third, unknown = _Holder(2, woken, "c"), _Holder(None, woken, "d")
    assert held.take(first, 30)
    assert held.take(second, 20)
    assert not held.take(second, 1)  # process 1 holds its half
    assert held.take(third, 40)
    assert not held.take(unknown, 11)  # the host's bound: 90 of 100
    assert held.take(unknown, 10)
    assert held.total == 100


def test_freed_room_wakes_the_waiting_in_the_order_they_began_to_wait() -> None:
    async def scenario() -> list[str]:
        held, woken = Held(most=10), list[str]()
        first, second, third = (_Holder(None, woken, name) for name in "abc")
        assert held.take(first, 10)
        assert not held.take(second, 5)
        assert not held.take(third, 5)
        held.give(first, 10)
        held.give(first, 0)  # a second give before the wake wakes each once
        await asyncio.sleep(0)
        return woken

    assert asyncio.run(scenario()) == ["b", "c"]
