"""Fold the log into fresh read models; imports readmodel, store, events and errors (and sqlite3).

:func:`replay` copies a prefix of whole batches of the log, verbatim, into a
new pwf database and folds it into every projection.  :func:`rebuild` folds
the whole log into a scratch file beside the live database, then swaps the
rebuilt tables in under the live write lock, in one transaction.
:func:`check` verifies the chain and compares the live projections with a
rebuild, table by table.  Everything streams in chunks of seq, one
transaction each, so memory stays flat however long the log is (ADR 0013).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from pwf.errors import ChainError, InputError, StoreError
from pwf.events import REGISTRY, Entry, Envelope, LogCompacted, open_body
from pwf.readmodel import ReadModel
from pwf.splitfold import fold
from pwf.store import EMPTY, Head, VerifyReport, origin_of
from pwf.store.sqlite import FORMAT, SCHEMA, translate_error

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from pwf.store.sqlite import SqliteStore

__all__ = [
    "CHUNK",
    "Check",
    "Progress",
    "RebuildReport",
    "ReplayReport",
    "RowDifference",
    "TableDifference",
    "check",
    "rebuild",
    "replay",
]

CHUNK: Final = 10_000
"""Events folded per transaction: enough to amortise a commit, few enough to stream."""

Progress = Callable[[int, int], None]
"""Told ``(events folded so far, events to fold)`` after every chunk."""

Value = str | int | float | None
"""A cell as reports show it: BLOBs become lower-case hex text."""

_ENVELOPE: Final = msgspec.json.Decoder(Envelope)
_DATA: Final = {tag: msgspec.json.Decoder(cls) for tag, cls in REGISTRY.items()}


_CHAINED: Final[dict[str, object]] = {"content_hash": str, "prev_hash": str | None}
"""Envelope members whose pattern the chain check proves: a content hash equal
to the recomputed SHA-256 is lower-case hex, and a prev hash equal to it (or
to the origin's) is too.  Matching their regular expressions again would
cost a tenth of the decode."""


def _stored(tag: str, cls: type) -> msgspec.json.Decoder[Any]:
    """One pass from stored bytes to an :class:`Entry` of tag ``tag``.

    The struct is an ``Entry`` whose members are the envelope's, with its
    constraints and wire names, ``data`` typed as ``cls`` and ``type`` fixed
    to ``tag``: the same checks as :class:`Envelope` and then the data's
    decoder, without a second parse or a copy into a new ``Entry``.  Only
    the hashes' patterns are left to the chain check (:data:`_CHAINED`).
    """
    fields: list[tuple[str, object] | tuple[str, object, object]] = []
    rename = {}
    for field in msgspec.structs.fields(Envelope):
        name = "event" if field.name == "data" else field.name
        kind = cls if name == "event" else Literal[tag] if name == "type" else field.type
        if name in _CHAINED:
            kind = _CHAINED[name]
        if field.default is msgspec.NODEFAULT:
            fields.append((name, kind))
        else:
            fields.append((name, kind, field.default))
        rename[name] = field.encode_name
    struct = msgspec.defstruct(
        f"Stored{cls.__name__}",
        fields,
        bases=(Entry,),
        module=__name__,
        frozen=True,
        forbid_unknown_fields=True,
        kw_only=True,
        rename=rename,
    )
    return msgspec.json.Decoder(struct)


_STORED: Final = {tag.encode(): _stored(tag, cls) for tag, cls in REGISTRY.items()}
"""Known tag (as bytes) -> its one-pass decoder."""
_TYPE_MEMBER: Final = b',"type":"'
"""Canonical bytes end with this member, as ``type`` sorts last."""
_HASH_MEMBER: Final = b'"contentHash":"'
_HASH_SKIP: Final = len(_HASH_MEMBER) + 64 + 2
"""The member's key, its 64 hex digits, the closing quote and the comma."""

_SCRATCH_PRAGMAS: Final = (
    # A scratch file is deleted on any error, so it needs neither a journal nor fsync.
    "PRAGMA main.journal_mode = OFF",
    "PRAGMA main.synchronous = OFF",
    "PRAGMA temp_store = FILE",
)
_PROJECTION_TABLES: Final = (
    "SELECT name FROM {schema}.sqlite_master WHERE type = 'table'"
    " AND name NOT LIKE '\\_pwf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    " AND name != 'events' ORDER BY name"
)
_CHECKPOINT: Final = next(statement for statement in SCHEMA if "_pwf_checkpoint (" in statement)
_CREATE: Final = re.compile(r"^CREATE (UNIQUE INDEX|INDEX|TABLE) ")


class _Chain:
    """Typed events from stored rows, checking every link of the chain on the way.

    Each event's content hash is recomputed from its bytes, its seq must
    follow, its prev hash must name the event before and its batch may only
    stay or step by one.  The canonical form of the bytes is left to
    ``SqliteStore.verify``: it costs more than the whole fold.  Hashes up to
    ``verified`` are not recomputed: the caller has just checked them.
    """

    __slots__ = ("head", "origin", "verified")

    def __init__(self, head: Head, verified: int = 0) -> None:
        """Start after ``head``: zeros, or the head a compaction replaced."""
        self.head = self.origin = head
        self.verified = verified

    def entries(self, rows: Iterable[tuple[int, bytes]]) -> Iterator[Entry]:
        """Yield each row's typed event; raise ChainError at the first broken link."""
        seq, prev_hash, batch = self.head.seq, self.head.content_hash, self.head.batch
        verified, first = self.verified, self.origin.seq + 1
        try:
            for stored_seq, body in rows:
                seq += 1
                entry = _entry(seq, stored_seq, body)
                if seq > verified and _content_hash(body) != entry.content_hash:
                    raise ChainError(seq, "content hash does not match the event's bytes")
                if entry.prev_hash != prev_hash:
                    raise ChainError(
                        seq, "prevHash does not match the previous event's contentHash"
                    )
                if not batch <= entry.batch <= batch + 1 or (
                    seq == first and entry.batch != self.origin.batch + 1
                ):
                    raise ChainError(seq, f"batch {entry.batch} does not follow batch {batch}")
                prev_hash, batch = entry.content_hash, entry.batch
                yield entry
        finally:
            self.head = Head(seq=seq, content_hash=prev_hash, batch=batch)


def _content_hash(body: bytes) -> str:
    """What :func:`pwf.events.content_hash_of` says, without joining the two halves first.

    The body was just decoded into an envelope, so it holds a ``contentHash`` member.
    """
    start = body.find(_HASH_MEMBER)
    digest = hashlib.sha256(body[:start])
    digest.update(body[start + _HASH_SKIP :])
    return digest.hexdigest()


def _entry(seq: int, stored_seq: int, body: bytes) -> Entry:
    """The typed event stored at ``seq``; its content hash is the caller's to check."""
    if stored_seq != seq:
        raise ChainError(seq, f"seq {seq} is missing (next stored is {stored_seq})")
    member = body.rfind(_TYPE_MEMBER)
    decoder = _STORED.get(body[member + len(_TYPE_MEMBER) : -2]) if member > 0 else None
    if decoder is not None:
        try:
            entry: Entry = decoder.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass  # the long way names the fault
        else:
            if entry.seq != seq:
                raise ChainError(seq, f"the stored bytes say seq {entry.seq}")
            return entry
    return _opened(seq, body)  # other bytes, an old tag or an error: the long way


def _decoded(seq: int, body: bytes) -> Entry:
    """The typed event stored at ``seq``, for a second process that leaves the chain to us."""
    return _entry(seq, seq, body)


def _opened(seq: int, body: bytes) -> Entry:
    try:
        envelope = _ENVELOPE.decode(body)
        decoder = _DATA.get(envelope.type)
        if decoder is None:  # an old tag: let the upcasters have it
            entry = open_body(body)
        else:
            entry = Entry(
                seq=envelope.seq,
                batch=envelope.batch,
                at=envelope.at,
                type=envelope.type,
                actor=envelope.actor,
                cause=envelope.cause,
                event=decoder.decode(envelope.data),
                event_id=envelope.event_id,
                content_hash=envelope.content_hash,
                prev_hash=envelope.prev_hash,
            )
    except (msgspec.ValidationError, msgspec.DecodeError, InputError) as error:
        raise ChainError(seq, str(error)) from None
    if entry.seq != seq:
        raise ChainError(seq, f"the stored bytes say seq {entry.seq}")
    return entry


# --------------------------------------------------------------------------- scratch databases


class _Scratch:
    """A scratch database with the live one attached as ``live``; folds its log in chunks."""

    bulk: ReadModel | None = None
    """While a forked process folds some read models, the model of the caller's others."""

    def __init__(  # noqa: PLR0913 - each keyword shapes the fold
        self,
        path: Path,
        connection: sqlite3.Connection,
        *,
        copy_events: bool,
        progress: Progress | None,
        chunk: int,
        verified: int = 0,
    ) -> None:
        """Fold from ``live.events``; with ``copy_events`` copy those rows into ``main`` too.

        The content hashes of the events up to seq ``verified`` are trusted.
        """
        self.path = path
        self.connection = connection
        self.copy_events = copy_events
        self.progress = progress
        self.chunk = chunk
        self.model = ReadModel()
        row = connection.execute("SELECT seq, body FROM live.events ORDER BY seq LIMIT 1")
        found = row.fetchone()
        self.chain = _Chain(EMPTY if found is None else origin_of(found[0], found[1]), verified)
        self.total = 0

    def install(self) -> None:
        """Create the bookkeeping tables (and the log's, when copying) and every projection.

        The projections' secondary indexes wait for :meth:`index`, after the bulk of the fold.
        """
        with _transaction(self.connection):
            if self.copy_events:
                for statement in SCHEMA:
                    self.connection.execute(statement)
                self.connection.execute(
                    "INSERT INTO _pwf_meta (key, value) VALUES ('format', ?)", (FORMAT,)
                )
            else:
                self.connection.execute(_CHECKPOINT)
            self.model.install(self.connection, defer_indexes=True)

    def index(self) -> None:
        """Create the indexes :meth:`install` left out; what is folded after keeps them up."""
        with _transaction(self.connection):
            self.model.create_indexes(self.connection)

    def live_head(self) -> Head:
        """The live log's head, as the current transaction (if any) sees it."""
        row = self.connection.execute("SELECT seq, content_hash, batch FROM live._pwf_head")
        found = row.fetchone()
        return Head(seq=found[0], content_hash=found[1], batch=found[2]) if found else EMPTY

    def fold_split(self, last: int) -> None:
        """:meth:`fold_until` ``last``, with a forked process for some read models when it pays.

        See :func:`pwf.splitfold.fold`: this process reads and checks the
        chain and folds the read models the forked process leaves to it.
        """
        fold(self, self.chain.head.seq + 1, last, _decoded)

    def fold_until(self, last: int) -> None:
        """Fold every event after the chain's head up to seq ``last``, committing per chunk."""
        self.total = max(self.total, last)
        while self.chain.head.seq < last:
            first = self.chain.head.seq + 1
            self._chunk(first, min(first + self.chunk - 1, last))

    def _chunk(self, first: int, last: int) -> None:
        connection = self.connection
        with _transaction(connection):
            if self.copy_events:
                connection.execute(
                    "INSERT INTO main.events SELECT * FROM live.events"
                    " WHERE seq BETWEEN ? AND ? ORDER BY seq",
                    (first, last),
                )
            rows = connection.execute(
                f"SELECT seq, body FROM {'main' if self.copy_events else 'live'}.events"  # noqa: S608 - a constant schema name
                " WHERE seq BETWEEN ? AND ? ORDER BY seq",
                (first, last),
            )
            model = self.model if self.bulk is None else self.bulk
            model.fold(connection, self.chain.entries(rows))
            head = self.chain.head
            if head.seq != last:
                raise ChainError(head.seq + 1, f"seq {head.seq + 1} is missing from the log")
            if self.copy_events:
                connection.execute(
                    "INSERT INTO _pwf_head (id, seq, content_hash, batch) VALUES (1, ?, ?, ?)"
                    " ON CONFLICT (id) DO UPDATE SET seq = excluded.seq,"
                    " content_hash = excluded.content_hash, batch = excluded.batch",
                    (head.seq, head.content_hash, head.batch),
                )
        if self.progress is not None:
            self.progress(last, self.total)


@contextlib.contextmanager
def _scratch(  # noqa: PLR0913 - each keyword shapes the scratch database
    store: SqliteStore,
    beside: Path,
    infix: str,
    *,
    copy_events: bool,
    writable: bool,
    progress: Progress | None,
    chunk: int,
    anywhere: bool = False,
    verified: int = 0,
) -> Iterator[_Scratch]:
    """A new SQLite file next to ``beside``, deleted when the block ends, whatever happens.

    With ``anywhere`` it goes to the system's temporary directory when
    ``beside``'s directory is not writable.  The live database is attached
    read-only unless ``writable``; sqlite3 errors leave the block as pwf's.
    """
    try:
        descriptor, name = tempfile.mkstemp(prefix=f"{beside.name}.{infix}-", dir=beside.parent)
    except OSError:
        if not anywhere:
            raise
        descriptor, name = tempfile.mkstemp(prefix=f"{beside.name}.{infix}-")
    os.close(descriptor)
    path = Path(name)
    try:
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            for pragma in _SCRATCH_PRAGMAS:
                connection.execute(pragma)
            timeout = store.connection.execute("PRAGMA busy_timeout").fetchone()[0]
            connection.execute(f"PRAGMA busy_timeout = {int(timeout)}")
            mode = "rw" if writable else "ro"
            connection.execute("ATTACH DATABASE ? AS live", (f"{store.path.as_uri()}?mode={mode}",))
            if writable:
                level = store.connection.execute("PRAGMA synchronous").fetchone()[0]
                connection.execute(f"PRAGMA live.synchronous = {int(level)}")
            yield _Scratch(
                path,
                connection,
                copy_events=copy_events,
                progress=progress,
                chunk=chunk,
                verified=verified,
            )
        except sqlite3.Error as error:
            raise translate_error(error, store.path) from None
        finally:
            connection.close()
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection, begin: str = "BEGIN") -> Iterator[None]:
    """Run the block in a transaction, or inside the caller's when one is open."""
    if connection.in_transaction:
        yield
        return
    connection.execute(begin)
    try:
        yield
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _tables(connection: sqlite3.Connection, schema: Literal["main", "live"]) -> list[str]:
    """The projection tables of one attached database, sorted."""
    query = _PROJECTION_TABLES.format(schema=schema)
    return [row[0] for row in connection.execute(query)]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class ReplayReport:
    """What :func:`replay` wrote: the head it reached and how much it was asked for."""

    out: Path
    head: Head
    events: int
    """How many events the file holds: from the log's origin (its opening, or a compaction) on."""
    tables: int
    requested: int | None
    """The seq asked for: ``--until``, or the last seq at or before ``--until-time``."""
    log_seq: int
    """The live log's head seq when the replay started."""


def replay(  # noqa: PLR0913 - each keyword is a replay option
    store: SqliteStore,
    out: str | os.PathLike[str],
    *,
    until_seq: int | None = None,
    until_time: int | None = None,
    progress: Progress | None = None,
    chunk: int = CHUNK,
) -> ReplayReport:
    """Copy whole batches of the log up to a point into a new pwf database and fold them.

    ``until_seq`` keeps the events with ``seq <= until_seq``; ``until_time``
    keeps those before the first event with ``at > until_time``.  Either is
    rounded down to the end of the last batch that fits whole; neither keeps
    everything.  The file is built beside ``out`` and renamed into place.

    Raises:
        InputError: ``out`` exists, its directory does not, or both limits are given.
        ChainError: the log breaks its chain before the point reached.
    """
    target = Path(out).absolute()
    if until_seq is not None and until_time is not None:
        raise InputError("give --until or --until-time, not both")
    if target.exists():
        raise InputError(f"{target} already exists; replay writes a new file")
    if not target.parent.is_dir():
        raise InputError(f"no such directory: {target.parent}")
    with _scratch(
        store, target, "tmp", copy_events=True, writable=False, progress=progress, chunk=chunk
    ) as scratch:
        connection = scratch.connection
        log_seq = scratch.live_head().seq
        requested, last = _cut(connection, log_seq, until_seq, until_time, scratch.chain.origin)
        scratch.install()
        scratch.fold_split(last)
        scratch.index()
        connection.execute("DETACH DATABASE live")
        tables = len(_tables(connection, "main"))
        connection.execute("PRAGMA main.journal_mode = WAL")
        connection.close()
        if target.exists():
            raise InputError(f"{target} already exists; replay writes a new file")
        scratch.path.replace(target)
    head = scratch.chain.head
    return ReplayReport(
        out=target,
        head=head,
        events=head.seq - scratch.chain.origin.seq,
        tables=tables,
        requested=requested,
        log_seq=log_seq,
    )


def _cut(
    connection: sqlite3.Connection,
    log_seq: int,
    until_seq: int | None,
    until_time: int | None,
    origin: Head,
) -> tuple[int | None, int]:
    """The seq asked for, and the last seq of the last whole batch at or before it.

    A compacted log opens with its ``log.compacted`` event, stamped when the
    prune ran and so later than the kept events after it: the time cut looks
    past it, and the opening is always kept.  A seq at or before the origin
    was compacted away and is refused, naming the backup that holds it.

    Raises:
        InputError: ``until_seq`` lies before the compacted log's opening.
    """
    requested = until_seq
    if origin.seq and requested is not None and requested <= origin.seq:
        row = connection.execute("SELECT body FROM live.events WHERE seq = ?", (origin.seq + 1,))
        opening = open_body(row.fetchone()[0]).event
        backup = opening.backup_path if isinstance(opening, LogCompacted) else "its backup"
        raise InputError(
            f"seq {requested} was compacted away by a prune (this log continues after seq"
            f" {origin.seq}); replay the backup {backup} instead"
        )
    if until_time is not None:
        row = connection.execute(
            "SELECT min(seq) FROM live.events WHERE at > ? AND seq > ?",
            (until_time, origin.seq + 1 if origin.seq else 0),
        )
        after = row.fetchone()[0]
        requested = log_seq if after is None else after - 1
    if requested is None or requested >= log_seq:
        return requested, log_seq
    if requested < 1:
        return requested, 0
    row = connection.execute(
        "SELECT min(seq) FROM live.events WHERE batch ="
        " (SELECT batch FROM live.events WHERE seq = ?)",
        (requested + 1,),
    )
    first = row.fetchone()[0]
    return requested, requested if first is None else min(requested, first - 1)


# --------------------------------------------------------------------------- rebuild


@dataclass(frozen=True)
class RebuildReport:
    """What :func:`rebuild` swapped in: the events folded, up to which seq, and the tables."""

    events: int
    """How many events were folded: from the log's origin (its opening, or a compaction) on."""
    seq: int
    """The head seq the projections now stand at."""
    tables: int


def rebuild(
    store: SqliteStore, *, progress: Progress | None = None, chunk: int = CHUNK
) -> RebuildReport:
    """Rebuild every projection of the live database from its log, atomically.

    The log is folded into a scratch file beside the database while writers
    carry on.  Then, holding the live write lock, the tail appended meanwhile
    is folded too, the rebuilt head is checked against the live head, and the
    live projection tables are dropped, recreated and filled from the scratch
    file, all in that one transaction.  Until it commits the live tables stay
    exactly as they were, whatever fails or crashes.

    Raises:
        ChainError: the log breaks its chain; nothing was changed.
        StoreBusyError: the write lock was not granted in time.
    """
    with _scratch(
        store,
        store.path,
        "rebuild",
        copy_events=False,
        writable=True,
        progress=progress,
        chunk=chunk,
    ) as scratch:
        scratch.install()
        scratch.fold_split(scratch.live_head().seq)
        scratch.index()
        with _transaction(scratch.connection, "BEGIN IMMEDIATE"):
            head = scratch.live_head()
            scratch.fold_until(head.seq)
            if scratch.chain.head != head:
                raise ChainError(head.seq, "the log's head does not match its last event")
            tables = _swap(scratch.connection)
    with contextlib.suppress(sqlite3.Error):
        store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return RebuildReport(events=head.seq - scratch.chain.origin.seq, seq=head.seq, tables=tables)


def _swap(connection: sqlite3.Connection) -> int:
    """Replace the live projections and checkpoints by the rebuilt ones, in the open transaction."""
    for table in _tables(connection, "live"):
        connection.execute(f"DROP TABLE live.{_quote(table)}")
    tables = _tables(connection, "main")
    names = ", ".join("?" * len(tables))
    # Each table, then its indexes, as the projections' DDL creates them: the scratch file
    # created its indexes after the fold, but the live schema keeps its order.
    query = (
        f"SELECT item.sql FROM main.sqlite_master AS item WHERE item.tbl_name IN ({names})"  # noqa: S608 - placeholders only
        " AND item.sql IS NOT NULL ORDER BY (SELECT owner.rowid FROM main.sqlite_master AS owner"
        " WHERE owner.type = 'table' AND owner.name = item.tbl_name),"
        " item.type = 'index', item.rowid"
    )
    schema = connection.execute(query, tables).fetchall()
    for (statement,) in schema:
        qualified, found = _CREATE.subn(r"CREATE \1 live.", statement, count=1)
        if not found:
            raise StoreError(f"cannot recreate a projection object: {statement[:60]}")
        connection.execute(qualified)
    for table in tables:
        # Same definition on both sides and an empty target: SQLite copies the b-trees whole.
        connection.execute(
            f"INSERT INTO live.{_quote(table)} SELECT * FROM main.{_quote(table)}"  # noqa: S608 - names from sqlite_master
        )
    connection.execute("DELETE FROM live._pwf_checkpoint")
    connection.execute("INSERT INTO live._pwf_checkpoint SELECT * FROM main._pwf_checkpoint")
    return len(tables)


# --------------------------------------------------------------------------- check


@dataclass(frozen=True)
class RowDifference:
    """One row that differs: its primary key, and how."""

    key: dict[str, Value]
    kind: Literal["changed", "onlyInLive", "onlyInRebuild"]
    columns: dict[str, tuple[Value, Value]]
    """For a changed row: each differing column with its live and rebuilt values."""


@dataclass(frozen=True)
class TableDifference:
    """The first projection table whose live rows are not what the log folds to."""

    table: str
    reason: str
    rows: tuple[RowDifference, ...] = ()


@dataclass(frozen=True)
class Check:
    """What :func:`check` found: the chain's report, then the first differing table."""

    chain: VerifyReport
    tables: int = 0
    difference: TableDifference | None = None

    @property
    def ok(self) -> bool:
        """True when the chain holds and every projection equals its rebuild."""
        return self.chain.ok and self.difference is None


def check(
    store: SqliteStore, *, progress: Progress | None = None, rows: int = 5, chunk: int = CHUNK
) -> Check:
    """Verify the chain, then compare the live checkpoints and projections with a rebuild.

    The rebuild goes to a scratch file beside the database (or, when that
    directory is read-only, in the temporary directory) and is deleted after.
    Its tail and the comparison share one read snapshot of the live database,
    so appends made meanwhile are folded before comparing.  At most ``rows``
    differing rows of the first differing table are reported.
    """
    report = store.verify()
    if not report.ok:
        return Check(chain=report)
    try:
        with _scratch(
            store,
            store.path,
            "verify",
            copy_events=False,
            writable=False,
            progress=progress,
            chunk=chunk,
            anywhere=True,
            verified=report.head.seq,
        ) as scratch:
            scratch.install()
            scratch.fold_split(report.head.seq)
            scratch.index()
            with _transaction(scratch.connection):
                head = scratch.live_head()
                scratch.fold_until(head.seq)
                tables = _tables(scratch.connection, "main")
                difference = _compare(scratch.connection, rows)
    except ChainError as error:
        events = max(error.seq - 1 - (report.head.seq - report.events), 0)
        bad = VerifyReport(
            events=events, head=report.head, first_bad_seq=error.seq, reason=error.reason
        )
        return Check(chain=bad)
    chain = VerifyReport(events=head.seq - scratch.chain.origin.seq, head=head)
    return Check(chain=chain, tables=len(tables), difference=difference)


def _compare(connection: sqlite3.Connection, limit: int) -> TableDifference | None:
    """The first table where ``live`` and ``main`` differ: the checkpoints, then by name."""
    difference = _compare_table(connection, "_pwf_checkpoint", limit)
    if difference is not None:
        return difference
    live, rebuilt = _tables(connection, "live"), _tables(connection, "main")
    for table in sorted(set(live) | set(rebuilt)):
        if table not in rebuilt:
            return TableDifference(table, "the log does not produce this table")
        if table not in live:
            return TableDifference(table, "the live database lacks this table")
        difference = _compare_table(connection, table, limit)
        if difference is not None:
            return difference
    return None


def _compare_table(
    connection: sqlite3.Connection, table: str, limit: int
) -> TableDifference | None:
    quoted = _quote(table)
    live = connection.execute(f"PRAGMA live.table_info({quoted})").fetchall()
    rebuilt = connection.execute(f"PRAGMA main.table_info({quoted})").fetchall()
    names = [row[1] for row in rebuilt]
    if [row[1] for row in live] != names:
        return TableDifference(table, "its columns differ from the rebuilt table's")
    keys = [row[1] for row in sorted(rebuilt, key=lambda row: row[5]) if row[5]] or names
    columns = ", ".join(_quote(name) for name in names)
    found: dict[tuple[object, ...], RowDifference] = {}
    for side, other in (("live", "main"), ("main", "live")):
        extra = connection.execute(
            f"SELECT {columns} FROM {side}.{quoted} EXCEPT SELECT {columns} FROM {other}.{quoted}"  # noqa: S608 - names from sqlite_master
            " LIMIT ?",
            (limit,),
        )
        for row in extra.fetchall():
            values = dict(zip(names, row, strict=True))
            key = tuple(values[name] for name in keys)
            if key not in found and len(found) < limit:
                found[key] = _row_difference(connection, table, names, keys, values, side=side)
    if found:
        return TableDifference(table, "rows differ from the log's rebuild", tuple(found.values()))
    counts = [
        connection.execute(f"SELECT count(*) FROM {schema}.{quoted}").fetchone()[0]  # noqa: S608 - names from sqlite_master
        for schema in ("live", "main")
    ]
    if counts[0] != counts[1]:
        return TableDifference(table, f"it holds {counts[0]} rows, the rebuild {counts[1]}")
    return None


def _row_difference(  # noqa: PLR0913 - one row's whole context
    connection: sqlite3.Connection,
    table: str,
    names: list[str],
    keys: list[str],
    values: dict[str, object],
    *,
    side: str,
) -> RowDifference:
    """Pair a row found on one side with the other side's row of the same key."""
    other = "main" if side == "live" else "live"
    where = " AND ".join(f"{_quote(name)} IS ?" for name in keys)
    match = connection.execute(
        f"SELECT {', '.join(_quote(name) for name in names)} FROM {other}.{_quote(table)}"  # noqa: S608 - names from sqlite_master
        f" WHERE {where}",
        tuple(values[name] for name in keys),
    ).fetchone()
    key = {name: _shown(values[name]) for name in keys}
    if match is None:
        return RowDifference(key, "onlyInLive" if side == "live" else "onlyInRebuild", {})
    theirs = dict(zip(names, match, strict=True))
    live, rebuilt = (values, theirs) if side == "live" else (theirs, values)
    changed = {
        name: (_shown(live[name]), _shown(rebuilt[name]))
        for name in names
        if live[name] != rebuilt[name] or type(live[name]) is not type(rebuilt[name])
    }
    return RowDifference(key, "changed", changed)


def _shown(value: object) -> Value:
    if isinstance(value, bytes):
        return value.hex()
    assert value is None or isinstance(value, str | int | float)
    return value
