"""Direct mode's guard lives in the host: refused while a served host's claim is live (ADR 0010)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pwf.cli._options import open_store
from pwf.errors import StoreError
from pwf.host import Host
from pwf.host.served import Identity, ServedHost

if TYPE_CHECKING:
    from pathlib import Path

NOW = 1_700_000_000_000
LEASE = 30_000
REFUSAL = "a live pwf host (epoch 1) owns this database; send requests to it instead"


def test_a_never_served_database_is_not_refused(tmp_path: Path) -> None:
    """No ``host_state`` table: nothing to refuse."""
    with open_store(str(tmp_path / "s.db"), create=True) as store:
        Host(store).refuse_if_served(NOW)


def test_a_live_claim_refuses_until_its_lease_ends(tmp_path: Path) -> None:
    """Live while ``expires_at > now``: refused just before the expiry, allowed at it."""
    with open_store(str(tmp_path / "s.db"), create=True) as store:
        ServedHost(store, Identity("h-1", 1, "start-1")).start("ab" * 32, LEASE, NOW)
        host = Host(store)
        with pytest.raises(StoreError) as refused:
            host.refuse_if_served(NOW + LEASE - 1)
        assert REFUSAL == str(refused.value)
        host.refuse_if_served(NOW + LEASE)


def test_a_released_claim_is_not_refused(tmp_path: Path) -> None:
    """A host that stopped cleanly leaves no claim behind."""
    with open_store(str(tmp_path / "s.db"), create=True) as store:
        served = ServedHost(store, Identity("h-1", 1, "start-1"))
        served.start("ab" * 32, LEASE, NOW)
        assert served.release(NOW + 1)
        Host(store).refuse_if_served(NOW + 2)
