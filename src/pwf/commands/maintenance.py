"""Maintenance commands (DOMAIN §7.3, §13): validation here, file work at the edge.

Imports commands and errors.  A maintenance handler's refusal is recorded
as ``rejected`` (unlike an executed command's), so a retry with the same key
gets the same answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pwf.commands import Context, Result, refuse
from pwf.commands.payload import members
from pwf.protocol.schemas import BackedUp, receipt

if TYPE_CHECKING:
    from pwf.protocol.client import ClientRequest

__all__ = ["state_backup", "state_prune"]


def state_backup(_ctx: Context, request: ClientRequest) -> Result:
    """``state.backup``: an absolute destination; the host makes and checks the copy (§13.1)."""
    payload = members(request.payload)
    destination = payload.get("destination")
    if not isinstance(destination, str) or not destination.startswith("/"):
        raise refuse("destination must be an absolute path")
    return Result(
        receipt=receipt(BackedUp(destination=destination)), effect=("backup", destination)
    )


def state_prune(_ctx: Context, request: ClientRequest) -> Result:
    """``state.prune``: options checked in the original's order (§13.2); the host does the rest."""
    from pwf.commands.prune import prune_options  # noqa: PLC0415 - four dataclasses, on prune only

    options = prune_options(request.payload)
    return Result(effect=("prune", options.before))
