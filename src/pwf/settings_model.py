"""The pydantic model that checks operator settings; imported only when a value is given.

:func:`pwf.config.Settings.load` calls :func:`validated` when the
environment or the caller gives any setting besides the database path
(ADR 0032).  Imports errors and config only.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pwf.config import (
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_DB,
    DEFAULT_SYNCHRONOUS,
    Settings,
    Synchronous,
)
from pwf.errors import ConfigError

__all__ = ["SettingsModel", "validated"]


class SettingsModel(BaseModel):
    """Where the state database lives and how it is opened."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db: Path = DEFAULT_DB
    synchronous: Synchronous = DEFAULT_SYNCHRONOUS
    busy_timeout_ms: int = Field(default=DEFAULT_BUSY_TIMEOUT_MS, ge=0, le=600_000)


def validated(db: str, given: dict[str, object]) -> Settings:
    """Settings for database ``db`` with the ``given`` values checked by the model.

    Raises:
        ConfigError: a value is invalid (one line naming the field).
    """
    try:
        model = SettingsModel.model_validate({"db": Path(db), **given})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"invalid setting {where}: {first['msg']}") from None
    return Settings(model.db.absolute(), model.synchronous, model.busy_timeout_ms)
