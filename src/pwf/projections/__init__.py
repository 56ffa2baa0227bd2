"""Read models: one module per projection; imports events and errors only.

A projection module has ``NAME``, ``VERSION``, ``DDL`` (explicit keys,
``STRICT``) and a pure ``apply(entry) -> list[Statement]`` that reads nothing but
the event it is given.  :mod:`pwf.readmodel` runs the DDL, executes the
statements and advances the checkpoint inside the append transaction.

Each module here also has ``HANDLERS``, its event classes mapped to the
functions that fold them; ``apply`` dispatches through it, and a fold routes
each event straight to the handlers of its class, skipping read models that
ignore it.  A projection without ``HANDLERS`` is offered every event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pwf.projections import (
    blobs,
    host_commands,
    interactions,
    messages,
    node_attempts,
    run_sources,
    run_view_content,
    runs,
    sessions,
    workers,
)
from pwf.projections._sql import Sql, Statement

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pwf.events import Entry

__all__ = ["PROJECTIONS", "Projection", "Sql", "Statement"]


class Projection(Protocol):
    """What a projection module provides."""

    @property
    def NAME(self) -> str:  # noqa: N802 - a module constant seen through the protocol
        """The read model's name, used by its checkpoint row."""

    @property
    def VERSION(self) -> int:  # noqa: N802 - same as NAME
        """Bumped when the tables change; a mismatch means rebuild."""

    @property
    def DDL(self) -> tuple[str, ...]:  # noqa: N802 - same as NAME
        """Statements that create the read model's tables and indexes."""

    def apply(self, entry: Entry) -> Sequence[Statement]:
        """The statements that fold ``entry`` into this read model."""


PROJECTIONS: tuple[Projection, ...] = (
    blobs,
    host_commands,
    runs,
    run_sources,
    node_attempts,
    interactions,
    messages,
    sessions,
    workers,
    run_view_content,
)
"""Every registered read model, in the order they are applied."""
