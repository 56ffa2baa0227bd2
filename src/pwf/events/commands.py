"""Events of the command log (DOMAIN §7); imports the event base only."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from pwf.errors import Outcome  # noqa: TC001 - msgspec reads the field types at run time
from pwf.events._base import Event, Hex256, OpaqueId, Positive, SafeInt


class _Command(Event, frozen=True, kw_only=True):
    """What every command event names first: the request, its client and key, and the outcome."""

    request_id: OpaqueId
    client_id: OpaqueId
    operation: str
    idempotency_key: OpaqueId
    fingerprint: Hex256
    outcome: Outcome


class CommandRecorded(_Command, frozen=True, kw_only=True):
    """A command's outcome was stored; ``host_commands`` is folded from these alone."""

    TAG = "command.recorded"
    JSON_BLOBS: ClassVar[tuple[str, ...]] = ("receipt",)
    TEXT_BLOBS: ClassVar[tuple[str, ...]] = ("error",)

    run_id: OpaqueId | None = None
    revision: SafeInt | None = None
    receipt: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: str | None = None
    host_epoch: Positive | None = None


class CommandRefused(_Command, frozen=True, kw_only=True):
    """An outcome the original does not persist; never feeds ``host_commands``."""

    TAG = "command.refused"

    error: str
