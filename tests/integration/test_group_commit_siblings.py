"""A group about to commit waits a little for its siblings, and only for them (ADR 0065).

A sibling is a connection answered within the window that has nothing in
the group: with one request outstanding, it is about to send again.  A
lone client has no sibling, so its group never waits; a group with a
sibling takes the sibling's request when it comes, behind the ones before
it, and waits no longer than the delay for one that does not come.
"""

from __future__ import annotations

import asyncio
import functools
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from pwf.cli._options import open_store
from pwf.server._writer import Writer
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

    from tests._tally import tally
    from tests.integration._hosted import Hosted
    from tests.integration._served import run_start, short_dir
else:
    from _hosted import Hosted
    from _served import run_start, short_dir

    from _tally import tally

LONG = 30.0
"""A delay no test should ever see: a group that waits it out fails the test by timing out."""


def _writer(db: Path, *, delay: float = LONG, window: float = 600.0) -> Writer:
    return Writer(
        lambda: (SqliteStore(db, create=True), SimpleNamespace(shared=None)),  # type: ignore[arg-type,return-value]
        commit_delay=delay,
        sibling_window=window,
    )


async def _ask(writer: Writer, name: str, source: object, order: list[str]) -> str:
    """One request from ``source``; its answer once committed."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def work(_host: object) -> str:
        order.append(name)
        return name

    def done(value: object, error: BaseException | None) -> None:
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(str(value))

    writer.call(work, done, source=source)
    return await answer


def test_a_lone_client_is_never_delayed(tmp_path: Path) -> None:
    """One connection, answered a moment ago, sends again: its group commits at once."""

    async def scenario() -> tuple[list[float], int, int]:
        writer = _writer(tmp_path / "state.db")
        counts = tally(writer)
        order: list[str] = []
        spent: list[float] = []
        try:
            for number in range(5):
                began = time.monotonic()
                await asyncio.wait_for(_ask(writer, f"r{number}", "lone", order), LONG / 2)
                spent.append(time.monotonic() - began)
            return spent, counts["group"], counts["waited"]
        finally:
            await asyncio.to_thread(writer.close)

    spent, groups, waited = asyncio.run(scenario())
    assert groups == 5
    assert waited == 0
    assert max(spent) < LONG / 2


def test_a_group_waits_for_a_sibling_and_takes_it_behind_the_first(tmp_path: Path) -> None:
    """Two connections answered; one sends, the other a little later: one group, in order."""

    async def scenario() -> tuple[list[str], list[str], int, int]:
        writer = _writer(tmp_path / "state.db")
        counts = tally(writer)
        order: list[str] = []
        try:
            await asyncio.gather(_ask(writer, "a0", "a", order), _ask(writer, "b0", "b", order))
            groups = counts["group"]
            first = asyncio.ensure_future(_ask(writer, "a1", "a", order))
            await asyncio.sleep(0.2)
            assert not first.done()  # the group waits for b
            second = await asyncio.wait_for(_ask(writer, "b1", "b", order), LONG / 2)
            return [await first, second], order, counts["group"] - groups, counts["waited"]
        finally:
            await asyncio.to_thread(writer.close)

    answers, order, groups, waited = asyncio.run(scenario())
    assert answers == ["a1", "b1"]
    assert order[-2:] == ["a1", "b1"]
    assert groups == 1
    assert waited == 1


def test_the_wait_for_a_sibling_is_bounded(tmp_path: Path) -> None:
    """A sibling that does not send costs the group the delay, not more."""

    async def scenario() -> tuple[float, int]:
        writer = _writer(tmp_path / "state.db", delay=0.3)
        counts = tally(writer)
        order: list[str] = []
        try:
            await asyncio.gather(_ask(writer, "a0", "a", order), _ask(writer, "b0", "b", order))
            groups = counts["group"]
            began = time.monotonic()
            await asyncio.wait_for(_ask(writer, "a1", "a", order), LONG)
            return time.monotonic() - began, counts["group"] - groups
        finally:
            await asyncio.to_thread(writer.close)

    spent, groups = asyncio.run(scenario())
    assert spent >= 0.3
    assert spent < LONG
    assert groups == 1


def test_a_sibling_answered_before_the_window_is_not_waited_for(tmp_path: Path) -> None:
    """Once the window has passed, an idle connection is no sibling: nothing waits."""

    async def scenario() -> tuple[float, int]:
        writer = _writer(tmp_path / "state.db", window=0.05)
        counts = tally(writer)
        order: list[str] = []
        try:
            await asyncio.gather(_ask(writer, "a0", "a", order), _ask(writer, "b0", "b", order))
            await asyncio.sleep(0.2)
            began = time.monotonic()
            await asyncio.wait_for(_ask(writer, "a1", "a", order), LONG / 2)
            return time.monotonic() - began, counts["waited"]
        finally:
            await asyncio.to_thread(writer.close)

    spent, waited = asyncio.run(scenario())
    assert waited == 0
    assert spent < LONG / 2


def _number(number: int, _host: object) -> int:
    return number


def test_work_without_a_source_is_nobody_s_sibling(tmp_path: Path) -> None:
    """The timers' work (``submit``) answered a moment ago makes no client's group wait."""

    async def scenario() -> tuple[list[Any], str, int]:
        writer = _writer(tmp_path / "state.db")
        counts = tally(writer)
        try:
            values = [
                await asyncio.wait_for(writer.submit(functools.partial(_number, n)), LONG / 2)
                for n in range(3)
            ]
            answer = await asyncio.wait_for(_ask(writer, "a0", "a", []), LONG / 2)
            return values, answer, counts["waited"]
        finally:
            await asyncio.to_thread(writer.close)

    values, answer, waited = asyncio.run(scenario())
    assert values == [0, 1, 2]
    assert answer == "a0"
    assert waited == 0


def test_the_served_host_names_each_connection_as_its_requests_source() -> None:
    """Through real sockets: a connection answered a moment ago is the sibling a group waits for."""
    with short_dir() as directory:
        db = directory / "state.db"
        open_store(str(db), create=True).close()
        hosted = Hosted(db)
        try:
            writer = hosted.server.writer
            assert writer is not None
            counts = tally(writer)
            writer._window = 600.0
            with hosted.client() as first, hosted.client() as second:
                assert first.request(run_start(1))["outcome"] == "accepted"
                assert second.request(run_start(2))["outcome"] == "accepted"
                writer._delay = LONG  # from now on, long enough to see
                waited = counts["waited"]
                began = time.monotonic()
                first.send(run_start(3))
                time.sleep(0.3)
                second.send(run_start(4))
                answers = [first.response("r-3")[0], second.response("r-4")[0]]
                spent = time.monotonic() - began
                writer._delay = 0.0  # the stop's own groups need not wait
        finally:
            hosted.close()
    assert [answer["outcome"] for answer in answers] == ["accepted", "accepted"]
    assert counts["waited"] == waited + 1
    assert 0.3 <= spent < LONG
