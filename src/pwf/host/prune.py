"""``state.prune`` at the edge (DOMAIN §13.2): lock, backup, compaction, checkpoint, record.

The options and the selection are the pure :mod:`pwf.commands.prune`; here
are the flow that :meth:`pwf.host.Host.request` runs for it, the lock file,
the local time zone of zone-less cutoffs, the database's sizes, emptying
and counting the projections around a compaction, and the checkpoint after
it (ADR 0018, 0019, 0051).
"""

from __future__ import annotations

import datetime as dt
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, cast

from pwf._sqlite import PROJECTION_TABLES, quote
from pwf.commands import Result
from pwf.commands.prune import Cutoff, prune_options, select
from pwf.errors import CommandError, PwfError, StoreError
from pwf.events import LogPruned
from pwf.fold.rebuild import refold_blobs
from pwf.host._backup import Recording, catch_up, prepare_backup
from pwf.host._compacting import Prepared, Pruning, prepared
from pwf.host._lock import acquire_lock
from pwf.isotime import iso_utc
from pwf.sqlreader import RowReader
from pwf.store.compaction import file_sha256
from pwf.store.log_writes import strip
from pwf.store.opening import open_file, sqlite_file

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from pwf.commands import Context
    from pwf.commands.prune import Selection
    from pwf.events import Actor, Cause
    from pwf.protocol.client import ClientRequest, ClientResponse
    from pwf.store import EventStore, FileTransaction, LogFile, SharedLog
    from pwf.store.image import Shape

__all__ = [
    "PruneHandoff",
    "Recording",
    "Stamp",
    "Tally",
    "begin_prune",
    "database_bytes",
    "finish_prune",
    "prepare_prune",
    "report",
    "resolve_cutoff",
    "run_prune",
    "run_shared_prune",
    "settle",
    "tally",
]

_EPOCH = dt.datetime(1970, 1, 1)  # noqa: DTZ001 - a wall-clock origin, deliberately naive


def resolve_cutoff(cutoff: Cutoff) -> int:
    """Milliseconds since the epoch; a zone-less date-time is read in the local time zone."""
    if cutoff.zoned:
        return cutoff.ms
    try:
        wall = _EPOCH + dt.timedelta(milliseconds=cutoff.ms)
        offset = wall.astimezone().utcoffset()
    except (OverflowError, OSError, ValueError):
        raise CommandError("state prune --before requires a valid timestamp") from None
    return cutoff.ms - (0 if offset is None else offset // dt.timedelta(milliseconds=1))


def database_bytes(database: Path) -> int:
    """The database file's size plus its WAL's."""
    total = 0
    for path in (database, Path(f"{database}-wal")):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total


@dataclass(frozen=True)
class Tally:
    """Projection rows (blobs apart), and the blobs with their bytes."""

    rows: int
    blobs: int
    blob_bytes: int


def tally(reader: RowReader) -> Tally:
    """Count the projections as ``reader`` sees them (the open transaction's, or an image's)."""
    _names, tables = reader.table(PROJECTION_TABLES.format(schema="main"))
    rows = 0
    for (table,) in tables:
        if table != "blobs":
            _columns, [(count,)] = reader.table(f"SELECT count(*) FROM {quote(table)}")  # noqa: S608 - names from sqlite_master
            rows += count
    _columns, [(blobs, size)] = reader.table(
        "SELECT count(*), coalesce(sum(byte_length), 0) FROM blobs"
    )
    return Tally(rows=rows, blobs=blobs, blob_bytes=size)


def settle(store: LogFile) -> None:
    """After the compaction committed: checkpoint, then an integrity check.

    The installed image is compact already (ADR 0051), so no vacuum follows;
    the checkpoint moves it from the write-ahead log into the file while
    writers carry on (:meth:`pwf.store.ProjectionFile.checkpoint`).
    """
    try:
        store.checkpoint()
        verdict = store.integrity_check()
    except StoreError as error:
        raise CommandError(f"{store.path}: checkpoint after prune failed: {error}") from None
    if verdict is not None:
        raise CommandError(f"{store.path}: failed its integrity check after prune")


def report(  # noqa: PLR0913 - the original's report members
    selection: Selection,
    *,
    before: Tally,
    after: Tally,
    bytes_before: int,
    bytes_after: int,
    applied: bool,
) -> dict[str, object]:
    """The original's prune report (§13.2), counts for trees and runs."""
    return {
        "applied": applied,
        "blockedTrees": len(selection.blocked),
        "candidateTrees": len(selection.roots),
        "cutoff": iso_utc(selection.cutoff),
        "databaseBytesAfter": bytes_after,
        "databaseBytesBefore": bytes_before,
        "deletedBlobBytes": before.blob_bytes - after.blob_bytes,
        "deletedBlobs": before.blobs - after.blobs,
        "deletedRows": before.rows - after.rows,
        "selectedRuns": len(selection.runs),
    }


# --------------------------------------------------------------------------- the flow


@dataclass(frozen=True)
class Stamp:
    """What a prune's own event is appended with: the time, who asks and the request's cause."""

    at: int
    actor: Actor
    cause: Cause


def run_prune(
    store: LogFile, request: ClientRequest, recording: Recording, stamp: Stamp
) -> ClientResponse:
    """Select, back up, compact, checkpoint and record one ``state.prune`` (ADR 0018, 0022).

    Writers are held off only briefly.  A first write transaction adopts,
    validates and selects (a dry run ends there) and takes the maintenance
    lock; the backup is copied and checked outside any write transaction,
    from a read snapshot, while writers carry on, and so is the compacted
    database, in a scratch file.  The one write lock of its install (ADR
    0051) brings the backup up to the live head (the events appended
    meanwhile, folded into its projections), selects again and refuses when
    the selection or its signature changed, as the original does, then
    seals the compaction after the head and copies it over the live file:
    the backup holds exactly the log the compaction replaces, and nothing
    selected changed between the backup and the compaction.  The
    checkpoint and the record of the applied outcome follow, each on its
    own; the maintenance lock is held until then and released whatever
    happens.
    """
    begun = begin_prune(store, request, recording, stamp)
    if not isinstance(begun, PruneHandoff):
        return begun
    return finish_prune(begun, prepare_prune(begun))


class PruneHandoff(NamedTuple):
    """An applied ``state.prune`` planned in a write transaction, to prepare and install (ADR 0114).

    Between :func:`begin_prune` and :func:`finish_prune`, both on the
    store's own thread, :func:`prepare_prune` makes the backup's copy and
    folds the compaction into scratch files through connections of its own:
    a served host runs it off its writer thread.
    """

    store: LogFile
    request: ClientRequest
    recording: Recording
    plan: _Plan
    stamp: Stamp
    held: ExitStack
    """The maintenance lock, and the scratch files once prepared: closed by :func:`finish_prune`."""
    copy: Callable[[], None]
    shape: Shape


def begin_prune(
    store: LogFile, request: ClientRequest, recording: Recording, stamp: Stamp
) -> ClientResponse | PruneHandoff:
    """Adopt, validate and select in a write transaction; a dry run is recorded there.

    An applied prune takes the maintenance lock and checks its backup's
    destination; a refused destination is recorded at once.
    """
    held = ExitStack()
    try:
        planned = recording.decide(
            store, request, lambda tx, ctx: _planned(store, (tx, ctx), request, recording, held)
        )
        if not isinstance(planned, _Plan):
            held.close()
            return planned
        try:
            copy = prepare_backup(store, planned.destination, replace=False)
            shape = store.shape()
        except CommandError as error:
            rejected = Result(outcome="rejected", error=str(error))
        except PwfError as error:
            rejected = Result(outcome="rejected", error=f"prune failed: {error}")
        else:
            return PruneHandoff(store, request, recording, planned, stamp, held, copy, shape)
        answer = recording.finish(store, request, rejected)
        held.close()
    except BaseException:
        held.close()
        raise
    return answer


def prepare_prune(handoff: PruneHandoff) -> Prepared | Result | None:
    """The backup's copy, then the compaction folded off the lock and brought near the head.

    Reads the live file through a read-only connection of its own only.
    Returns the prepared scratch files, None when nothing is selected, or
    the rejection that ends the prune.  The backup's kept events are folded
    into a scratch file while writers carry on, and the backup and the
    scratch file are brought closer to the live head a few times; the write
    lock is left for :func:`finish_prune` (ADR 0047, 0051).
    """
    rejected = _backed_up(handoff.copy)
    if rejected is not None:
        return rejected
    destination, selection = handoff.plan.destination, handoff.plan.selected[0]
    if not selection.runs:
        return None
    database = handoff.store.path
    try:
        scratch = handoff.held.enter_context(
            prepared(database, handoff.shape, frozenset(selection.runs))
        )
        with open_file(database, read_only=True) as live:
            scratch.extend(destination)
            for _ in range(ROUNDS):
                head = live.head()
                if head.seq - scratch.segment.seq < CAUGHT_UP:
                    break
                catch_up(live, destination, head)
                scratch.extend(destination)
    except PwfError as error:
        return Result(outcome="rejected", error=f"prune failed: {error}")
    return scratch


def _backed_up(copy: Callable[[], None]) -> Result | None:
    """The checked backup, made outside any write transaction; a rejection when it failed."""
    try:
        copy()
    except CommandError as error:
        return Result(outcome="rejected", error=str(error))
    return None


def finish_prune(handoff: PruneHandoff, prepared: Prepared | Result | None) -> ClientResponse:
    """Under the write lock install what was prepared; checkpoint; record; release the lock."""
    job = _Compaction(handoff.store, handoff.recording, handoff.plan, handoff.stamp)
    try:
        if isinstance(prepared, Result):
            result = prepared
        elif prepared is None:
            result = _unchanged_log(job)
        else:
            try:
                result = _swapped(job, prepared)
            except PwfError as error:
                result = Result(outcome="rejected", error=f"prune failed: {error}")
        if result.outcome == "accepted":
            result = _settled(job.store, result)
        return handoff.recording.finish(job.store, handoff.request, result)
    finally:
        handoff.held.close()


def _pruned(
    store: LogFile,
    local: LogFile,
    request: ClientRequest,
    recording: Recording,
    apply: Callable[[_Plan], Result],
) -> ClientResponse:
    """Plan in a write transaction, ``apply`` the plan outside it, record the outcome after.

    ``local`` is the file the plan measures and locks (its path names the
    maintenance lock and the sizes): the log's own, or a shared log's host's
    local file.  The maintenance lock the plan takes is held until the
    outcome is recorded, and released whatever happens.
    """
    with ExitStack() as held:
        planned = recording.decide(
            store, request, lambda tx, ctx: _planned(local, (tx, ctx), request, recording, held)
        )
        if not isinstance(planned, _Plan):
            return planned
        return recording.finish(store, request, apply(planned))


@dataclass(frozen=True)
class _Plan:
    """What the first write transaction of an applied prune decided: where and what."""

    destination: Path
    selected: tuple[Selection, list[tuple[object, ...]]]


@dataclass(frozen=True)
class _Compaction:
    """What each step of an applied prune works with: the log, its recording, plan and stamp."""

    store: LogFile
    recording: Recording
    plan: _Plan
    stamp: Stamp


def _planned(
    store: LogFile,
    opened: tuple[FileTransaction, Context],
    request: ClientRequest,
    recording: Recording,
    held: ExitStack,
) -> _Plan | ClientResponse:
    """Validate and select; a dry run's recorded report, or the lock and the plan of the rest.

    The maintenance lock, once taken, is released when ``held`` closes.
    """
    tx, ctx = opened
    recording.validate(ctx, request)
    options = prune_options(request.payload)
    selection = select(ctx, resolve_cutoff(options.cutoff))
    if not options.apply:
        size = database_bytes(store.path)
        counted = tally(tx.reader())
        receipt = report(
            selection,
            before=counted,
            after=counted,
            bytes_before=size,
            bytes_after=size,
            applied=False,
        )
        return recording.record(ctx, request, Result(receipt=receipt))
    lock = acquire_lock(store.path)
    held.callback(lock.release)
    destination = Path(options.backup_path or "")
    _absent(destination)
    return _Plan(destination, (selection, selection_signature(tx.reader(), selection)))


def _absent(destination: Path) -> None:
    """The original's check before its backup (DOMAIN §13.2).

    Raises:
        CommandError: the destination exists.
    """
    if destination.exists():
        raise CommandError(f"Backup destination already exists: {destination}")


def _unchanged(
    reader: RowReader,
    again: Selection,
    selected: tuple[Selection, list[tuple[object, ...]]],
) -> None:
    """The selection made before the backup still holds under the write lock.

    Raises:
        CommandError: the original's "Prune selection changed after backup".
    """
    selection, signature = selected
    if again != selection or selection_signature(reader, again) != signature:
        raise CommandError("Prune selection changed after backup; run the command again")


def selection_signature(reader: RowReader, selection: Selection) -> list[tuple[object, ...]]:
    """What must not change between the backup and the compaction (DOMAIN §13.2).

    The selection itself is compared apart; here are the status, revision and
    ``updated_at`` of each selected run and its queue row.
    """
    marks = ", ".join("?" * len(selection.runs))
    if not marks:
        return []
    _names, rows = reader.table(
        "SELECT r.run_id, r.status, r.revision, r.updated_at, q.status, q.updated_at"  # noqa: S608 - placeholders only
        " FROM runs r LEFT JOIN run_queue q ON q.run_id = r.run_id"
        f" WHERE r.run_id IN ({marks}) ORDER BY r.run_id",
        tuple(selection.runs),
    )
    return [tuple(row) for row in rows]


CAUGHT_UP: Final = 50
"""Events left for the write lock: fewer, and the off-lock catch-ups stop."""
ROUNDS: Final = 5
"""At most this many catch-ups of the backup and the scratch file outside the write lock."""


def _swapped(job: _Compaction, scratch: Prepared) -> Result:
    """Under the write lock: catch the backup up, check the selection, seal and install the image.

    The lock is the one SQLite's backup API takes to install the image
    (ADR 0051): everything here runs in it, before the image is copied.
    """
    destination, selected = job.plan.destination, job.plan.selected
    selection = selected[0]

    def under_lock(tx: FileTransaction, image: sqlite3.Connection) -> tuple[int, Tally, Tally]:
        ctx = job.recording.open(tx)
        catch_up(tx.store, destination, tx.head)
        _unchanged(tx.reader(), select(ctx, selection.cutoff), selected)
        size = database_bytes(job.store.path)
        before = tally(tx.reader())
        scratch.seal(
            tx,
            image,
            destination,
            cutoff=selection.cutoff,
            at=job.stamp.at,
            actor=job.stamp.actor,
            cause=job.stamp.cause,
        )
        return size, before, tally(RowReader(image))

    try:
        size, before, after = scratch.install(job.store, under_lock)
    except CommandError as error:
        return Result(outcome="rejected", error=str(error))
    receipt = report(
        selection, before=before, after=after, bytes_before=size, bytes_after=size, applied=True
    )
    return Result(receipt=receipt)


def _unchanged_log(job: _Compaction) -> Result:
    """Nothing selected: the log stays as it is; the selection is checked all the same."""
    store, destination, selected = job.store, job.plan.destination, job.plan.selected
    selection = selected[0]
    with store.transaction() as tx:
        ctx = job.recording.open(tx)
        try:
            with tx.savepoint():
                catch_up(store, destination, tx.head)
                _unchanged(tx.reader(), select(ctx, selection.cutoff), selected)
                size = database_bytes(store.path)
                counted = tally(tx.reader())
        except CommandError as error:
            return Result(outcome="rejected", error=str(error))
    receipt = report(
        selection, before=counted, after=counted, bytes_before=size, bytes_after=size, applied=True
    )
    return Result(receipt=receipt)


def _settled(store: LogFile, result: Result) -> Result:
    """Checkpoint after the compaction committed, and the size after it in the report."""
    try:
        settle(store)
    except CommandError as error:
        return Result(outcome="rejected", error=str(error))
    assert isinstance(result.receipt, dict)
    return Result(receipt={**result.receipt, "databaseBytesAfter": database_bytes(store.path)})


def run_shared_prune(
    store: EventStore, shared: SharedLog, request: ClientRequest, recording: Recording, stamp: Stamp
) -> ClientResponse:
    """One ``state.prune`` of a shared log: a backup, then the bytes taken out under its lock.

    ADR 0107.

    The selection, blockers and report are the SQLite prune's, read from
    this host's caught-up local file.  The backup is a snapshot of the
    shared log (ADR 0106), taken without its lock; then, in one transaction
    under the log's lock, the backup is brought to the head, the selection is
    checked again, the removed runs' events lose their bytes in the shared
    log and in this host's copy (their seqs, hashes and leaves kept), and
    ``log.pruned`` is appended; its fold deletes the removed run trees.  This
    host then folds its blobs again; every other host does both when its
    catch-up takes in the ``log.pruned``.
    """
    # Both are read as a file is: the decision's transaction is the local file's, under the
    # shared log's lock, and the plan needs the local file's path (lock, sizes).
    both, local = cast("LogFile", store), cast("LogFile", store.projections_file)
    return _pruned(
        both,
        local,
        request,
        recording,
        lambda plan: _shared_applied(store, shared, recording, plan, stamp),
    )


def _shared_applied(
    store: EventStore,
    shared: SharedLog,
    recording: Recording,
    plan: _Plan,
    stamp: Stamp,
) -> Result:
    """The snapshot, then the strip and ``log.pruned`` under the lock, then the refold."""
    from pwf.host._backup import backup_shared  # noqa: PLC0415 - only maintenance

    try:
        backup_shared(store, shared, plan.destination, replace=False)
        size, before = _stripped(store, shared, recording, plan, stamp)
    except CommandError as error:
        return Result(outcome="rejected", error=str(error))
    except PwfError as error:
        return Result(outcome="rejected", error=f"prune failed: {error}")
    from pwf.store.log_writes import refold_owed, refolded  # noqa: PLC0415 - a shared log's only

    local = sqlite_file(store.projections_file)  # the host's caught-up copy
    connection = local.connection
    if refold_owed(connection):  # not yet folded by the store's own refold
        refold_blobs(store)  # the run trees went with the log.pruned's fold; the blobs
        refolded(connection)
    with local.snapshot() as reader:
        after = tally(reader)
    receipt = report(
        plan.selected[0], before=before, after=after, bytes_before=size, bytes_after=size,
        applied=True,
    )  # fmt: skip
    return Result(receipt={**receipt, "databaseBytesAfter": database_bytes(local.path)})


def _stripped(
    store: EventStore,
    shared: SharedLog,
    recording: Recording,
    plan: _Plan,
    stamp: Stamp,
) -> tuple[int, Tally]:
    """Under the shared log's lock: the backup to the head, the check, the strip, ``log.pruned``.

    The removed runs' events are found before the lock, up to the host's
    head; only those after it are read under the lock.  Returns the
    database's size and the tally before.
    """
    from pwf.store.log_writes import owe_refold  # noqa: PLC0415 - a shared log's only

    destination, selected = plan.destination, plan.selected
    selection = selected[0]
    read = store.head().seq
    early = _going(store, frozenset(selection.runs), until=read)
    with store.transaction() as decided:
        # The decision's transaction is this host's local file's, under the shared log's lock
        # (as in run_shared_prune): the strip and the mark that a refold is owed go in it too.
        tx = cast("FileTransaction", decided)
        shared.lift_idle_limit()  # the backup's tail and hash, the check: the host's own work
        ctx = recording.open(tx)
        catch_up(store, destination, tx.head)
        reader = tx.reader()
        _unchanged(reader, select(ctx, selection.cutoff), selected)
        size = database_bytes(store.projections_file.path)
        before = tally(reader)
        going = sorted({**early, **_going(store, frozenset(selection.runs), after=read)}.items())
        taken = tx.head.seq + 1
        shared.strip(going, taken)
        strip(tx.connection, going, taken)
        owe_refold(tx.connection, taken)
        pruned = LogPruned(
            cutoff=selection.cutoff,
            removed_run_ids=tuple(sorted(selection.runs)),
            removed_events=len(going),
            backup_path=str(destination.absolute()),
            backup_sha256=file_sha256(destination),
            backup_seq=tx.head.seq,
            backup_hash=tx.head.content_hash,
        )
        tx.append([pruned], at=stamp.at, actor=stamp.actor, cause=stamp.cause)
    return size, before


def _going(
    store: EventStore, removed: frozenset[str], *, after: int = 0, until: int | None = None
) -> dict[int, bytes]:
    """The seq and leaf of each event of the removed runs whose bytes go (ADR 0103's rule).

    Only the events after seq ``after`` up to ``until`` are read.
    """
    walk = Pruning(removed)
    for run_id in sorted(removed):
        for stored in store.find(after=after, until=until, run_id=run_id):
            walk.keep(stored)
    return dict(walk.going)
