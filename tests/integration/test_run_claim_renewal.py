"""The heartbeat's renewal of a run claim at the end of its lease (HOST §1.9).

A claim is live while ``lease_expires_at > now``: a lease that ends exactly
at ``now`` has ended, so the heartbeat's renewal is refused ``Run claim
expired`` (the host then stops the worker ``claimLost``) and writes nothing;
one millisecond earlier it is renewed for another lease from ``now``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pwf.commands import supervision
from pwf.errors import CommandError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import RUN, Fixture

    from pwf.commands import Context
else:
    from _harness import RUN, Fixture

LEASE_MS = 30_000
"""The run claim's lease the heartbeat renews (HOST §1.9)."""


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Fixture]:
    """``run-1`` held by its worker ``w-1``, whose claim the heartbeat renews."""
    fixture = Fixture.running(tmp_path / "s.db")
    yield fixture
    fixture.close()


def _renew(fx: Fixture, now: int) -> None:
    epoch = fx.epoch
    assert epoch is not None

    def renew(ctx: Context) -> None:
        supervision.renew_claim(ctx, RUN, epoch, LEASE_MS)

    fx.host.supervise("worker.renew", now, renew)


def _lease(fx: Fixture) -> int:
    return int(fx.existing("run_queue", run_id=RUN)["lease_expires_at"])


@pytest.mark.parametrize("past", [0, 1])
def test_a_lease_that_ends_at_now_is_expired_not_renewed(held: Fixture, past: int) -> None:
    """A lease ending at now, or before it, has ended: the renewal is refused, nothing appended."""
    lease = _lease(held)
    events = held.events()
    with pytest.raises(CommandError, match=r"^Run claim expired$"):
        _renew(held, lease + past)
    assert (events, lease) == (held.events(), _lease(held))


def test_a_lease_one_millisecond_from_its_end_is_renewed(held: Fixture) -> None:
    """One millisecond before the end the claim is live: renewed for a lease from now."""
    lease = _lease(held)
    events = held.events("run.lease_renewed")
    _renew(held, lease - 1)
    assert (events + 1, lease - 1 + LEASE_MS) == (held.events("run.lease_renewed"), _lease(held))
