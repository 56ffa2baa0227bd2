"""The writer's groups: what arrives while a group is decided joins it, in order (ADR 0052).

A job that blocks until more work is queued shows the writer taking that
work into the same transaction, after it and before the commit; an
``alone`` job queued meanwhile is not taken and runs after the commit.
Every answer comes back once the group is committed, in arrival order.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from pwf.server._writer import MAX_GROUP, Writer
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from tests._tally import tally
else:
    from _tally import tally


CAP = MAX_GROUP
"""The most decisions one group commits together (ADR 0052)."""


def _writer(db: Path, **timing: float) -> Writer:
    return Writer(lambda: (SqliteStore(db, create=True), SimpleNamespace(shared=None)), **timing)  # type: ignore[arg-type,return-value]


def _blocking(entered: threading.Event, go: threading.Event, name: str, order: list[str]) -> Any:
    def work(_host: object) -> str:
        entered.set()
        go.wait(30)
        order.append(name)
        return name

    return work


def _record(name: str, order: list[str], seen: list[object]) -> Any:
    def work(host: Any) -> str:
        seen.append(host.shared)
        order.append(name)
        return name

    return work


def test_work_queued_while_a_group_is_decided_joins_it(tmp_path: Path) -> None:
    """One transaction for the blocking job and the two queued behind it, decided in order."""

    async def scenario() -> tuple[list[str], list[str], int, list[object]]:
        writer = _writer(tmp_path / "state.db")
        counts = tally(writer)
        entered, go = threading.Event(), threading.Event()
        order: list[str] = []
        seen: list[object] = []
        try:
            first = writer.submit(_blocking(entered, go, "a", order))
            await asyncio.to_thread(entered.wait, 30)
            later = [writer.submit(_record(name, order, seen)) for name in ("b", "c")]
            go.set()
            answers = [await first, *[await future for future in later]]
            return answers, order, counts["group"], seen
        finally:
            await asyncio.to_thread(writer.close)

    answers, order, groups, seen = asyncio.run(scenario())
    assert answers == ["a", "b", "c"]
    assert order == ["a", "b", "c"]
    assert groups == 1
    assert seen[0] is not None
    assert seen[0] is seen[1]


def test_alone_work_queued_meanwhile_waits_for_the_commit(tmp_path: Path) -> None:
    """An ``alone`` job is not pulled into the open group; what follows it opens the next one."""

    async def scenario() -> tuple[list[str], int, list[object]]:
        writer = _writer(tmp_path / "state.db")
        counts = tally(writer)
        entered, go = threading.Event(), threading.Event()
        order: list[str] = []
        seen: list[object] = []
        try:
            first = writer.submit(_blocking(entered, go, "a", order))
            await asyncio.to_thread(entered.wait, 30)
            alone = writer.submit(_record("alone", order, seen), alone=True)
            after = writer.submit(_record("b", order, seen))
            go.set()
            await first
            await alone
            await after
            return order, counts["group"], seen
        finally:
            await asyncio.to_thread(writer.close)

    order, groups, seen = asyncio.run(scenario())
    assert order == ["a", "alone", "b"]
    assert groups == 2
    assert seen[0] is None
    assert seen[1] is not None


def test_a_callback_that_raises_stops_no_other_answer(tmp_path: Path) -> None:
    """A group's answers are handed back together; one failing callback leaves the rest."""

    async def scenario() -> tuple[list[object], list[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        problems: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: problems.append(context))
        writer = _writer(tmp_path / "state.db")
        entered, go = threading.Event(), threading.Event()
        got: list[object] = []
        done = asyncio.Event()

        def broken(_value: object, _error: BaseException | None) -> None:
            raise RuntimeError("broken callback")

        def kept(value: object, _error: BaseException | None) -> None:
            got.append(value)
            done.set()

        try:
            writer.call(_blocking(entered, go, "a", []), lambda value, _e: got.append(value))
            await asyncio.to_thread(entered.wait, 30)
            writer.call(lambda _host: "b", broken)
            writer.call(lambda _host: "c", kept)
            go.set()
            await asyncio.wait_for(done.wait(), 30)
            return got, problems
        finally:
            await asyncio.to_thread(writer.close)

    got, problems = asyncio.run(scenario())
    assert got == ["a", "c"]
    assert [str(problem["exception"]) for problem in problems] == ["broken callback"]


def test_a_duty_goes_before_the_client_work_queued_ahead_of_it(tmp_path: Path) -> None:
    """Client jobs queued before a duty wait for it: the duty runs next, in a group of its own."""

    async def scenario() -> tuple[list[str], int]:
        writer = _writer(tmp_path / "state.db")
        counts = tally(writer)
        entered, go = threading.Event(), threading.Event()
        order: list[str] = []
        seen: list[object] = []
        try:
            first = writer.submit(_blocking(entered, go, "a", order))
            await asyncio.to_thread(entered.wait, 30)
            clients = [writer.submit(_record(f"c{n}", order, seen)) for n in range(5)]
            duty = writer.duty(_record("duty", order, seen))
            go.set()
            await duty
            for future in clients:
                await future
            await first
            return order, counts["group"]
        finally:
            await asyncio.to_thread(writer.close)

    order, groups = asyncio.run(scenario())
    assert order == ["a", "duty", "c0", "c1", "c2", "c3", "c4"]
    assert groups == 3


def test_a_waiting_duty_closes_the_client_group_being_decided(tmp_path: Path) -> None:
    """A duty queued while a client group is decided is not left behind what joins that group."""

    async def scenario() -> list[str]:
        writer = _writer(tmp_path / "state.db")
        entered, go = threading.Event(), threading.Event()
        order: list[str] = []
        seen: list[object] = []
        try:
            first = writer.submit(_blocking(entered, go, "a", order))
            await asyncio.to_thread(entered.wait, 30)
            duty = writer.duty(_record("duty", order, seen))
            later = writer.submit(_record("b", order, seen))
            go.set()
            await asyncio.gather(first, duty, later)
            return order
        finally:
            await asyncio.to_thread(writer.close)

    assert asyncio.run(scenario()) == ["a", "duty", "b"]


def test_a_group_holds_at_most_its_cap(tmp_path: Path) -> None:
    """MAX_GROUP decisions share a transaction, not one more, by either way a group grows.

    Everything is queued while the first job blocks: the group takes what is
    queued (up to the cap) and, with a sibling answered a moment ago, would
    also wait for and take one more; at the cap it does neither.
    """

    async def scenario() -> tuple[list[object], int]:
        writer = _writer(
            tmp_path / "state.db", commit_delay=1.0, sibling_window=600.0, group_seconds=600.0
        )  # the blocking job's time closes no group here
        counts = tally(writer)
        entered, go = threading.Event(), threading.Event()
        seen: list[object] = []

        def work(host: Any) -> None:
            seen.append(host.shared)

        def answered(_value: object, _error: BaseException | None) -> None:
            sibling.set()

        sibling = asyncio.Event()
        try:
            writer.call(work, answered, source="sibling")
            await asyncio.wait_for(sibling.wait(), 30)
            seen.clear()
            first = writer.submit(_blocking(entered, go, "a", []))
            await asyncio.to_thread(entered.wait, 30)
            later = [writer.submit(work) for _ in range(CAP + 8)]
            go.set()
            await first
            for future in later:
                await future
            return seen, counts["group"]
        finally:
            await asyncio.to_thread(writer.close)

    seen, groups = asyncio.run(scenario())
    sizes = [sum(1 for tx in seen if tx is shared) for shared in dict.fromkeys(seen)]
    assert [CAP - 1, 8 + 1] == sizes  # the blocking job is the first group's other one
    assert 3 == groups


def test_connections_take_turns(tmp_path: Path) -> None:
    """Forty jobs of one connection queued before one of another: the other's is taken second."""

    async def scenario() -> list[str]:
        writer = _writer(tmp_path / "state.db")
        entered, go = threading.Event(), threading.Event()
        order: list[str] = []
        loop = asyncio.get_running_loop()
        done: list[asyncio.Future[None]] = []

        def queue(name: str, source: str) -> None:
            future: asyncio.Future[None] = loop.create_future()
            done.append(future)

            def work(_host: object) -> None:
                order.append(name)

            writer.call(work, lambda _v, _e: future.set_result(None), source=source)

        try:
            first = writer.submit(_blocking(entered, go, "a", order))
            await asyncio.to_thread(entered.wait, 30)
            for number in range(40):
                queue(f"flood-{number}", "flooder")
            queue("polite", "polite")
            go.set()
            await first
            await asyncio.gather(*done)
            return order
        finally:
            await asyncio.to_thread(writer.close)

    order = asyncio.run(scenario())
    assert order[:4] == ["a", "flood-0", "polite", "flood-1"]
    assert [name for name in order if name.startswith("flood")] == [
        f"flood-{number}" for number in range(40)
    ]


def test_a_group_of_slow_decisions_closes_after_its_time(tmp_path: Path) -> None:
    """Ten decisions of 30 ms queued at once: groups of two, where one group of ten was (ADR 0125).

    A flood of slow reads (a deep run list page at a million events) kept
    another connection's answer waiting for 64 of them and their commit.
    """

    async def scenario() -> tuple[list[object], list[str]]:
        writer = _writer(tmp_path / "state.db", group_seconds=0.05)
        entered, go = threading.Event(), threading.Event()
        seen: list[object] = []
        order: list[str] = []

        def slow(name: str) -> Any:
            def work(host: Any) -> None:
                time.sleep(0.03)
                seen.append(host.shared)
                order.append(name)

            return work

        try:
            first = writer.submit(_blocking(entered, go, "a", order))
            await asyncio.to_thread(entered.wait, 30)
            later = [writer.submit(slow(f"s-{n}")) for n in range(10)]
            go.set()
            await first
            await asyncio.gather(*later)
            return seen, order
        finally:
            await asyncio.to_thread(writer.close)

    seen, order = asyncio.run(scenario())
    sizes = [sum(1 for tx in seen if tx is shared) for shared in dict.fromkeys(seen)]
    assert order == ["a", *(f"s-{n}" for n in range(10))]  # arrival order kept
    assert sum(sizes) == 10
    assert all(size <= 2 for size in sizes), sizes  # a third decision would start past 50 ms
