"""A realistic, seeded command-log workload for the benchmarks and for demos.

What it produces: batches of :class:`~pwf.events.CommandRecorded` events as a
workflow host would record them while clients start, poll, pause and resume
runs, submit interactions, queue follow-ups and ask for the host's status.
Each batch is one command (one write transaction) and holds 1-3 events: the
command itself and, for some commands, the follow-ups it queued.

Everything is decided by ``random.Random(seed)``, so the same seed gives the
same batches, byte for byte once sealed against the same head.

Run as a script to fill a database::

    python bench/workload.py --db /tmp/demo.sqlite --batches 500 --seed 7

which prints one line: events appended, head seq, head hash.  The script
opens the store with pwf's read model attached (as the ``pwf`` command does),
so projections stay current; filling a database again carries on its clock
and request numbering.
"""

from __future__ import annotations

import argparse
import random  # noqa: TID251 - the workload is the edge that decides randomness
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from pwf import canonical
from pwf.events import Actor, Cause, CommandRecorded, Outcome, Sealed
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = [
    "OPERATIONS",
    "START_AT",
    "Batch",
    "append_batches",
    "batches",
    "compact_batches",
    "main",
]

OPERATIONS: Final = (
    "run.start",
    "run.status",
    "run.pause",
    "run.resume",
    "interaction.submit",
    "host.status",
    "followUp.queue",
)
"""The commands a workflow host records."""

_WEIGHTS: Final = (10, 30, 6, 6, 18, 8, 12)
"""How often each of :data:`OPERATIONS` is issued (status polling dominates)."""

START_AT: Final = 1_767_225_600_000
"""2026-01-01T00:00:00Z in milliseconds: where the workload's clock starts."""

_CLIENTS: Final = (
    ("cli-web-7f3a", Actor(type="human", id="usr_ada")),
    ("cli-web-91c0", Actor(type="human", id="usr_grace")),
    ("cli-slack-02", Actor(type="channel", id="slack:T024BE7LD")),
    ("cli-ctl-main", Actor(type="controller", id="ctl-main")),
    ("cli-sess-4d1e", Actor(type="session", id="sess_4d1e09b2")),
    ("cli-policy-1", Actor(type="policy", id="policy:budget")),
)

_DETAILS: Final = {
    "run.start": ("run started from template review-pr", "run queued: waiting for a worker"),
    "run.status": (
        "waiting for approval of step 3",
        "step plan finished in 2 attempts",
        "tool call fetch_issue returned 200",
    ),
    "run.pause": ("paused by operator request", "paused at step boundary"),
    "run.resume": ("resumed after operator request", "resumed; 1 step left"),
    "interaction.submit": ("answer recorded for prompt 2", "approval granted by reviewer"),
    "host.status": ("host ready, 3 workers idle", "host busy, draining queue"),
    "followUp.queue": ("follow-up queued behind 1 message", "please also update the changelog"),
}
"""Receipt detail texts per operation."""

_DETAILS_NON_ASCII: Final = (
    "Übergabe an Prüferin — Schritt 2 ✓",
    "レビュー待ち: ステップ 3",
    "réponse reçue, on continue…",
    "Задача поставлена в очередь",
    "状态已更新 🚀",
)

_ERRORS: Final = {
    "notFound": "run not found",
    "conflict": "revision conflict: the run moved on",
    "rejected": "the interaction is no longer pending",
    "claimLost": "the worker lost its claim on the run",
    "unavailable": "the host is restarting; retry later",
}


class Batch(NamedTuple):
    """One command's batch, as :meth:`pwf.store.sqlite.SqliteStore.append` takes it."""

    events: tuple[CommandRecorded, ...]
    at: int
    actor: Actor
    cause: Cause | None


@dataclass
class _Run:
    status: str = "running"
    revision: int = 1
    queued: int = 0


@dataclass
class _Host:
    """The simulated host: its runs, clock and epoch, advanced by one RNG."""

    rng: random.Random
    at: int
    serial: int
    epoch: int = 1
    runs: dict[str, _Run] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    last: tuple[str, Cause, Actor, tuple[CommandRecorded, ...]] | None = None

    # ------------------------------------------------------------------ ids

    def hex(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def key(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def pick_run(self) -> str | None:
        if not self.order:
            return None
        # Recent runs are touched far more often than old ones.
        window = self.order[-12:]
        return self.rng.choice(window)

    # ------------------------------------------------------------------ receipts

    def detail(self, operation: str) -> str:
        if self.rng.random() < 0.15:
            return self.rng.choice(_DETAILS_NON_ASCII)
        return self.rng.choice(_DETAILS[operation])

    def receipt(
        self, operation: str, run_id: str | None, run: _Run | None, **extra: object
    ) -> dict[str, object]:
        body: dict[str, object] = {"detail": self.detail(operation)}
        if run_id is not None and run is not None:
            body |= {"runId": run_id, "status": run.status, "revision": run.revision}
        if self.rng.random() < 0.2:
            body["elapsedSeconds"] = round(self.rng.uniform(0.05, 900.0), 3)
        body |= extra
        return body

    # ------------------------------------------------------------------ commands

    def command(
        self,
        operation: str,
        cause: Cause,
        outcome: Outcome,
        run_id: str | None,
        receipt: dict[str, object] | None,
    ) -> CommandRecorded:
        run = self.runs.get(run_id) if run_id is not None else None
        assert cause.request_id is not None
        assert cause.client_id is not None
        assert cause.idempotency_key is not None
        assert cause.fingerprint is not None
        return CommandRecorded(
            request_id=cause.request_id,
            client_id=cause.client_id,
            operation=operation,
            idempotency_key=cause.idempotency_key,
            fingerprint=cause.fingerprint,
            outcome=outcome,
            run_id=run_id,
            revision=run.revision if run is not None else None,
            receipt=canonical.raw(receipt) if receipt is not None else canonical.MISSING,
            error=_ERRORS.get(outcome),
            host_epoch=self.epoch,
        )

    def cause(self, operation: str, client_id: str, params: dict[str, object]) -> Cause:
        self.serial += 1
        return Cause(
            operation=operation,
            request_id=f"req-{self.serial:07d}-{self.hex(32)}",
            client_id=client_id,
            idempotency_key=self.key(),
            fingerprint=canonical.hex_digest({"operation": operation, "params": params}),
        )

    def follow_up(self, parent: Cause, index: int, run_id: str, text: str) -> CommandRecorded:
        """A follow-up the parent command queued on ``run_id``."""
        run = self.runs[run_id]
        run.queued += 1
        params: dict[str, object] = {"runId": run_id, "text": text}
        cause = Cause(
            operation="followUp.queue",
            request_id=f"{parent.request_id}.{index}",
            client_id=parent.client_id,
            idempotency_key=f"{parent.idempotency_key}:{index}",
            fingerprint=canonical.hex_digest({"operation": "followUp.queue", "params": params}),
        )
        receipt = self.receipt("followUp.queue", run_id, run, position=run.queued, status="queued")
        return self.command("followUp.queue", cause, "accepted", run_id, receipt)

    def step(self) -> Batch:  # noqa: C901, PLR0912, PLR0915 - one branch per operation
        """Issue one command and return its batch."""
        rng = self.rng
        self.at += rng.randint(3, 2_500)
        if rng.random() < 0.004:
            self.epoch += 1  # the host restarted
        # A client retries its last command now and then: the host adopts it.
        if self.last is not None and rng.random() < 0.03:
            operation, cause, actor, events = self.last
            first = events[0]
            self.serial += 1
            cause = msgspec.structs.replace(
                cause, request_id=f"req-{self.serial:07d}-{self.hex(32)}"
            )
            assert cause.request_id is not None
            adopted = CommandRecorded(
                request_id=cause.request_id,
                client_id=first.client_id,
                operation=operation,
                idempotency_key=first.idempotency_key,
                fingerprint=first.fingerprint,
                outcome="adopted",
                run_id=first.run_id,
                revision=first.revision,
                receipt=first.receipt,
                host_epoch=self.epoch,
            )
            self.last = None
            return Batch((adopted,), self.at, actor, cause)

        operation = rng.choices(OPERATIONS, weights=_WEIGHTS)[0]
        if not self.order:
            operation = "run.start"
        client_id, actor = rng.choice(_CLIENTS)
        if operation == "host.status":
            actor = Actor(type="host", id=f"host-{self.epoch}")
        run_id = None if operation in {"run.start", "host.status"} else self.pick_run()
        if run_id is not None and rng.random() < 0.03:
            run_id = f"run-{self.hex(48)}"  # a stale or mistyped id
        params: dict[str, object] = {"runId": run_id} if run_id else {}
        run = self.runs.get(run_id) if run_id is not None else None
        extra: list[CommandRecorded] = []
        outcome: Outcome = "accepted"
        receipt: dict[str, object] | None = None

        if operation == "run.start":
            run_id = f"run-{self.hex(48)}"
            params = {"template": rng.choice(("review-pr", "triage", "release-notes"))}
            cause = self.cause(operation, client_id, params)
            run = self.runs[run_id] = _Run()
            self.order.append(run_id)
            receipt = self.receipt(operation, run_id, run)
            if rng.random() < 0.3:
                extra.append(self.follow_up(cause, 1, run_id, "kick off the first step"))
        else:
            cause = self.cause(operation, client_id, params)
            if rng.random() < 0.01:
                outcome = rng.choice(("claimLost", "unavailable"))
            elif operation == "host.status":
                receipt = self.receipt(
                    operation,
                    None,
                    None,
                    hostEpoch=self.epoch,
                    runs=len(self.runs),
                    newestRunId=self.order[-1],
                    load=round(rng.random() * 2, 2),
                )
            elif run is None:
                outcome = "notFound"
            elif operation == "run.status":
                receipt = self.receipt(operation, run_id, run)
            elif operation == "run.pause":
                if run.status == "running":
                    run.status, run.revision = "paused", run.revision + 1
                    receipt = self.receipt(operation, run_id, run)
                else:
                    outcome = "conflict"
            elif operation == "run.resume":
                if run.status == "paused":
                    run.status, run.revision = "running", run.revision + 1
                    receipt = self.receipt(operation, run_id, run)
                else:
                    outcome = "conflict"
            elif operation == "interaction.submit":
                if rng.random() < 0.1:
                    outcome = "rejected"
                else:
                    run.revision += 1
                    receipt = self.receipt(
                        operation, run_id, run, interactionId=f"int-{self.hex(32)}"
                    )
                    for index in range(1, rng.choice((1, 1, 2, 3))):
                        assert run_id is not None
                        extra.append(
                            self.follow_up(cause, index, run_id, self.detail("followUp.queue"))
                        )
            else:  # followUp.queue from a client
                run.queued += 1
                receipt = self.receipt(
                    "followUp.queue", run_id, run, position=run.queued, status="queued"
                )
        event = self.command(operation, cause, outcome, run_id, receipt)
        events = (event, *extra)
        if outcome == "accepted":
            self.last = (operation, cause, actor, events)
        return Batch(events, self.at, actor, cause)


def batches(
    count: int | None = None,
    *,
    seed: int = 0,
    start_at: int = START_AT,
    serial: int = 0,
) -> Iterator[Batch]:
    """Yield ``count`` batches (forever when ``None``), deterministic from ``seed``.

    ``start_at`` is the first batch's clock base (milliseconds) and ``serial``
    the number of requests already issued, which keeps request ids unique
    when a database is filled in several runs.
    """
    host = _Host(rng=random.Random(seed), at=start_at, serial=serial)
    produced = 0
    while count is None or produced < count:
        yield host.step()
        produced += 1


def compact_batches(count: int, *, seed: int = 0, start_at: int = START_AT) -> list[Batch]:
    """``count`` one-event batches of a small realistic kind: a status poll without receipt.

    Every indexed column is filled (run, request, client, idempotency key)
    and ids vary, so the indexes see realistic keys.  Sealed, a body is about
    640-720 bytes: three SHA-256 hex digests (fingerprint, prevHash,
    contentHash) and the envelope's member names are most of it, so no
    stored command record comes near 300 bytes.
    """
    rng = random.Random(seed)
    out: list[Batch] = []
    at = start_at
    for serial in range(1, count + 1):
        at += rng.randint(3, 2_500)
        client_id, actor = _CLIENTS[serial % len(_CLIENTS)]
        run_id = f"run-{rng.getrandbits(48):012x}"
        request_id = f"req-{serial:07d}"
        key = f"k-{rng.getrandbits(64):016x}"
        fingerprint = canonical.hex_digest({"operation": "run.status", "runId": run_id})
        event = CommandRecorded(
            request_id=request_id,
            client_id=client_id,
            operation="run.status",
            idempotency_key=key,
            fingerprint=fingerprint,
            outcome="accepted",
            run_id=run_id,
            revision=serial % 40 + 1,
        )
        cause = Cause(
            operation="run.status", request_id=request_id, client_id=client_id, idempotency_key=key
        )
        out.append(Batch((event,), at, actor, cause))
    return out


def append_batches(store: SqliteStore, items: Iterable[Batch]) -> list[Sealed]:
    """Append each batch in its own transaction; return the last batch's sealed events."""
    sealed: list[Sealed] = []
    for events, at, actor, cause in items:
        sealed = store.append(events, at=at, actor=actor, cause=cause)
    return sealed


def main(argv: list[str] | None = None) -> int:
    """Fill a database with ``--batches`` seeded batches and print a summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", type=Path, required=True, help="database path (created)")
    parser.add_argument("--batches", type=int, required=True, help="batches to append")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    if args.batches < 0:
        parser.error("--batches must not be negative")
    # Log only: these events are forged for append throughput, not decided by the
    # command path, so they would not satisfy the projections' uniqueness rules.
    with SqliteStore(args.db, create=True) as store:
        before = store.head()
        start_at = START_AT
        if before.seq:
            last = next(iter(store.entries(before.seq, before.seq)))
            start_at = max(start_at, last.at)
        # Carry on after the requests already stored so ids stay unique.
        items = batches(args.batches, seed=args.seed, start_at=start_at, serial=before.seq)
        append_batches(store, items)
        head = store.head()
    print(
        f"appended {head.seq - before.seq} events in {args.batches} batches to {args.db}:"
        f" head seq {head.seq}, head hash {head.content_hash}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
