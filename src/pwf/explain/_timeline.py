"""Timelines: the log entries that touched an interaction or a run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.events import (
    AttemptChanged,
    AttemptStarted,
    BranchReported,
    CommandRecorded,
    CoordinatorAttached,
    CoordinatorDetached,
    DeadlineShifted,
    MessageCreated,
    RunClaimed,
    RunFinished,
    RunPaused,
    RunQueueDoneForContinuation,
    RunResumed,
    RunStarted,
    RunWaiting,
    WorkerEnded,
    WorkerMessageRecorded,
    open_body,
)
from pwf.explain._summaries import refusal

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pwf.commands import Row
    from pwf.events import Entry
    from pwf.store import EventStore

__all__ = ["interaction_log", "run_log"]

_SESSION_EVENTS: Final = (CoordinatorAttached, CoordinatorDetached, BranchReported)
"""The session's events a timeline reads besides the run's own."""
_SESSION_TYPES: Final = tuple(kind.TAG for kind in _SESSION_EVENTS)
_RUN_STATES: Final = (RunClaimed, RunStarted, RunResumed, RunFinished)
"""The run's events after which it is under way again, or finished."""
_RUN_TYPES: Final = (
    *_SESSION_EVENTS,
    RunClaimed,
    RunStarted,
    RunWaiting,
    RunPaused,
    RunResumed,
    RunFinished,
    RunQueueDoneForContinuation,
    WorkerEnded,
)
"""Run and session events an interaction's timeline shows from its attempt's start on."""


def _events(  # noqa: PLR0913 - one keyword per lookup column
    store: EventStore,
    last: int,
    *,
    run_id: str | None = None,
    session_id: str | None = None,
    kind: str | None = None,
    after: int = 0,
) -> Iterator[Entry]:
    found = store.find(after=after, until=last, run_id=run_id, session_id=session_id, type=kind)
    for stored in found:
        if stored.seq > last:
            return
        yield open_body(stored.body)


def _session_end(own: list[Entry], last: int) -> int:
    """Up to which seq the run's session events bear on the run.

    A finished run (its last ``run.finished`` after its last claim, start
    or resume) is touched by nothing its session's coordinator does after
    the run's own last event, so its session events stop there; a run under
    way is explained up to ``last`` (ADR 0085).
    """
    state = [entry for entry in own if isinstance(entry.event, _RUN_STATES)]
    if state and isinstance(state[-1].event, RunFinished):
        return own[-1].seq
    return last


def _relevant(entry: Entry, request: Row, messages: set[str], start: int) -> bool:
    """Whether an event of the request's run or session touched the request."""
    event = entry.event
    request_id = request["request_id"]
    if isinstance(event, MessageCreated) and event.source_id == request_id:
        messages.add(event.workflow_message_id)
    if getattr(event, "request_id", None) == request_id and not isinstance(event, CommandRecorded):
        return True
    if getattr(event, "workflow_message_id", None) in messages:
        return True
    if isinstance(event, AttemptStarted | AttemptChanged | DeadlineShifted):
        return bool(event.attempt_id == request["attempt_id"])
    if entry.seq < start:
        return False
    if isinstance(event, CommandRecorded | WorkerMessageRecorded):
        return refusal(entry)
    return isinstance(event, _RUN_TYPES)


def interaction_log(store: EventStore, request: Row, last: int) -> list[Entry]:
    """The entries up to ``last`` that touched the request, in seq order.

    The session's events before the attempt started touch nothing the
    timeline shows, so they are not read: a long-lived session's history
    costs nothing here (ADR 0077).
    """
    run_events = list(_events(store, last, run_id=request["run_id"]))
    started = next(
        (
            entry.seq
            for entry in run_events
            if isinstance(entry.event, AttemptStarted)
            and entry.event.attempt_id == request["attempt_id"]
        ),
        None,
    )
    session_events = [
        entry
        for kind in _SESSION_TYPES
        for entry in _events(
            store,
            _session_end(run_events, last),
            session_id=request["target_session_id"],
            kind=kind,
            after=0 if started is None else started - 1,
        )
    ]
    entries = sorted(run_events + session_events, key=lambda entry: entry.seq)
    start = started if started is not None else (entries[0].seq if entries else 0)
    messages: set[str] = set()
    return [entry for entry in entries if _relevant(entry, request, messages, start)]


def run_log(store: EventStore, run: Row, last: int) -> list[Entry]:
    """The run's entries up to ``last`` (refused records only) and its session's."""
    own = list(_events(store, last, run_id=run["run_id"]))
    entries = [entry for entry in own if refusal(entry)]
    session = run["origin_session_id"]
    if session is not None and entries:
        start, end = entries[0].seq, _session_end(own, last)
        entries += [
            entry
            for kind in _SESSION_TYPES
            for entry in _events(store, end, session_id=session, kind=kind, after=start - 1)
        ]
    return sorted(entries, key=lambda entry: entry.seq)
