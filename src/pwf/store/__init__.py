"""The event store: what every log implementation offers; imports canonical, events, errors.

A store appends batches atomically (gapless seq, prev-hash chain, content hash
over the stored canonical bytes), streams ranges in constant memory, looks
events up by their indexed columns and verifies the chain from stored bytes.
:mod:`pwf.store.sqlite` is the embedded default.  :class:`EventLog` is what
every log of record keeps; :class:`EventStore` is a log with its projections,
which is what the host, the CLI and the readers are typed against (ADR 0044).
Two capabilities name the SQLite files apart from the log (ADR 0059): the
:class:`ProjectionFile` every store keeps its projections in (SQLite by
design, ADR 0038), and the :class:`LogFile`, a log of record that is one
SQLite file, which backup and prune act on.  Only modules of this package
touch a store's connection.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Final, Protocol, Self, TypeVar

import msgspec

from pwf.errors import ChainError, InputError
from pwf.events import LogCompacted, LogMigrated, LogPruned, open_body

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator, Sequence
    from contextlib import AbstractContextManager
    from pathlib import Path

    from pwf.commands import Reader
    from pwf.events import Actor, Cause, Entry, Event, Sealed
    from pwf.sqlreader import RowReader
    from pwf.store.image import Shape
    from pwf.store.unit import Observe, Outcome, Work

__all__ = [
    "COMPACTED_INSIDE",
    "EMPTY",
    "PREV_FAULT",
    "REWRITES",
    "AppendHook",
    "Appends",
    "AppendsAlone",
    "EventLog",
    "EventStore",
    "FileTransaction",
    "Head",
    "LogFile",
    "ProjectionFile",
    "SharedLog",
    "StoreTransaction",
    "StoredEvent",
    "Transaction",
    "VerifyReport",
    "check_link",
    "check_position",
    "link_fault",
    "origin_of",
]


T = TypeVar("T")


class Head(msgspec.Struct, frozen=True):
    """The log's tip: last seq, its content hash and its batch (zeros when empty)."""

    seq: int
    content_hash: str | None
    batch: int


EMPTY: Final = Head(seq=0, content_hash=None, batch=0)
"""Where every log starts that was never compacted."""
REWRITES: Final = (LogCompacted.TAG, LogMigrated.TAG, LogPruned.TAG)
"""The events after which the bytes stored before them may not be those an earlier verify read.

A compaction and a migration write the log anew, a prune takes bytes out
(ADR 0103): a verify ``after`` a head walks the whole log when one follows it.
"""


PREV_FAULT: Final = "prevHash does not match the previous event's contentHash"
COMPACTED_INSIDE: Final = "log.compacted may only open a log"


def link_fault(
    prev_hash: str | None, batch: int, before_hash: str | None, before_batch: int, *, opens: bool
) -> str | None:
    """The one chain-link rule between an event and the one before it; why it fails, or None.

    Every walker of a log asks this and nothing else about a link (the
    deep and chain-only verify, the parallel walk, replay, rebuild, the
    JSONL import, the backup proof), so they cannot disagree.  The event's
    seq must follow (:func:`check_position`); its ``prevHash`` names the
    content hash of the event before (``before_hash``, None before the first
    event of a log never compacted); its batch stays at ``before_batch`` or
    steps by exactly one, and the event that opens the log (``opens``: the
    one before is then the origin) steps.
    """
    if prev_hash != before_hash:
        return PREV_FAULT
    if batch != before_batch + 1 and (opens or batch != before_batch):
        return f"batch {batch} does not follow batch {before_batch}"
    return None


def check_link(  # noqa: PLR0913 - the link's two ends and where the log opens
    seq: int,
    prev_hash: str | None,
    batch: int,
    before: Head | None,
    *,
    opens: bool,
    compacted: bool,
) -> None:
    """:func:`link_fault` raised at ``seq``, and the rule that ``log.compacted`` opens a log.

    ``before`` None checks only where a ``log.compacted`` stands: the event
    starts a range of a split walk and the join checks its link.

    Raises:
        ChainError: the link is broken, or ``log.compacted`` stands inside the log.
    """
    if before is not None:
        reason = link_fault(prev_hash, batch, before.content_hash, before.batch, opens=opens)
        if reason is not None:
            raise ChainError(seq, reason)
    if compacted and not opens:
        raise ChainError(seq, COMPACTED_INSIDE)


def check_position(seq: int, stored_seq: object) -> None:
    """The row expected at ``seq`` is there.

    Raises:
        ChainError: seq ``seq`` is missing.
    """
    if stored_seq != seq:
        raise ChainError(seq, f"seq {seq} is missing (next stored is {stored_seq})")


def origin_of(seq: int, body: bytes) -> Head:
    """Where the chain starts, given the log's first stored event.

    A log starts at seq 1 with no prevHash, or, once compacted, at the
    ``log.compacted`` event that hangs off the head it replaced (DOMAIN §13.2):
    its seq, prevHash and batch continue that head, so the walk starts there.

    Raises:
        ChainError: the first event is neither seq 1 nor a consistent ``log.compacted``.
    """
    if seq == 1:
        return EMPTY
    try:
        entry = open_body(body)
    except InputError as error:
        raise ChainError(seq, str(error)) from None
    event = entry.event
    if not isinstance(event, LogCompacted):
        raise ChainError(1, f"seq 1 is missing (next stored is {seq})")
    if (event.replaced_seq, event.replaced_batch) != (seq - 1, entry.batch - 1):
        raise ChainError(seq, "log.compacted does not continue the head it says it replaced")
    return Head(
        seq=event.replaced_seq, content_hash=event.replaced_hash, batch=event.replaced_batch
    )


class StoredEvent(msgspec.Struct, frozen=True):
    """One row of the log: its seq and its exact stored bytes."""

    seq: int
    body: bytes


class VerifyReport(msgspec.Struct, frozen=True):
    """What ``verify`` found: events checked and the first bad seq, if any."""

    events: int
    head: Head
    first_bad_seq: int | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when the whole chain holds."""
        return self.first_bad_seq is None


class AppendHook(Protocol):
    """Runs inside the append transaction, after the batch's rows are written.

    The read model uses it to project the batch and advance its checkpoint in
    the same transaction (ADR 0005).  A hook may also have a
    ``settle(connection, seq)`` method, which the transaction calls once just
    before it commits, with the seq of the head it commits, when it wrote any
    event: the read model moves its checkpoints there (ADR 0033).
    """

    def __call__(self, connection: object, batch: Sequence[Sealed]) -> None:
        """Apply ``batch`` through ``connection`` (the store's own)."""


class AppendsAlone(ABC):
    """A log's :meth:`~Appends.append`: one batch in a write transaction of its own."""

    __slots__ = ()

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Transaction]:
        """Take the write lock; commit on exit."""

    def append(
        self,
        events: Sequence[Event],
        *,
        at: int,
        actor: Actor,
        cause: Cause | None = None,
    ) -> list[Sealed]:
        """Append one batch atomically and return it sealed."""
        with self.transaction() as tx:
            return tx.append(events, at=at, actor=actor, cause=cause)


class Appends(Protocol):
    """What takes batches: a log, or one of its write transactions."""

    def append(
        self,
        events: Sequence[Event],
        *,
        at: int,
        actor: Actor,
        cause: Cause | None = None,
    ) -> list[Sealed]:
        """Seal and write one batch and return it sealed; several calls make several batches.

        A log writes each batch in a write transaction of its own; a
        transaction writes them all in itself, to commit or vanish together.
        """


class Transaction(Appends, Protocol):
    """A write transaction of a log: the write lock is held until it ends."""

    @property
    def head(self) -> Head:
        """The log's tip as seen inside the transaction."""

    def stage(
        self,
        events: Sequence[Event],
        *,
        at: int,
        actor: Actor,
        cause: Cause | None = None,
    ) -> list[Sealed]:
        """Add events to the transaction's one open batch."""

    def savepoint(self) -> AbstractContextManager[None]:
        """Undo what the block wrote if it raises."""

    def insert_verified(self, entry: Entry, body: bytes) -> None:
        """Write an already checked event verbatim (import); the caller checked the chain."""


class EventLog(Appends, Protocol):
    """The contract every log implementation keeps (SQLite, PostgreSQL, a mirrored file).

    ``tests/contract`` runs the same tests against each.
    """

    def transaction(self) -> AbstractContextManager[Transaction]:
        """Take the write lock; decide and append inside; commit on exit."""

    def head(self) -> Head:
        """The log's tip."""

    def origin(self) -> Head:
        """Where the chain starts: zeros, or the head a compaction replaced."""

    def read(self, first: int = 1, last: int | None = None) -> Iterator[StoredEvent]:
        """Stream stored events with ``first <= seq <= last`` in seq order."""

    def entries(self, first: int = 1, last: int | None = None) -> Iterator[Entry]:
        """Stream checked, typed events with ``first <= seq <= last``."""

    def find(
        self, *, after: int = 0, until: int | None = None, **wanted: str | int | None
    ) -> Iterator[StoredEvent]:
        """Stream the events after seq ``after`` (up to ``until``) whose indexed columns match.

        Besides the columns of :data:`pwf.store.sealing.LOOKUP_COLUMNS`,
        ``wanted`` may hold ``at_least`` and ``at_most``, bounds of the events'
        time ``at`` (epoch ms) read from the stored columns: a listing by time
        reads no event's bytes but those it lists.
        """

    def pruned(self, first: int = 1, last: int | None = None) -> Iterator[tuple[int, int]]:
        """The seqs ``first..last`` whose bytes a prune took (ADR 0103), in seq order.

        Each with the seq of the ``log.pruned`` that took them; :meth:`read`
        and :meth:`find` pass these seqs over.
        """

    def verify(self, *, deep: bool = True, after: Head | None = None) -> VerifyReport:
        """Check the whole chain from stored bytes (``deep``: parse and check columns too).

        ``after`` is a head of this log that an earlier verify of it found
        intact: a store may then walk only the events after it, linked to it,
        with the stored tree's hashes they complete, when the log still holds
        it and no event since is one of :data:`REWRITES`.  The report counts
        the whole log either way.
        """

    def close(self) -> None:
        """Close the connections."""


class StoreTransaction(Transaction, Protocol):
    """A write transaction of a store with projections: deciders read them inside it."""

    def new_batch(self) -> None:
        """Let the next :meth:`stage` open a new batch, as a new transaction would."""

    def reader(self) -> Reader:
        """The read-model port (ADR 0008): the projections as this transaction sees them."""


class EventStore(EventLog, Protocol):
    """A log with its projections beside it: what the host, the CLI and the readers use.

    :class:`pwf.store.sqlite.SqliteStore` keeps both in one file;
    :class:`pwf.store.mirror.MirroredStore` keeps the log in PostgreSQL and
    the projections in a local file caught up from it.  A decision is run
    as the store's unit of work (:meth:`run`, :meth:`run_group`, ADR 0087).
    What is SQLite's alone is asked for as a capability: :attr:`log_file`
    (backup, prune, compaction) and :attr:`projections_file` (the folds,
    the integrity check); rooms above the store open stores through
    :mod:`pwf.store.opening` and never name a backend (ADR 0088).
    """

    @property
    def log_file(self) -> LogFile | None:
        """The SQLite file that is the log of record, which file maintenance acts on.

        None when the log of record is elsewhere (a shared log in PostgreSQL):
        ``state.backup`` and ``state.prune`` then act on :attr:`shared_log`
        (ADR 0106, ADR 0107; before them they refused, ADR 0038 D6).
        """

    @property
    def shared_log(self) -> SharedLog | None:
        """The log of record in PostgreSQL, which its backup reads; None for a file (ADR 0106)."""

    @property
    def projections_file(self) -> ProjectionFile:
        """The SQLite file that holds the projections, for what reads or folds the file itself.

        ``state.status`` (its size), ``state.verify`` (SQLite's integrity
        check), replay, rebuild and verify's rebuild read the database file
        (HOST §2.16, §2.17); nothing writes the log through it.
        """

    @property
    def log_name(self) -> str:
        """What messages call the log of record (a file's path, or a URL without password)."""

    def catch_up(self) -> int:
        """Fold what a shared log of record holds beyond the projections; how many events."""

    def transaction(self) -> AbstractContextManager[StoreTransaction]:
        """Take the write lock; decide, stage and read inside; commit on exit."""

    def run(self, work: Work[T]) -> T:
        """One decision as one unit of work: its own write transaction, committed on return.

        The store decides how (ADR 0087): a :class:`~pwf.store.unit.Repeatable`
        decision may be made ahead of a shared log's lock and made again
        when that log moved (ADR 0062); a :class:`~pwf.store.unit.OnceOnly`
        one runs once, under the lock.
        """

    def run_group(
        self, works: Iterator[Work[object]], observe: Observe | None = None
    ) -> list[Outcome]:
        """Decide ``works`` one after another in one write transaction and commit (ADR 0052).

        Each work is its own batch's decision and fails alone (its writes are
        undone, the others' kept); the store decides how (bare, with
        savepoints, ADR 0061) and runs again only repeatable work.  Works
        are taken from ``works`` while the group is open, so a caller may
        let later arrivals join.  One outcome per work taken; when the
        transaction fails to commit, each of them holds that failure.
        ``observe`` is told ``"redone"`` when the group ran again.
        """

    def reader(self) -> RowReader:
        """Read the committed projections (queries, explain, views, verdicts).

        The projections are SQLite's in every store (ADR 0038), so this is
        :class:`pwf.sqlreader.RowReader`, with its listings (``table``) too.
        """

    def snapshot(self) -> AbstractContextManager[RowReader]:
        """Read one committed moment of the projections (the open transaction's, inside one)."""

    def __enter__(self) -> Self:
        """Use as a context manager that closes on exit."""

    def __exit__(self, *_: object) -> None:
        """Close on exit."""


class ProjectionFile(Protocol):
    """The local SQLite file a store keeps its projections in, with its copy of the log.

    SQLite by design (ADR 0038): the projections, the deciders' reads and
    every fold of a pwf database (replay, rebuild, verify's rebuild) are
    SQLite's, whichever log is the log of record.  What reads the file as a
    file is typed against this, never against the log (ADR 0059).
    """

    @property
    def path(self) -> Path:
        """The file."""

    @property
    def busy_timeout_ms(self) -> int:
        """How long a writer of the file waits for its write lock."""

    @property
    def synchronous_level(self) -> int:
        """The file's ``PRAGMA synchronous`` (0 OFF to 3 EXTRA), for files a fold attaches."""

    def snapshot(self) -> AbstractContextManager[RowReader]:
        """Read one committed moment of the projections."""

    def checkpoint(self) -> None:
        """Move the write-ahead log into the file and truncate it (after a bulk write)."""

    def upgrade(
        self,
        current: Callable[[sqlite3.Connection], bool],
        install: Callable[[sqlite3.Connection], object],
    ) -> None:
        """Install schema beside the projections that is not ``current`` (views of an old file)."""

    def integrity_check(self) -> str | None:
        """None when SQLite's integrity and foreign-key checks pass, else what they found."""

    def install(self, *installers: Callable[[sqlite3.Connection], object]) -> None:
        """Create schema beside the projections (their tables, the views) in one transaction."""


class LogFile(EventLog, ProjectionFile, Protocol):
    """A log of record that is one SQLite file: the capability backup and prune need.

    Only :class:`pwf.store.sqlite.SqliteStore` on its own file has it; a
    shared log in PostgreSQL has none, and the verbs that need it refuse
    there (ADR 0059).  Its members hand out SQLite's own objects, which is
    what the capability is.
    """

    def transaction(self) -> AbstractContextManager[FileTransaction]:
        """The file's write transaction, with its reader (the projections beside the log)."""

    def backup_to(self, target: Path) -> None:
        """Copy one committed state of the file into the empty file ``target``, in one step.

        It reads through a connection of its own, so no write transaction is
        held and writers commit meanwhile.
        """

    def shape(self) -> Shape:
        """The file's header marks and schema, which a compacted image copies."""

    def install_image(self, image: sqlite3.Connection, work: Callable[[FileTransaction], T]) -> T:
        """Copy the database ``image`` over this file in one write transaction, ``work`` first."""


class SharedLog(Protocol):
    """A log of record shared in PostgreSQL: the capability its backup needs (ADR 0106)."""

    def snapshot_to(self, target: Path) -> Head:
        """Write one consistent snapshot of the log, as stored, into the new SQLite file ``target``.

        The snapshot is read in one read-only transaction that takes no lock
        a writer waits for; the file gets the log's rows, tree, head and
        ``_pwf_meta`` but no projections.  Returns the head of the snapshot.
        """

    def restore_from(self, backup: Path) -> Head:
        """Copy the proved pwf database ``backup`` into this empty log, in one transaction.

        Raises:
            InputError: the log holds an event already (ADR 0107).
        """

    def lift_idle_limit(self) -> None:
        """Let the write transaction under way wait on this process as long as its work takes.

        A write holding the log's lock is otherwise ended when it waits on
        its own process past a limit (ADR 0121); an operator's step that
        hashes or folds between its statements (a prune) lifts it.
        """

    def strip(self, going: Sequence[tuple[int, bytes]], taken: int) -> None:
        """Take the bytes of ``going`` (seq, leaf) out of the log, keeping each leaf (ADR 0107).

        Runs inside the transaction that holds the log's lock; ``taken`` is
        the seq the prune's ``log.pruned`` is about to stand at.
        """


class FileTransaction(StoreTransaction, Protocol):
    """The write transaction of a log that is one SQLite file (:meth:`LogFile.transaction`).

    What backup, prune and compaction are given under the file's write lock:
    the decision's transaction, and the file it belongs to.
    """

    @property
    def store(self) -> LogFile:
        """The file whose write lock the transaction holds."""

    @property
    def connection(self) -> sqlite3.Connection:
        """The file's connection, inside the transaction (a compacted image is copied over it)."""

    def reader(self) -> RowReader:
        """The projections as this transaction sees them, with their listings (``table``)."""
