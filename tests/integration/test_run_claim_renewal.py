"""The heartbeat's renewal of a run claim at the end of its lease (HOST §1.9).

A claim is live while ``lease_expires_at > now``: a lease that ends exactly
at ``now`` has ended, so the heartbeat's renewal is refused ``Run claim
expired`` (the host then stops the worker ``claimLost``) and writes nothing;
one millisecond earlier it is renewed for another lease from ``now``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import TYPE_CHECKING

import pytest

from pwf.commands import supervision
from pwf.errors import CommandError
from pwf.events import Actor, RunLeaseRenewed

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
    events = held.events("run.leases_renewed")
    _renew(held, lease - 1)
    assert (events + 1, lease - 1 + LEASE_MS) == (held.events("run.leases_renewed"), _lease(held))


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

    before = held.events("run.leases_renewed")
    held.host.supervise("worker.renew", now, renew)
    assert refused == ["run-3", RUN]
    assert held.events("run.leases_renewed") == before + 1  # ADR 0119: one event for both
    assert (_queue_lease(held, RUN), _queue_lease(held, "run-2")) == (now + LEASE_MS,) * 2
    [data] = _renewals(held, now)
    claims = [[RUN, first], ["run-2", epochs["run-2"]]]
    assert data == {"claims": claims, "leaseExpiresAt": now + LEASE_MS}
    held.assert_rebuild_equals_live()


def _renewals(fx: Fixture, at: int) -> list[object]:
    """The data of the heartbeat's renewals at ``at``, all of one batch."""
    with contextlib.closing(sqlite3.connect(fx.store.projections_file.path)) as connection:
        found = connection.execute(
            "SELECT batch, body FROM events WHERE type = 'run.leases_renewed' AND at = ?"
            " ORDER BY seq",
            (at,),
        ).fetchall()
    assert len({batch for batch, _body in found}) == 1
    return [json.loads(body)["data"] for _batch, body in found]


def test_a_heartbeat_of_more_claims_than_an_event_names_writes_several_in_one_batch(
    held: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``MOST_CLAIMS`` the claims go on in another event of the same batch; none twice."""
    first = str(held.epoch)
    start_run(held, "run-2", session="s-run-2", at=1_000)
    held.launch(run_id="run-2", at=1_000)
    run_worker(held, "run-2", "worker.ready", {}, rev=0, at=1_000)
    pairs = [(RUN, first), ("run-2", str(held.epoch))]
    monkeypatch.setattr(supervision, "MOST_CLAIMS", 1)
    held.host.supervise(
        "worker.renew",
        2_000,
        lambda ctx: supervision.renew_claims(ctx, [*pairs, pairs[0]], LEASE_MS),
    )
    assert _renewals(held, 2_000) == [
        {"claims": [list(pair)], "leaseExpiresAt": 2_000 + LEASE_MS} for pair in pairs
    ]
    held.assert_rebuild_equals_live()


def test_a_log_written_before_keeps_folding_its_renewals_one_a_run(held: Fixture) -> None:
    """``run.lease_renewed``, one event a run, is what hosts wrote before ADR 0119: it folds."""
    epoch = held.epoch
    assert epoch is not None
    lease = _lease(held) + 5
    held.store.append(
        [RunLeaseRenewed(run_id=RUN, worker_epoch=epoch, lease_expires_at=lease)],
        at=2_000,
        actor=Actor(type="host", id="host-before"),
    )
    assert _lease(held) == lease
    held.assert_rebuild_equals_live()
