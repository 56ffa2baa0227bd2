"""The view payloads of the 0.16 protocol, read from the projections (HOST §2).

Imports commands (the context, payload checks, the session rules), events
and errors; reads only.  The operations answered here need no connection:
``view.runs.page``, ``view.run.get``, ``view.page`` and ``channel.status``.
The subscription operations check their payloads with the functions here
and keep their subscriptions on the served host's connections; the status
reads that need the database file (``state.status``, ``state.verify``) are
answered at the edge, where the store is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from pwf.commands import Result, refuse
from pwf.commands.payload import positive_int
from pwf.protocol.schemas import ChannelStatus, receipt
from pwf.views.content import view_content_of_run
from pwf.views.runs import direct_live, list_page, run_view
from pwf.views.session import session_view

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context
    from pwf.protocol.client import ClientRequest

__all__ = [
    "PAGE_KINDS",
    "READS",
    "RUN_PAGE_SCHEMA",
    "Subscription",
    "channel_status",
    "list_page",
    "run_page",
    "run_view",
    "session_view",
    "subscription_of",
    "unwatch_id",
    "view_page",
    "view_run_get",
    "view_runs_page",
]

RUN_PAGE_SCHEMA: Final = "pi-workflows.run-page.v1"
PAGE_KINDS: Final = (
    "steps",
    "trace",
    "trace_at_step",
    "session_entries",
    "session_events",
    "settings",
    "follow_ups",
    "updates",
)
NOT_FOUND: Final = "Workflow run not found"
_MAX_SAFE: Final = 2**53 - 1


# ------------------------------------------------------------------ payload checks (§2)


def _record(request: ClientRequest) -> dict[str, object]:
    if not isinstance(request.payload, dict):
        raise refuse(f"{request.operation} payload must be an object")
    return request.payload


def _text(payload: dict[str, object], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise refuse(f"{name} must be text")
    return value


def _non_negative(payload: dict[str, object], name: str) -> int:
    value = payload.get(name)
    if type(value) is not int or not 0 <= value <= _MAX_SAFE:
        raise refuse(f"{name} must be a non-negative integer")
    return value


def _positive(payload: dict[str, object], name: str) -> int:
    value = positive_int(payload.get(name))
    if value is None:
        raise refuse(f"{name} must be a positive integer")
    return value


def _run_id(request: ClientRequest) -> str:
    if request.run_id is None:
        raise refuse(f"{request.operation} requires runId")
    return request.run_id


# ------------------------------------------------------------------ subscriptions (§2.1-§2.5)


class Subscription(NamedTuple):
    """What a watch asks for: its id, kind (runs, run, session), target and list limit."""

    id: str
    kind: str
    target: str | None = None
    limit: int | None = None


def subscription_of(
    ctx: Context, request: ClientRequest, live: Callable[[Context, str], bool] = direct_live
) -> Subscription | Result:
    """The subscription ``view.runs.watch`` or ``view.run.watch`` asks for, checked in order.

    ``view.run.watch`` checks its ``runId`` and the run first and answers
    ``notFound`` without a subscription; then the payload, as any watch.
    """
    target = None
    kind = "runs"
    if request.operation == "view.run.watch":
        kind, target = "run", _run_id(request)
        if run_view(ctx, target, live=live) is None:
            return Result(outcome="notFound", error=NOT_FOUND)
    payload = _record(request)
    subscription_id = _text(payload, "subscriptionId")
    limit = None
    if kind == "runs" and payload.get("limit") is not None:
        limit = _positive(payload, "limit")
    return Subscription(subscription_id, kind, target, limit)


def unwatch_id(request: ClientRequest) -> str:
    """The id ``view.run.unwatch`` removes; it answers ``{subscribed:false}`` for any id."""
    return _text(_record(request), "subscriptionId")


# ------------------------------------------------------------------ reads


def view_runs_page(
    ctx: Context, request: ClientRequest, live: Callable[[Context, str], bool] = direct_live
) -> Result:
    """``view.runs.page`` ``{revision, cursor, limit?}``: the page, or ``conflict`` with it."""
    payload = _record(request)
    revision = _text(payload, "revision")
    cursor = _non_negative(payload, "cursor")
    limit = None if payload.get("limit") is None else _positive(payload, "limit")
    page = list_page(ctx, cursor, limit, live)
    if page["revision"] == revision:
        return Result(receipt=page)
    return Result(outcome="conflict", receipt=page, error="Workflow run list changed while paging")


def view_run_get(
    ctx: Context, request: ClientRequest, live: Callable[[Context, str], bool] = direct_live
) -> Result:
    """``view.run.get``: the run view, its revision as the response's (§2.9)."""
    view = run_view(ctx, _run_id(request), live=live)
    if view is None:
        return Result(outcome="notFound", error=NOT_FOUND)
    return Result(receipt=view, revision=_revision(view))


def _revision(view: dict[str, object]) -> int:
    """A run view's revision: the run row's INTEGER ``revision`` column."""
    revision = view["revision"]
    assert isinstance(revision, int)
    return revision


def run_page(view: dict[str, object], kind: str, cursor: int) -> dict[str, object]:
    """The ``pi-workflows.run-page.v1`` receipt of one kind, cut from a run view (§2.10)."""
    page: dict[str, object] = {
        "cursor": cursor,
        "kind": kind,
        "revision": view["revision"],
        "runId": view["runId"],
        "schema": RUN_PAGE_SCHEMA,
    }
    session = view["session"]
    assert isinstance(session, dict)
    if kind == "steps":
        state = view["state"]
        assert isinstance(state, dict)
        page |= {
            "graphCursor": view["graphCursor"],
            "graphSteps": view["graphSteps"],
            "items": state["steps"],
            "start": view["stepStart"],
            "takenTransitions": view["takenTransitions"],
            "total": view["stepTotal"],
        }
    elif kind in ("trace", "trace_at_step"):
        trace = view["tracePage"]
        assert isinstance(trace, dict)
        page |= trace
    elif kind == "session_entries":
        page |= session["entryPage"]
    elif kind == "session_events":
        page |= session["eventPage"] | {"replayCheckpoint": session["replayCheckpoint"]}
    elif kind == "settings":
        page |= {
            "items": view["settingsScopes"],
            "start": view["settingsStart"],
            "total": view["settingsTotal"],
        }
    elif kind == "follow_ups":
        queue = view["followUpQueue"]
        items = queue["items"] if isinstance(queue, dict) else []
        page |= {"items": items, "start": view["followUpStart"], "total": view["followUpTotal"]}
    else:
        page |= {
            "items": view["updates"],
            "start": view["updateStart"],
            "total": view["updateTotal"],
        }
    return page


def view_page(
    ctx: Context, request: ClientRequest, live: Callable[[Context, str], bool] = direct_live
) -> Result:
    """``view.page`` ``{kind, cursor}``: the window of one history around a cursor (§2.10)."""
    payload = _record(request)
    kind = _text(payload, "kind")
    if kind not in PAGE_KINDS:
        raise refuse("view.page kind is invalid")
    run_id = _run_id(request)
    cursor = _non_negative(payload, "cursor")
    view = run_view(ctx, run_id, (kind, cursor), live)
    if view is None:
        return Result(outcome="notFound", error=NOT_FOUND)
    return Result(receipt=run_page(view, kind, cursor), revision=_revision(view))


def channel_status(_ctx: Context, _request: ClientRequest) -> Result:
    """``channel.status``: pwf has no decision channels, so none is configured (§2.15)."""
    return Result(
        receipt=receipt(ChannelStatus(ambiguous=[], configured=False, error=None, profiles=[]))
    )


READS: Final[dict[str, Callable[[Context, ClientRequest], Result]]] = {
    "view.runs.page": view_runs_page,
    "view.run.get": view_run_get,
    "view.page": view_page,
    "view.content": view_content_of_run,
    "channel.status": channel_status,
}
"""The reads any mode answers from the projections alone."""
