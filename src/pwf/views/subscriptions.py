"""A connection's subscriptions and what a publish sends on them (HOST §2.1-§2.6, §2.12).

Pure but for hashing: the served host keeps one :class:`Subscriptions` per
connection, and :meth:`Subscriptions.publish` computes each payload through
a command context and returns the events to write, in insertion order,
only for payloads whose SHA-256 changed since the last one sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pwf.protocol.client import ClientEvent
from pwf.views.runs import direct_live, list_page, payload_digest, run_view
from pwf.views.session import session_view

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context
    from pwf.views import Subscription

__all__ = ["EVENTS", "Subscriptions"]

EVENTS: Final = {"runs": "runs", "run": "run_snapshot", "session": "session_snapshot"}
"""The event each kind of subscription sends."""


@dataclass
class _Watch:
    id: str
    kind: str
    target: str | None
    limit: int | None
    revision: int = 0
    digest: bytes | None = None


class Subscriptions:
    """The subscriptions of one connection, by id, in the order they were made."""

    def __init__(self, connection_id: str) -> None:
        """No subscriptions yet."""
        self.connection_id = connection_id
        self._watches: dict[str, _Watch] = {}

    def __len__(self) -> int:
        """How many subscriptions there are."""
        return len(self._watches)

    def kinds(self) -> list[str]:
        """The kind of each subscription, in order (one copy: another thread may read it)."""
        return [watch.kind for watch in list(self._watches.values())]

    def watch(self, wanted: Subscription) -> None:
        """Add a subscription; an id already present is replaced (revision 0, no digest)."""
        self._watches[wanted.id] = _Watch(wanted.id, wanted.kind, wanted.target, wanted.limit)

    def unwatch(self, subscription_id: str) -> None:
        """Remove a subscription of any kind; an unknown id changes nothing."""
        self._watches.pop(subscription_id, None)

    def clear(self) -> None:
        """The connection closed: nothing survives it."""
        self._watches.clear()

    def publish(
        self, ctx: Context, live: Callable[[Context, str], bool] = direct_live
    ) -> list[ClientEvent]:
        """The events to send now: one per subscription whose payload changed."""
        events: list[ClientEvent] = []
        for watch in list(self._watches.values()):
            payload = self._payload(ctx, watch, live)
            digest = payload_digest(payload)
            if digest == watch.digest:
                continue
            watch.revision += 1
            watch.digest = digest
            events.append(
                ClientEvent(
                    subscription_id=watch.id,
                    event=EVENTS[watch.kind],
                    revision=watch.revision,
                    run_id=watch.target if watch.kind == "run" else None,
                    payload=payload,
                )
            )
        return events

    def _payload(self, ctx: Context, watch: _Watch, live: Callable[[Context, str], bool]) -> object:
        if watch.kind == "runs":
            return list_page(ctx, 0, watch.limit, live)
        assert watch.target is not None
        if watch.kind == "run":
            return run_view(ctx, watch.target, live=live)
        return session_view(ctx, watch.target, connection=self.connection_id, live=live)
