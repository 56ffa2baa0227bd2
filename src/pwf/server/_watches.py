"""How many subscriptions a host keeps: a bound for the host, half per client process (ADR 0124).

Every publish looks at every subscription, on the writer's thread.  Without
a bound one connection made 81 000 ``view.runs.watch`` subscriptions in 20 s,
and each change then held the writer half a second: every request waited
behind it, and a few minutes more would have held it past a claim's lease.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pwf.views import Subscription
    from pwf.views.subscriptions import Subscriptions

__all__ = ["MOST_SUBSCRIPTIONS", "WatchBound"]

MOST_SUBSCRIPTIONS: Final = 16_384
"""Subscriptions a host keeps at once, over every connection; one client process half."""


class WatchBound:
    """The subscriptions the host keeps, in all and per client process."""

    def __init__(self, most: int = MOST_SUBSCRIPTIONS) -> None:
        """None kept yet; at most ``most`` at once."""
        self.most = most
        self.total = 0
        self._peers: collections.Counter[int] = collections.Counter()

    def refusal(self, peer: int | None) -> str | None:
        """Why one more subscription of ``peer``'s is refused, or None when there is room."""
        if self.total >= self.most:
            return f"Workflow host keeps at most {self.most} subscriptions; unwatch one first"
        if peer is not None and self._peers[peer] >= self.most // 2:
            return (
                f"Workflow host keeps at most {self.most // 2} subscriptions of one client"
                " process; unwatch one first"
            )
        return None

    def added(self, peer: int | None) -> None:
        """One subscription more for ``peer``."""
        self.total += 1
        if peer is not None:
            self._peers[peer] += 1

    def removed(self, peer: int | None, count: int = 1) -> None:
        """``count`` subscriptions of ``peer`` ended."""
        self.total -= count
        if peer is not None:
            self._peers[peer] -= count
            if self._peers[peer] <= 0:
                del self._peers[peer]

    def watch(self, kept: Subscriptions, peer: int | None, wanted: Subscription) -> str | None:
        """Add ``wanted`` to a connection's ``kept`` unless the bound refuses a new id; why not."""
        if wanted.id not in kept:
            refused = self.refusal(peer)
            if refused is not None:
                return refused
            self.added(peer)
        kept.watch(wanted)
        return None

    def unwatch(self, kept: Subscriptions, peer: int | None, subscription_id: str) -> None:
        """End one of a connection's ``kept`` subscriptions (an unknown id changes nothing)."""
        if subscription_id in kept:
            self.removed(peer)
            kept.unwatch(subscription_id)
