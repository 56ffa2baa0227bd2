"""Read models: one module per projection; imports events and errors only.

A projection module has ``NAME``, ``VERSION``, ``DDL`` (explicit keys,
``STRICT``) and a pure ``apply(entry) -> list[Sql]`` that reads nothing but
the event it is given.  :mod:`pwf.readmodel` runs the DDL, executes the
statements and advances the checkpoint inside the append transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from pwf.events import Entry

__all__ = ["PROJECTIONS", "Projection", "Sql"]


class Sql(NamedTuple):
    """One statement a projector emits; values are always bound with ``?``."""

    text: str
    params: tuple[object, ...] = ()


class Projection(Protocol):
    """What a projection module provides."""

    NAME: str
    VERSION: int
    DDL: tuple[str, ...]

    def apply(self, entry: Entry) -> list[Sql]:
        """The statements that fold ``entry`` into this read model."""


PROJECTIONS: tuple[Projection, ...] = ()
"""Every registered read model, in the order they are applied."""
