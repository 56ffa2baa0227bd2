"""The operations answered without ``host_commands`` in direct mode (HOST.md §2, §2.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._harness import Fixture
else:
    from _harness import Fixture

SERVED = ["view.runs.watch", "view.run.watch", "view.run.unwatch"]
"""The subscription operations: they need a connection of the served host."""


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    fixture = Fixture.f(tmp_path / "s.db")
    yield fixture
    fixture.close()


@pytest.mark.parametrize("operation", SERVED)
def test_served_operations_are_unavailable_in_direct_mode(fx: Fixture, operation: str) -> None:
    """Each answers ``unavailable`` with one line naming the operation, and records nothing."""
    before = fx.events()
    response = fx.request(operation, {"subscriptionId": "sub-1"}, run_id="run-1")
    assert "unavailable" == response.outcome
    assert response.error is not None
    assert operation in response.error
    assert "\n" not in response.error
    assert before == fx.events()


class TestSessionWatch:
    """``view.session.watch`` ``{subscriptionId, sessionId, coordinator?}`` in the order of §2.4."""

    @pytest.mark.parametrize(
        ("payload", "error"),
        [
            ([], "view.session.watch payload must be an object"),
            ("s-1", "view.session.watch payload must be an object"),
            ({"subscriptionId": "v"}, "sessionId must be text"),
            ({"subscriptionId": "v", "sessionId": ""}, "sessionId must be text"),
            ({"subscriptionId": "v", "targetSessionId": "s-1"}, "sessionId must be text"),
            ({"sessionId": 5}, "sessionId must be text"),
            ({"sessionId": "s-1"}, "subscriptionId must be text"),
            ({"sessionId": "s-1", "subscriptionId": ""}, "subscriptionId must be text"),
            (
                {"sessionId": "s-1", "subscriptionId": "v", "coordinator": "yes"},
                "view.session.watch coordinator must be a boolean",
            ),
            (
                {"sessionId": "s-1", "subscriptionId": "v", "coordinator": 1},
                "view.session.watch coordinator must be a boolean",
            ),
            (
                {"sessionId": "s-1", "subscriptionId": "v", "coordinator": None},
                "view.session.watch coordinator must be a boolean",
            ),
        ],
    )
    def test_refusals_in_order(self, fx: Fixture, payload: object, error: str) -> None:
        """Each failing check is a one-line rejection and appends nothing."""
        before = fx.events()
        response = fx.request("view.session.watch", payload)
        assert ("rejected", error) == (response.outcome, response.error)
        assert before == fx.events()

    @pytest.mark.parametrize("coordinator", [False, None])
    def test_a_viewer_subscribes_without_attaching(self, fx: Fixture, coordinator: object) -> None:
        """``coordinator`` absent or false: ``{subscribed:true}`` and no coordinator."""
        payload: dict[str, object] = {"sessionId": "s-1", "subscriptionId": "v"}
        if coordinator is False:
            payload["coordinator"] = False
        before = fx.events()
        response = fx.request("view.session.watch", payload)
        assert ("accepted", {"subscribed": True}) == (response.outcome, response.receipt)
        assert before == fx.events()
        assert 0 == fx.count("session_coordinators")

    def test_a_coordinator_attaches_and_fences_the_previous_one(self, fx: Fixture) -> None:
        """``coordinator:true`` installs an epoch ``session-epoch-…`` and answers it."""
        payload = {"sessionId": "s-1", "subscriptionId": "v", "coordinator": True}
        first = fx.request("view.session.watch", {**payload, "connectionId": "C1"})
        second = fx.request("view.session.watch", {**payload, "connectionId": "C2"})
        for response in (first, second):
            assert "accepted" == response.outcome
            assert isinstance(response.receipt, dict)
            assert {"coordinatorEpoch", "subscribed"} == set(response.receipt)
            assert response.receipt["subscribed"] is True
            assert str(response.receipt["coordinatorEpoch"]).startswith("session-epoch-")
        live = fx.existing("session_coordinators", target_session_id="s-1")
        assert second.receipt["coordinatorEpoch"] == live["coordinator_epoch"]  # type: ignore[index]
        assert first.receipt != second.receipt
        assert 0 == fx.count("host_commands", operation="view.session.watch")
        view = fx.host.session_view("s-1", fx.now, live["coordinator_epoch"])
        assert live["coordinator_epoch"] == view["coordinatorEpoch"]
        fx.assert_rebuild_equals_live()
