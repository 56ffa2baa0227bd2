"""The heartbeat's renewal of a run claim at the end of its lease (HOST §1.9).

A claim is live while ``lease_expires_at > now``: a lease that ends exactly
at ``now`` has ended, so the heartbeat's renewal is refused ``Run claim
expired`` (the host then stops the worker ``claimLost``) and writes nothing;
one millisecond earlier it is renewed for another lease from ``now``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.commands import supervision
from pwf.errors import CommandError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    # mypy finds the harness by its path; pytest puts its directory on sys.path
    from tests.integration._harness import RUN, Fixture, run_worker, start_run

    from pwf.commands import Context
else:
    from _harness import RUN, Fixture, run_worker, start_run

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


def _queue_lease(fx: Fixture, run_id: str) -> int:
    return int(fx.existing("run_queue", run_id=run_id)["lease_expires_at"])


def test_one_heartbeat_renews_every_held_claim_in_one_batch(held: Fixture) -> None:
    """ADR 0118: one heartbeat's renewals are one batch; a refused one leaves the others renewed.

    ``run-1`` (``w-1``) and ``run-2`` are held past ``now``; ``run-3``'s lease
    ends at ``now``; a pair naming an epoch that does not hold ``run-1`` is
    refused as well.
    """
    epochs = {RUN: held.epoch}
    for run_id, at in (("run-3", 1000), ("run-2", 10_000)):
        start_run(held, run_id, session=f"s-{run_id}", at=at)
        held.launch(run_id=run_id, at=at)
        run_worker(held, run_id, "worker.ready", {}, rev=0, at=at)
        epochs[run_id] = held.epoch
    first = epochs[RUN]
    assert first is not None
    held.host.supervise(  # run-1's lease now ends after run-3's and run-2's
        "worker.renew", 20_000, lambda ctx: supervision.renew_claim(ctx, RUN, first, LEASE_MS)
    )
    now = _queue_lease(held, "run-3")
    assert _queue_lease(held, RUN) > now
    assert _queue_lease(held, "run-2") > now
    held_pairs = [(run_id, str(epoch)) for run_id, epoch in epochs.items()]
    refused: list[str] = []

    def renew(ctx: Context) -> None:
        refused.extend(supervision.renew_claims(ctx, [*held_pairs, (RUN, "w-elsewhere")], LEASE_MS))

    before = held.events("run.lease_renewed")
    held.host.supervise("worker.renew", now, renew)
    assert refused == ["run-3", RUN]
    assert held.events("run.lease_renewed") == before + 2
    assert (_queue_lease(held, RUN), _queue_lease(held, "run-2")) == (now + LEASE_MS,) * 2
    with contextlib.closing(sqlite3.connect(held.store.projections_file.path)) as connection:
        batches = connection.execute(
            "SELECT DISTINCT batch FROM events WHERE type = 'run.lease_renewed' AND at = ?",
            (now,),
        ).fetchall()
    assert len(batches) == 1
