"""Which handler answers each client operation, and on which route (DOMAIN §7.3, §8)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, NamedTuple

from pwf.commands import (
    Context,
    Result,
    branches,
    followups,
    interactions,
    maintenance,
    refuse,
    runcontrol,
    runs,
    sessionview,
    turns,
    views,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.protocol.client import ClientRequest

__all__ = ["CLIENT_OPERATIONS", "Operation", "Route"]


class Route(enum.Enum):
    """How an operation's outcome is kept (DOMAIN §7.3)."""

    EXECUTED = "executed"
    MAINTENANCE = "maintenance"
    DIRECT = "direct"
    VIEW = "view"


class Operation(NamedTuple):
    """A route and the handler that decides."""

    route: Route
    handler: Callable[[Context, ClientRequest], Result]


def _later(_ctx: Context, request: ClientRequest) -> Result:
    """Operations whose behaviour is not built yet refuse without recording anything."""
    raise refuse(f"Workflow operation {request.operation} is not available in this pwf version")


_EXECUTED: Final = {
    "host.status": runs.host_status,
    "host.stop": runs.host_stop,
    "run.start": runs.run_start,
    "run.status": runs.run_status,
    "run.list": runs.run_list,
    "run.pause": runcontrol.run_pause,
    "run.resume": runcontrol.run_resume,
    "run.cancel": runcontrol.run_cancel,
    "checkpoint.answer": interactions.checkpoint_answer,
    "decision.answer": interactions.decision_answer,
    "interaction.update": interactions.interaction_update,
    "run.restart": sessionview.run_restart,
    "sessionView.clearTerminal": sessionview.clear_terminal,
    "followUp.queue": followups.follow_up_queue,
    "followUp.remove": followups.follow_up_remove,
}
_LATER_EXECUTED: Final = (
    "controller.list",
    "controller.get",
    "controller.apply",
    "controller.reconcile",
    "controller.delete",
)
_LATER_MAINTENANCE: Final = (
    "run.changeSettings",
    "session.record",
    "channel.reload",
    "channel.recover",
)
_DIRECT: Final = {
    "interaction.submit": interactions.interaction_submit,
    "workflowMessage.reportBranch": branches.report_branch,
    "workflowTurn.report": turns.report_turn,
}
_VIEWS: Final = {
    "view.session.watch": sessionview.view_session_watch,
    "view.content": views.view_content_chunk,
}
_SERVED_VIEWS: Final = ("view.runs.watch", "view.run.watch", "view.run.unwatch")
_READS: Final = (
    "view.runs.page",
    "view.run.get",
    "view.page",
    "state.status",
    "state.verify",
    "channel.status",
)
"""Answered by :mod:`pwf.views` and the host (they read the file); listed here for their route."""


def _served(_ctx: Context, request: ClientRequest) -> Result:
    """Subscriptions need a connection of the served host: direct mode answers ``unavailable``."""
    raise refuse(
        f"Workflow operation {request.operation} needs the served host;"
        " direct mode cannot answer it",
        "unavailable",
    )


CLIENT_OPERATIONS: Final[dict[str, Operation]] = {
    **{name: Operation(Route.EXECUTED, handler) for name, handler in _EXECUTED.items()},
    **{name: Operation(Route.EXECUTED, _later) for name in _LATER_EXECUTED},
    "state.backup": Operation(Route.MAINTENANCE, maintenance.state_backup),
    "state.prune": Operation(Route.MAINTENANCE, maintenance.state_prune),
    **{name: Operation(Route.MAINTENANCE, _later) for name in _LATER_MAINTENANCE},
    **{name: Operation(Route.DIRECT, handler) for name, handler in _DIRECT.items()},
    **{name: Operation(Route.VIEW, handler) for name, handler in _VIEWS.items()},
    **{name: Operation(Route.VIEW, _served) for name in (*_SERVED_VIEWS, *_READS)},
}
