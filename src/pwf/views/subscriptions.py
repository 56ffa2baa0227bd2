"""A connection's subscriptions and what a publish sends on them (HOST §2.1-§2.6, §2.12).

Pure but for hashing: the served host keeps one :class:`Subscriptions` per
connection, and :meth:`Subscriptions.publish` computes each payload through
a command context and returns the events to write, in insertion order,
only for payloads whose SHA-256 changed since the last one sent.

Given the :class:`Changes` since the last publish (what the events appended
meanwhile touched, read by :func:`changes_since`), a subscription that has
sent a payload is recomputed only when they touched what it shows: the run
list, its run, or its session; and a :class:`Shared` cache computes each
payload once per publish for all the connections that watch it (ADR 0078).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple

from pwf import canonical
from pwf.protocol.client import ClientEvent
from pwf.views._paging import PAGE_ITEMS
from pwf.views.runs import direct_live, list_page, page_size, payload_digest, run_view
from pwf.views.session import session_view

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from pwf.commands import Context
    from pwf.views import Subscription

__all__ = [
    "EVENTS",
    "QUIET",
    "Changes",
    "Shared",
    "Subscriptions",
    "changes_since",
    "lapsed_leases",
    "runs_touched",
]

EVENTS: Final = {"runs": "runs", "run": "run_snapshot", "session": "session_snapshot"}
"""The event each kind of subscription sends."""


QUIET: Final = ("command.recorded", "host.", "run.lease")
"""Event types (or prefixes) that change no view: the command ledger, the host's claim, and
the renewals of live run claims (a view shows whether a lease is live, never when it ends; one
that ends is found by :func:`lapsed_leases`)."""
_SESSION_ONLY: Final = "session."
"""Event types that change their session's view only (coordinators, branch reports)."""


@dataclass(frozen=True)
class Changes:
    """What the events appended since the last publish touched, and whether a clock deadline passed.

    ``everything`` stands for an event that names neither a run nor a
    session (a compaction, a type this module does not know), or for the
    first publish to new watchers: every subscription is recomputed.  A run
    whose liveness changed beside the log is a touched run (:func:`runs_touched`).
    """

    everything: bool = False
    listed: bool = False
    """Some event changed a run, its queue entry, its messages or turns: the run list."""
    runs: frozenset[str] = frozenset()
    sessions: frozenset[str] = frozenset()

    def touch(self, kind: str, target: str | None) -> bool:
        """Whether a subscription of ``kind`` on ``target`` may show something new."""
        if self.everything:
            return True
        if kind == "runs":
            return self.listed
        if kind == "run":
            return target in self.runs
        return target in self.sessions


NOTHING: Final = Changes()


def changes_since(ctx: Context, after: int, head: int) -> Changes:
    """What the events ``after < seq <= head`` touched: read from their indexed columns.

    A run's origin session counts as touched with it, since the session view
    shows the session's run.  Bounded by the events appended meanwhile.
    """
    runs: set[str] = set()
    sessions: set[str] = set()
    everything, listed = False, False
    for row in ctx.all(
        "SELECT type, run_id, session_id FROM events WHERE seq > ? AND seq <= ?", after, head
    ):
        kind, run_id, session_id = row["type"], row["run_id"], row["session_id"]
        if kind.startswith(QUIET):
            continue
        if run_id is not None:
            runs.add(run_id)
            listed = True
        if session_id is not None:
            sessions.add(session_id)
        if run_id is None and session_id is None:
            everything = True
        elif run_id is None and not kind.startswith(_SESSION_ONLY):
            listed = True
    sessions.update(_origin_sessions(ctx, runs))
    return Changes(everything, listed, frozenset(runs), frozenset(sessions))


def runs_touched(ctx: Context, runs: Collection[str], changes: Changes = NOTHING) -> Changes:
    """``changes`` and what a change of ``runs`` beside the log touches (ADR 0116 D3).

    A run whose worker started or stopped, or whose lease ran out, shows
    another status: in its own view, in the run list and in its origin
    session's view, which shows the session's run.
    """
    if not runs or changes.everything:
        return changes
    return Changes(
        listed=True,
        runs=changes.runs | frozenset(runs),
        sessions=changes.sessions | _origin_sessions(ctx, runs),
    )


def lapsed_leases(ctx: Context, after: int, until: int) -> list[str]:
    """The runs whose worker's lease ran out after ``after`` and by ``until`` (epoch ms)."""
    return [
        row["run_id"]
        for row in ctx.all(
            "SELECT run_id FROM run_queue WHERE owner_worker_epoch IS NOT NULL"
            " AND lease_expires_at > ? AND lease_expires_at <= ?",
            after,
            until,
        )
    ]


def _origin_sessions(ctx: Context, runs: Collection[str]) -> frozenset[str]:
    """The origin sessions of ``runs``: their session views show them."""
    sessions: set[str] = set()
    ordered = sorted(runs)
    for first in range(0, len(ordered), 500):
        chunk = ordered[first : first + 500]
        marks = ", ".join("?" for _ in chunk)
        for row in ctx.all(
            f"SELECT DISTINCT origin_session_id FROM runs WHERE run_id IN ({marks})",  # noqa: S608 - marks only
            *chunk,
        ):
            if row["origin_session_id"] is not None:
                sessions.add(row["origin_session_id"])
    return frozenset(sessions)


class _WholeList(NamedTuple):
    """The run list page of the most items a page holds, with its parts' canonical bytes."""

    page: dict[str, object]
    items: list[bytes]
    """Each item's canonical JSON."""
    after: bytes
    """The members after ``items`` and the closing brace: ``,"revision":…}``."""

    def cut(self, size: int) -> tuple[dict[str, object], bytes]:
        """The page of at most ``size`` items, and its canonical JSON.

        A page keeps the newest entries from the front while they fit its
        bytes (:func:`pwf.views._paging.forward_page`), so the page of fewer
        items is the whole page's prefix; the other members do not depend on
        its size, and ``items`` sorts before them.
        """
        items = self.page["items"]
        assert isinstance(items, list)
        page = self.page if len(items) <= size else {**self.page, "items": items[:size]}
        encoded = b"".join((b'{"items":[', b",".join(self.items[:size]), b"]", self.after))
        return page, encoded


@dataclass
class Shared:
    """Payloads computed in one publish, by what they show, for every connection that watches it."""

    payloads: dict[tuple[object, ...], tuple[object, bytes]] = field(default_factory=dict)
    computed: int = 0
    """How many payloads were computed (the tests and the bench read it)."""
    encoded: dict[int, bytes] = field(default_factory=dict)
    """Each payload's canonical JSON, by the payload's ``id``: its digest was taken from these
    bytes, and the events that carry it are written around them, not encoded again."""
    whole_list: _WholeList | None = None
    """The run list page every smaller one is cut from: watches of the run list with many
    limits cost one page, not one each (ADR 0116)."""

    def whole(self, ctx: Context, live: Callable[[Context, str], bool]) -> _WholeList:
        """The run list page of :data:`PAGE_ITEMS` items, made once in a publish."""
        if self.whole_list is None:
            page = list_page(ctx, 0, PAGE_ITEMS, live)
            items = page["items"]
            assert isinstance(items, list)
            rest = canonical.encode({key: value for key, value in page.items() if key != "items"})
            self.whole_list = _WholeList(
                page, [canonical.encode(item) for item in items], b"," + rest[1:]
            )
        return self.whole_list


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

    def __contains__(self, subscription_id: object) -> bool:
        """Whether a subscription of that id is kept."""
        return subscription_id in self._watches

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
        self,
        ctx: Context,
        live: Callable[[Context, str], bool] = direct_live,
        changes: Changes | None = None,
        shared: Shared | None = None,
    ) -> list[ClientEvent]:
        """The events to send now: one per subscription whose payload changed.

        With ``changes``, a subscription that has sent a payload and whose
        inputs they do not touch is not recomputed; ``shared`` computes each
        payload once for all connections of one publish.
        """
        events: list[ClientEvent] = []
        for watch in list(self._watches.values()):
            if (
                changes is not None
                and watch.digest is not None
                and not changes.touch(watch.kind, watch.target)
            ):
                continue
            payload, digest = self._computed(ctx, watch, live, shared)
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

    def sessions(self) -> set[str]:
        """The sessions this connection watches."""
        return {w.target for w in self._watches.values() if w.kind == "session" and w.target}

    def unpublished(self) -> bool:
        """Whether a subscription has not sent its first payload yet."""
        return any(watch.digest is None for watch in self._watches.values())

    def _computed(
        self,
        ctx: Context,
        watch: _Watch,
        live: Callable[[Context, str], bool],
        shared: Shared | None,
    ) -> tuple[object, bytes]:
        # A session's view depends on who looks (its coordinator's connection or a viewer);
        # a run list page on how many items it may hold.
        key = (
            watch.kind,
            watch.target,
            page_size(watch.limit) if watch.kind == "runs" else None,
            self.connection_id if watch.kind == "session" else None,
        )
        if shared is not None and key in shared.payloads:
            return shared.payloads[key]
        if shared is None:
            payload = self._payload(ctx, watch, live)
            return payload, payload_digest(payload)
        if watch.kind == "runs":
            payload, encoded = shared.whole(ctx, live).cut(page_size(watch.limit))
        else:
            payload = self._payload(ctx, watch, live)
            encoded = canonical.encode(payload)
        found = shared.payloads[key] = (payload, hashlib.sha256(encoded).digest())
        shared.encoded[id(payload)] = encoded
        shared.computed += 1
        return found

    def _payload(self, ctx: Context, watch: _Watch, live: Callable[[Context, str], bool]) -> object:
        if watch.kind == "runs":
            return list_page(ctx, 0, watch.limit, live)
        assert watch.target is not None
        if watch.kind == "run":
            return run_view(ctx, watch.target, live=live)
        return session_view(ctx, watch.target, connection=self.connection_id, live=live)
