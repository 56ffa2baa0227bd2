"""Operator settings, validated with pydantic; imports errors only.

Settings come from command-line options first, then the environment
(``PWF_DB``, ``PWF_SYNCHRONOUS``, ``PWF_BUSY_TIMEOUT_MS``), then
defaults.  Events never use pydantic (ADR 0004).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pwf.errors import ConfigError

__all__ = ["DEFAULT_DB", "Settings"]

DEFAULT_DB = Path(".pwf") / "state.db"
_ENVIRONMENT = {"synchronous": "PWF_SYNCHRONOUS", "busy_timeout_ms": "PWF_BUSY_TIMEOUT_MS"}


class Settings(BaseModel):
    """Where the state database lives and how it is opened."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db: Path = DEFAULT_DB
    synchronous: Literal["FULL", "NORMAL", "EXTRA"] = "FULL"
    busy_timeout_ms: int = Field(default=5_000, ge=0, le=600_000)

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
        try:
            settings = cls.model_validate({"db": Path(chosen), **given})
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ConfigError(f"invalid setting {where}: {first['msg']}") from None
        return settings.model_copy(update={"db": settings.db.absolute()})
