"""Host claim events: a served host's epoch, lease and heartbeat (DOMAIN §5.1, HOST §1.5-§1.9).

Imports the event base only.  The claim is a singleton: each event names the
epoch it is about, and the projection keeps the latest one.  Only the
SHA-256 of the claim token is logged, never the token.
"""

from __future__ import annotations

from pwf.events._base import Event, Hex256, OpaqueId, Positive, SafeInt


class HostClaimed(Event, frozen=True, kw_only=True):
    """A host took the claim with a new epoch and a lease until ``expires_at``."""

    TAG = "host.claimed"

    epoch: Positive
    host_id: OpaqueId
    token_hash: Hex256
    pid: SafeInt
    process_start_identity: OpaqueId
    expires_at: SafeInt


class HostRenewed(Event, frozen=True, kw_only=True):
    """The heartbeat: the claim of ``epoch`` lives until ``expires_at``."""

    TAG = "host.renewed"

    epoch: Positive
    expires_at: SafeInt


class HostReleased(Event, frozen=True, kw_only=True):
    """The host of ``epoch`` stopped cleanly; nothing is left to recover."""

    TAG = "host.released"

    epoch: Positive
