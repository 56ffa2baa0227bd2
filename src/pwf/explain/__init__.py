"""Why an interaction or a run is where it is; imports readmodel, store, events, commands, errors.

:func:`explain_interaction` and :func:`explain_run` read the log and the
projections and answer three questions: what touched it (the timeline of
events, each with its batch, time and cause), where it is now (the rows of
the read model), and what it is waiting for (the diagnosis: named rules,
evaluated in a fixed order, each finding naming the seq since which it
holds).  With ``at_seq`` the log up to that seq is folded into an in-memory
database and everything is explained as of that point (ADR 0016).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf.explain._facts import Facts, Log, evaluate
from pwf.explain._interaction import INTERACTION_RULES
from pwf.explain._reading import clock, context, missing, state_at
from pwf.explain._report import Cause, Explanation, Finding, Item
from pwf.explain._run import RUN_RULES, RunFacts
from pwf.explain._state import interaction_state, run_full_state
from pwf.explain._summaries import item, summary
from pwf.explain._timeline import interaction_log, run_log

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.commands import Context, Row
    from pwf.store import EventStore

__all__ = [
    "INTERACTION_RULES",
    "RUN_RULES",
    "Cause",
    "Explanation",
    "Finding",
    "Item",
    "clock",
    "context",
    "diagnose_interaction",
    "diagnose_run",
    "explain_interaction",
    "explain_run",
    "state_at",
    "summary",
]


def explain_interaction(
    store: EventStore,
    request_id: str,
    at_seq: int | None = None,
    now: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Explanation:
    """Timeline, state and diagnosis of one interactive request.

    Raises:
        InputError: the request is not in the log (up to ``at_seq``), or the
            log has no ``at_seq``.
    """
    with state_at(store, at_seq, progress) as (connection, last):
        ctx = context(connection, clock(store, last, now))
        request = ctx.one("SELECT * FROM interactive_requests WHERE request_id = ?", request_id)
        if request is None:
            raise missing("interaction", request_id, at_seq, last)
        entries = interaction_log(store, request, last)
        facts = Facts(ctx, request, Log(entries))
        return Explanation(
            subject="interaction",
            id=request_id,
            at_seq=last,
            now=ctx.now,
            state=interaction_state(facts),
            timeline=tuple(item(entry) for entry in entries),
            diagnosis=evaluate(INTERACTION_RULES, facts),
        )


def explain_run(
    store: EventStore,
    run_id: str,
    at_seq: int | None = None,
    now: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Explanation:
    """Timeline, state and diagnosis of one run.

    Raises:
        InputError: the run is not in the log (up to ``at_seq``), or the log
            has no ``at_seq``.
    """
    with state_at(store, at_seq, progress) as (connection, last):
        ctx = context(connection, clock(store, last, now))
        run = ctx.one("SELECT * FROM runs WHERE run_id = ?", run_id)
        if run is None:
            raise missing("run", run_id, at_seq, last)
        entries = run_log(store, run, last)
        facts = RunFacts(ctx, run, Log(entries))
        return Explanation(
            subject="run",
            id=run_id,
            at_seq=last,
            now=ctx.now,
            state=run_full_state(facts),
            timeline=tuple(item(entry) for entry in entries),
            diagnosis=evaluate(RUN_RULES, facts),
        )


def diagnose_interaction(
    store: EventStore, ctx: Context, request: Row, last: int
) -> tuple[Finding, ...]:
    """The diagnosis of one interactive request read through ``ctx``, up to seq ``last``.

    The same rules as :func:`explain_interaction`, for callers that already
    hold a read transaction (``pwf status`` diagnoses every waiting request).
    """
    entries = interaction_log(store, request, last)
    return evaluate(INTERACTION_RULES, Facts(ctx, request, Log(entries)))


def diagnose_run(store: EventStore, ctx: Context, run: Row, last: int) -> tuple[Finding, ...]:
    """The diagnosis of one run read through ``ctx``, up to seq ``last`` (see above)."""
    entries = run_log(store, run, last)
    return evaluate(RUN_RULES, RunFacts(ctx, run, Log(entries)))
