"""Run projections inside the append transaction; imports projections, events, errors, sqlite3.

:class:`ReadModel` is an append hook: for every sealed event it executes each
projection's statements and then moves ``_pwf_checkpoint`` to that seq, all
through the store's own connection, so rows and checkpoint commit together
with the batch (ADR 0005).  Replay and rebuild call the same ``apply_entry``.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from pwf.errors import StoreError
from pwf.projections import PROJECTIONS, Projection

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pwf.events import Entry, Sealed

__all__ = ["ReadModel"]


class ReadModel:
    """Projections applied live, inline with every append."""

    def __init__(self, projections: Sequence[Projection] = PROJECTIONS) -> None:
        """Keep the projections in application order."""
        self.projections = tuple(projections)

    def install(self, connection: sqlite3.Connection) -> None:
        """Create every projection's tables and a checkpoint row at its version."""
        for projection in self.projections:
            for statement in projection.DDL:
                connection.execute(statement)
            row = connection.execute(
                "SELECT version FROM _pwf_checkpoint WHERE projection = ?", (projection.NAME,)
            ).fetchone()
            if row is None:
                connection.execute(
                    "INSERT INTO _pwf_checkpoint (projection, version, last_seq) VALUES (?, ?, 0)",
                    (projection.NAME, projection.VERSION),
                )
            elif row[0] != projection.VERSION:
                raise StoreError(
                    f"projection {projection.NAME} is at version {row[0]},"
                    f" this pwf writes version {projection.VERSION}: run `pwf rebuild`"
                )

    def apply_entry(self, connection: sqlite3.Connection, entry: Entry) -> None:
        """Fold one event into every projection and advance their checkpoints."""
        for projection in self.projections:
            for text, params in projection.apply(entry):
                connection.execute(text, params)
            connection.execute(
                "UPDATE _pwf_checkpoint SET last_seq = ? WHERE projection = ?",
                (entry.seq, projection.NAME),
            )

    def __call__(self, connection: object, batch: Sequence[Sealed]) -> None:
        """Append hook: project a freshly written batch."""
        assert isinstance(connection, sqlite3.Connection)
        for item in batch:
            self.apply_entry(connection, item.entry)
