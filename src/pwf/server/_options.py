"""How a served host runs: :class:`Options`, which tests fill with their own clock and ids.

Imports the supervision room's startup timeout and, for its types, the store.
"""

from __future__ import annotations

import base64
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pwf.server.supervision import STARTUP_SECONDS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pwf.store.sqlite import Synchronous

__all__ = ["Options", "wall_clock"]


def wall_clock() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


@dataclass
class Options:
    """How a host runs; tests inject the clock, ids and timer periods."""

    db: Path
    store_url: str | None = None
    """A shared PostgreSQL log; ``db`` is then this host's local projection file (ADR 0038)."""
    synchronous: Synchronous = "FULL"
    busy_timeout_ms: int = 5_000
    lease_ms: int = 30_000
    heartbeat_ms: int = 10_000
    poll_ms: int = 2_000
    clock: Callable[[], int] = wall_clock
    host_id: str = field(default_factory=lambda: f"host-{uuid.uuid4()}")  # noqa: TID251 - the edge
    token: str = field(
        default_factory=lambda: (
            base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        )
    )
    new_epoch: Callable[[], str] | None = None
    signals: bool = True
    worker_command: tuple[str, ...] | None = None
    """What is started for each run the host activates (HOST §7); None: ``pwf worker launch``."""
    startup_seconds: float = STARTUP_SECONDS
    metrics: tuple[str, int] | None = None
    """Serve ``/metrics`` and ``/healthz`` on this (host, port) (ADR 0076); None: no endpoint."""
    connections: int | None = None
    """The most client connections open at once (ADR 0110); None: as the descriptor limit allows."""
