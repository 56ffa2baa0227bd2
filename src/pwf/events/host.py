"""Host claim events: a served host's epoch, lease and heartbeat (DOMAIN §5.1, HOST §1.5-§1.9).

Imports the event base only.  The claim is a singleton: each event names the
epoch it is about, and the projection keeps the latest one.  Only the
SHA-256 of the claim token is logged, never the token.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from pwf.events._base import Event, Hex256, OpaqueId, SafeInt

Epoch = Annotated[int, msgspec.Meta(ge=1, le=2**53 - 1)]


class HostClaimed(Event, frozen=True, kw_only=True):
    """A host took the claim with a new epoch and a lease until ``expires_at``."""

    TAG = "host.claimed"

    epoch: Epoch
    host_id: OpaqueId
    token_hash: Hex256
    pid: SafeInt
    process_start_identity: OpaqueId
    expires_at: SafeInt


class HostRenewed(Event, frozen=True, kw_only=True):
    """The heartbeat: the claim of ``epoch`` lives until ``expires_at``."""

    TAG = "host.renewed"

    epoch: Epoch
    expires_at: SafeInt


class HostReleased(Event, frozen=True, kw_only=True):
    """The host of ``epoch`` stopped cleanly; nothing is left to recover."""

    TAG = "host.released"

    epoch: Epoch
