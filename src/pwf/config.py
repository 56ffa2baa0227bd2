"""Operator settings; imports errors only, and pydantic only when a value needs checking.

Settings come from command-line options first, then the environment
(``PWF_DB``, ``PWF_SYNCHRONOUS``, ``PWF_BUSY_TIMEOUT_MS``), then
defaults.  The pydantic model :class:`pwf.settings_model.SettingsModel`
checks every given value; when nothing but the database path is given,
the defaults need no checking and pydantic is not imported (ADR 0032).
Events never use pydantic (ADR 0004).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, Literal, NamedTuple

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_DB",
    "DEFAULT_HEARTBEAT_MS",
    "DEFAULT_LEASE_MS",
    "DEFAULT_SYNCHRONOUS",
    "DEFAULT_WORKER_STARTUP_MS",
    "ENVIRONMENT",
    "Settings",
    "Synchronous",
]

Synchronous = Literal["FULL", "NORMAL", "EXTRA"]

DEFAULT_DB: Final = Path(".pwf") / "state.db"
DEFAULT_SYNCHRONOUS: Final[Synchronous] = "FULL"
DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000
DEFAULT_LEASE_MS: Final = 30_000
"""``pwf serve``: how long the host's claim, and each run claim it renews, lasts (DOMAIN §5.1)."""
DEFAULT_HEARTBEAT_MS: Final = 10_000
"""``pwf serve``: how often the host renews those claims (DOMAIN §5.1, HOST §1 Timers)."""
DEFAULT_WORKER_STARTUP_MS: Final = 15_000
"""``pwf serve``: how long a started worker has to send ``worker.ready`` (HOST §7.6)."""
_ENVIRONMENT: Final = {"synchronous": "PWF_SYNCHRONOUS", "busy_timeout_ms": "PWF_BUSY_TIMEOUT_MS"}

ENVIRONMENT: Final = (
    ("PWF_DB", "the state database when --db is not given", f"./{DEFAULT_DB}"),
    ("PWF_SYNCHRONOUS", "SQLite synchronous mode: FULL, NORMAL or EXTRA", DEFAULT_SYNCHRONOUS),
    (
        "PWF_BUSY_TIMEOUT_MS",
        "how long a writer waits for the write lock, 0 to 600000 ms",
        str(DEFAULT_BUSY_TIMEOUT_MS),
    ),
    ("PWF_LEASE_MS", "pwf serve: how long a host's claim lasts, in ms", str(DEFAULT_LEASE_MS)),
    (
        "PWF_HEARTBEAT_MS",
        "pwf serve: how often the host renews its claims, in ms (less than the lease)",
        str(DEFAULT_HEARTBEAT_MS),
    ),
    (
        "PWF_WORKER_STARTUP_MS",
        "pwf serve: how long a started worker has to report ready, in ms",
        str(DEFAULT_WORKER_STARTUP_MS),
    ),
    (
        "PWF_METRICS",
        "pwf serve: serve Prometheus metrics and /healthz at this PORT or HOST:PORT",
        "unset: none",
    ),
    (
        "PWF_SEED",
        "makes minted ids (worker and coordinator epochs) deterministic, for scripts",
        "unset: random",
    ),
)
"""(variable, what it sets, default) of every setting read from the environment;
``pwf --help`` lists them."""


class Settings(NamedTuple):
    """Where the state database lives (an absolute path) and how it is opened."""

    db: Path
    synchronous: Synchronous = DEFAULT_SYNCHRONOUS
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS

    @classmethod
    def load(cls, *, db: str | None = None, **overrides: object) -> Settings:
        """Build settings from an explicit ``--db``, else ``$PWF_DB``, else the default.

        Raises:
            ConfigError: a value is invalid (one line naming the field).
        """
        chosen = db or os.environ.get("PWF_DB") or str(DEFAULT_DB)
        environment = {name: os.environ.get(variable) for name, variable in _ENVIRONMENT.items()}
        merged = {**environment, **overrides}
        given = {key: value for key, value in merged.items() if value is not None}
        if not given:
            return cls(Path(chosen).absolute())
        from pwf.settings_model import validated  # noqa: PLC0415 - pydantic only to check values

        return validated(chosen, given)
