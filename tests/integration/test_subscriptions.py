"""Per-connection subscriptions: revisions, digests, replacement, unwatch (HOST §2.1-§2.12)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from pwf.commands import Context
from pwf.protocol.client import encode_event
from pwf.views import Subscription
from pwf.views.subscriptions import Subscriptions

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._harness import Fixture, start_run
else:
    from _harness import Fixture, start_run


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    fixture = Fixture.f(tmp_path / "s.db")
    yield fixture
    fixture.close()


def _ctx(fx: Fixture) -> Context:
    return Context(fx.store.reader(), lambda _events: None, fx.now)


def test_runs_revision_1_then_nothing_then_2_after_a_run_start(fx: Fixture) -> None:
    subs = Subscriptions("c-1")
    subs.watch(Subscription("runs-1", "runs"))
    [first] = subs.publish(_ctx(fx))
    assert (first.event, first.revision, first.subscription_id) == ("runs", 1, "runs-1")
    assert first.payload["total"] == 1  # type: ignore[index]
    assert subs.publish(_ctx(fx)) == []
    start_run(fx, "run-2", session="s-2", at=2000)
    [second] = subs.publish(_ctx(fx))
    assert second.revision == 2
    assert second.payload["total"] == 2  # type: ignore[index]
    wire = json.loads(encode_event(second))
    assert "runId" not in wire
    assert wire["type"] == "event"


def test_replacing_a_subscription_starts_again_at_1(fx: Fixture) -> None:
    subs = Subscriptions("c-1")
    subs.watch(Subscription("s", "runs"))
    subs.publish(_ctx(fx))
    subs.watch(Subscription("s", "run", "run-1"))
    [event] = subs.publish(_ctx(fx))
    assert (event.event, event.revision, event.run_id) == ("run_snapshot", 1, "run-1")
    assert json.loads(encode_event(event))["runId"] == "run-1"


def test_unwatch_of_any_kind_and_of_an_unknown_id(fx: Fixture) -> None:
    subs = Subscriptions("c-1")
    subs.watch(Subscription("a", "runs"))
    subs.watch(Subscription("b", "session", "s-1"))
    subs.unwatch("nope")
    assert len(subs) == 2
    subs.unwatch("b")
    assert [event.subscription_id for event in subs.publish(_ctx(fx))] == ["a"]


def test_events_follow_insertion_order(fx: Fixture) -> None:
    subs = Subscriptions("c-1")
    subs.watch(Subscription("z", "session", "s-1"))
    subs.watch(Subscription("a", "runs", limit=1))
    events = subs.publish(_ctx(fx))
    assert [(e.subscription_id, e.event) for e in events] == [
        ("z", "session_snapshot"),
        ("a", "runs"),
    ]
    assert events[0].payload["schema"] == "pi-workflows.session-view.v1"  # type: ignore[index]
