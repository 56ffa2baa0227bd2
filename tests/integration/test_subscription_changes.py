"""Subscriptions are recomputed only when new events touched what they show (ADR 0078).

:func:`pwf.views.subscriptions.changes_since` reads which runs and sessions
new events touched; :meth:`Subscriptions.publish` given those changes skips
a subscription whose inputs they do not touch and computes each payload
once for every connection that watches it.  The served host then spends
nothing while nothing changes: many watchers of the run list on an idle
host cost it no processor time, and a run started on one connection is
pushed to a watcher on another.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pwf.commands import Context, supervision
from pwf.views import Subscription
from pwf.views.subscriptions import Changes, Shared, Subscriptions, changes_since

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.integration._harness import Fixture, run_worker, start_run
    from tests.integration._served import Served, init, line, short_dir
else:
    from _harness import Fixture, run_worker, start_run
    from _served import Served, init, line, short_dir


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    fixture = Fixture.f(tmp_path / "s.db")
    yield fixture
    fixture.close()


def _ctx(fx: Fixture) -> Context:
    return Context(fx.store.reader(), lambda _events: None, fx.now)


def _head(fx: Fixture) -> int:
    return int(fx.store.head().seq)


def test_a_run_start_touches_the_list_the_run_and_its_origin_session(fx: Fixture) -> None:
    before = _head(fx)
    start_run(fx, "run-2", session="s-2", at=2000)
    changes = changes_since(_ctx(fx), before, _head(fx))
    assert changes == Changes(listed=True, runs=frozenset({"run-2"}), sessions=frozenset({"s-2"}))
    assert changes.touch("runs", None)
    assert changes.touch("run", "run-2")
    assert not changes.touch("run", "run-1")
    assert changes.touch("session", "s-2")
    assert not changes.touch("session", "s-1")
    assert changes_since(_ctx(fx), _head(fx), _head(fx)) == Changes()


def test_a_recorded_status_request_touches_nothing(fx: Fixture) -> None:
    before = _head(fx)
    assert fx.request("run.status", None, run_id="run-1").outcome == "accepted"
    assert _head(fx) > before  # it is recorded, as the original records it
    assert changes_since(_ctx(fx), before, _head(fx)) == Changes()


def test_a_heartbeat_s_renewals_touch_nothing(tmp_path: Path) -> None:
    """ADR 0119: one event renews every held claim and names no run; no view shows a lease's end.

    Read as an event about no run or session, it would have every subscription recomputed on
    every heartbeat.
    """
    fx = Fixture.running(tmp_path / "r.db")
    try:
        epoch = fx.epoch
        assert epoch is not None
        before = _head(fx)
        held = [("run-1", epoch)]
        renew = functools.partial(supervision.renew_claims, held=held, lease_ms=30_000)
        assert fx.host.supervise("worker.renew", 1_500, renew) == []
        assert fx.events("run.leases_renewed") == 1
        assert changes_since(_ctx(fx), before, _head(fx)) == Changes()
    finally:
        fx.close()


def test_only_touched_subscriptions_are_recomputed_and_each_payload_once(fx: Fixture) -> None:
    start_run(fx, "run-2", session="s-2", at=2000)
    connections = [Subscriptions(f"c-{n}") for n in range(5)]
    for subscriptions in connections:
        subscriptions.watch(Subscription("list", "runs"))
        subscriptions.watch(Subscription("one", "run", "run-1"))
    shared = Shared()
    first = [s.publish(_ctx(fx), changes=Changes(), shared=shared) for s in connections]
    assert [len(events) for events in first] == [2] * 5  # new subscriptions always send
    assert shared.computed == 2  # the list and the run, once for five connections

    before = _head(fx)
    start_run(fx, "run-3", session="s-3", at=3000)
    changes = changes_since(_ctx(fx), before, _head(fx))
    shared = Shared()
    second = [s.publish(_ctx(fx), changes=changes, shared=shared) for s in connections]
    assert shared.computed == 1  # run-1 was not touched: only the list is recomputed
    assert [[(e.subscription_id, e.revision) for e in events] for events in second] == [
        [("list", 2)]
    ] * 5

    shared = Shared()
    assert [s.publish(_ctx(fx), changes=Changes(), shared=shared) for s in connections] == [[]] * 5
    assert shared.computed == 0


def test_run_list_watches_of_many_limits_are_cut_from_one_page(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each limit's page is the one :func:`list_page` gives it, byte for byte; one page is read.

    Before ADR 0116 a publish read one page for each limit watched: one client
    watching the run list with 256 limits held a writer 88 ms per publish at
    100 000 events, and a sequential writer's rate fell from 900 to 9 a second.
    """
    for number in range(2, 181):  # past the 64 KiB a page holds: the byte cut matters
        start_run(fx, f"run-{number:03}", session=f"s-{number}", at=1000 + number)
    from pwf import canonical  # noqa: PLC0415
    from pwf.views import subscriptions as module  # noqa: PLC0415
    from pwf.views.runs import list_page, payload_digest  # noqa: PLC0415

    limits = [1, 2, 5, 100, 150, 255, 256, 300, None]
    expected = {limit: list_page(_ctx(fx), 0, limit) for limit in limits}
    whole_items = expected[None]["items"]
    assert isinstance(whole_items, list)
    assert 100 < len(whole_items) < 180  # the page was cut by its bytes

    pages = 0

    def counted(*args: Any, **kwargs: Any) -> dict[str, object]:
        nonlocal pages
        pages += 1
        return list_page(*args, **kwargs)

    monkeypatch.setattr(module, "list_page", counted)
    subscriptions = Subscriptions("c-1")
    for limit in limits:
        subscriptions.watch(Subscription(f"list-{limit}", "runs", limit=limit))
    shared = Shared()
    events = subscriptions.publish(_ctx(fx), changes=Changes(), shared=shared)
    assert pages == 1
    assert [event.subscription_id for event in events] == [f"list-{limit}" for limit in limits]
    for limit, event in zip(limits, events, strict=True):
        assert event.payload == expected[limit], limit
        assert shared.encoded[id(event.payload)] == canonical.encode(expected[limit])
        assert shared.payloads[("runs", None, min(limit or 256, 256), None)][1] == payload_digest(
            expected[limit]
        )


def _plan(
    watched: dict[str, Subscriptions],
    seen: int,
    *,
    flipped: frozenset[str] = frozenset(),
    lapsed: tuple[int, int] | None = None,
) -> Any:
    from pwf.server._subscriptions import _Plan  # noqa: PLC0415 - the served host's own

    return _Plan(
        everything=seen < 0,
        seen=seen,
        woke=frozenset(),
        subscriptions=watched,
        owed=frozenset(),
        flipped=flipped,
        lapsed=lapsed,
    )


def test_a_worker_that_starts_or_stops_recomputes_its_run_alone(fx: Fixture) -> None:
    """ADR 0116 D3: a change of the live workers touches their runs, not every subscription.

    Before, it recomputed every subscription of every connection: 500 watchers
    of 2 000 finished runs made a served host with workers start 22 runs a
    second instead of 99.
    """
    from pwf.server._subscriptions import _published  # noqa: PLC0415 - the served host's own

    start_run(fx, "run-2", session="s-2", at=2000)
    watched = {f"c-{run}": Subscriptions(f"c-{run}") for run in ("run-1", "run-2")}
    for connection, subscriptions in watched.items():
        subscriptions.watch(Subscription("one", "run", connection[2:]))
        subscriptions.watch(Subscription("list", "runs"))
    session = Subscriptions("c-session")
    session.watch(Subscription("mine", "session", "s-2"))
    watched["c-session"] = session
    active: set[str] = set()

    def live(_ctx: Context, run: str) -> bool:
        return run in active

    first = _published(_ctx(fx), _plan(watched, -1), live)
    assert first.shared.computed == 4  # two runs, the list, the session
    active.add("run-2")
    second = _published(_ctx(fx), _plan(watched, _head(fx), flipped=frozenset({"run-2"})), live)
    assert second.shared.computed == 3  # run-2, the list and s-2's view; not run-1
    assert second.events["c-run-1"][0].subscription_id == "list"
    (one, _list) = second.events["c-run-2"]
    assert (one.subscription_id, one.revision) == ("one", 2)
    assert isinstance(one.payload, dict)
    assert one.payload["live"] is True
    assert [event.subscription_id for event in second.events["c-session"]] == ["mine"]
    nothing = _published(_ctx(fx), _plan(watched, _head(fx)), live)
    assert nothing.shared.computed == 0


def test_a_lease_that_runs_out_recomputes_its_run_alone(fx: Fixture) -> None:
    """Direct liveness (no supervisor): a run whose worker's lease ran out shows another status."""
    from pwf.server._subscriptions import _published  # noqa: PLC0415 - the served host's own
    from pwf.views.runs import direct_live  # noqa: PLC0415

    start_run(fx, "run-2", session="s-2", at=2000)
    fx.launch(run_id="run-2", at=3000)
    run_worker(fx, "run-2", "worker.ready", {}, rev=0, at=3000)
    lease = _ctx(fx).value("SELECT lease_expires_at FROM run_queue WHERE run_id = 'run-2'")
    assert isinstance(lease, int)
    watched = {f"c-{run}": Subscriptions(f"c-{run}") for run in ("run-1", "run-2")}
    for connection, subscriptions in watched.items():
        subscriptions.watch(Subscription("one", "run", connection[2:]))
    before = Context(fx.store.reader(), lambda _events: None, lease - 1)
    first = _published(before, _plan(watched, -1), direct_live)
    shown = first.events["c-run-2"][0].payload["display"]  # type: ignore[index]
    assert (shown["status"], shown["activity"]) == ("running", "supervised_worker")
    assert first.lease == lease
    after = Context(fx.store.reader(), lambda _events: None, lease + 1)
    second = _published(
        after, _plan(watched, _head(fx), lapsed=(lease - 1, lease + 1)), direct_live
    )
    assert second.shared.computed == 1  # run-2 alone
    assert second.events["c-run-1"] == []
    (changed,) = second.events["c-run-2"]
    assert changed.revision == 2
    assert changed.payload["display"]["activity"] != "supervised_worker"  # type: ignore[index]


def test_a_line_made_around_a_shared_payload_is_the_event_encoded_whole(fx: Fixture) -> None:
    from pwf.protocol.client import encode_event, encode_line  # noqa: PLC0415
    from pwf.server._subscriptions import _Lines  # noqa: PLC0415 - the served host's own helper

    subscriptions = Subscriptions("c-1")
    subscriptions.watch(Subscription('list \u00e9 "payload":', "runs", limit=3))
    subscriptions.watch(Subscription("one", "run", "run-1"))
    lines = _Lines()
    events = subscriptions.publish(_ctx(fx))
    assert len(events) == 2
    for event in events:
        assert lines.line(event) == encode_line(encode_event(event))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(client: Any, run_id: str) -> dict[str, Any]:
    payload = {
        "definitionDigest": "d1", "definitionSnapshot": {}, "input": {},
        "originSessionId": f"s-{run_id}", "projectPath": "/srv/p", "workflowName": "echo",
        "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
        "workflowSourceRef": "builtin:echo",
    }  # fmt: skip
    return dict(client.request(line("run.start", payload, rid=f"start-{run_id}", run_id=run_id)))


WATCHERS = 20
RUNS = 60


def test_idle_watchers_cost_the_host_nothing_and_a_change_reaches_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PWF_WORKER_COMMAND", raising=False)
    with short_dir() as place:
        init(place / "s.db")
        host = Served(place / "s.db")
        try:
            with host.client() as writer:
                for number in range(RUNS):
                    assert _start(writer, f"run-{number}")["outcome"] == "accepted"
                watchers = [host.client() for _ in range(WATCHERS)]
                try:
                    for number, watcher in enumerate(watchers):
                        watch = line("view.runs.watch", {"subscriptionId": "l"}, rid=f"w-{number}")
                        assert watcher.request(watch)["outcome"] == "accepted"
                        first = next(watcher.events(timeout=30))
                        assert (first["event"], first["revision"]) == ("runs", 1)
                    time.sleep(0.5)  # the last answers' publishes settle
                    pid = host.process.pid
                    before = _cpu_seconds(pid)
                    time.sleep(2.0)
                    idle = _cpu_seconds(pid) - before
                    # Before ADR 0078 every watcher's list was rebuilt every 250 ms.
                    assert idle <= 0.05, f"an idle host spent {idle:.2f} s of CPU in 2 s"
                    assert _start(writer, "run-new")["outcome"] == "accepted"
                    for watcher in watchers:
                        event = next(watcher.events(timeout=30))
                        assert (event["event"], event["revision"]) == ("runs", 2)
                        assert event["payload"]["total"] == RUNS + 1  # type: ignore[index]
                        assert list(watcher.events(timeout=0.05)) == []
                finally:
                    for watcher in watchers:
                        watcher.close()
        finally:
            host.close()
