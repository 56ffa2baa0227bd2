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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from pwf.explain._facts import Facts, Log, evaluate
from pwf.explain._interaction import INTERACTION_RULES
from pwf.explain._reading import clock, context, missing, state_at
from pwf.explain._report import Cause, Explanation, Finding, Item
from pwf.explain._run import RUN_RULES, RunFacts
from pwf.explain._state import interaction_state, run_full_state
from pwf.explain._summaries import item, summary
from pwf.explain._timeline import interaction_log, run_log

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pwf.commands import Context, Row
    from pwf.events import Entry
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

T = TypeVar("T")


@dataclass(frozen=True)
class _Subject(Generic[T]):
    """What is explained: how its row is found, its timeline, facts, state and rules."""

    name: str
    lookup: str
    timeline: Callable[[EventStore, Row, int], list[Entry]]
    facts: Callable[[Context, Row, Log], T]
    state: Callable[[T], dict[str, object]]
    rules: Sequence[tuple[str, Callable[[T], Finding | None], bool]]

    def explain(
        self,
        store: EventStore,
        wanted: str,
        at_seq: int | None,
        now: int | None,
        progress: Callable[[int, int], None] | None,
    ) -> Explanation:
        """Timeline, state and diagnosis of the subject ``wanted`` (see the callers)."""
        with state_at(store, at_seq, progress) as (connection, last):
            ctx = context(connection, clock(store, last, now))
            row = ctx.one(self.lookup, wanted)
            if row is None:
                raise missing(store, self.name, wanted, at_seq, last)
            entries = self.timeline(store, row, last)
            facts = self.facts(ctx, row, Log(entries))
            return Explanation(
                subject=self.name,
                id=wanted,
                at_seq=last,
                now=ctx.now,
                state=self.state(facts),
                timeline=tuple(item(entry) for entry in entries),
                diagnosis=evaluate(self.rules, facts),
            )

    def diagnose(self, store: EventStore, ctx: Context, row: Row, last: int) -> tuple[Finding, ...]:
        """The diagnosis of the subject ``row`` read through ``ctx``, up to seq ``last``."""
        entries = self.timeline(store, row, last)
        return evaluate(self.rules, self.facts(ctx, row, Log(entries)))


_INTERACTION: Final = _Subject(
    "interaction",
    "SELECT * FROM interactive_requests WHERE request_id = ?",
    interaction_log,
    Facts,
    interaction_state,
    INTERACTION_RULES,
)
_RUN: Final = _Subject(
    "run", "SELECT * FROM runs WHERE run_id = ?", run_log, RunFacts, run_full_state, RUN_RULES
)


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
    return _INTERACTION.explain(store, request_id, at_seq, now, progress)


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
    return _RUN.explain(store, run_id, at_seq, now, progress)


def diagnose_interaction(
    store: EventStore, ctx: Context, request: Row, last: int
) -> tuple[Finding, ...]:
    """The diagnosis of one interactive request read through ``ctx``, up to seq ``last``.

    The same rules as :func:`explain_interaction`, for callers that already
    hold a read transaction (``pwf status`` diagnoses every waiting request).
    """
    return _INTERACTION.diagnose(store, ctx, request, last)


def diagnose_run(store: EventStore, ctx: Context, run: Row, last: int) -> tuple[Finding, ...]:
    """The diagnosis of one run read through ``ctx``, up to seq ``last`` (see above)."""
    return _RUN.diagnose(store, ctx, run, last)
