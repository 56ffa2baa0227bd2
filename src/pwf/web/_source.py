"""Where the pages read from: the live database, read-only, or a cached replay up to a seq.

Every request opens its own read-only connection (SQLite URI ``mode=ro``),
so it never takes the write lock, never appends, and reads one consistent
snapshot per query beside any writer.  A page "as of seq N" reads a replay of
the log up to N (:func:`pwf.fold.replay.replay`, the fold of ``pwf replay
--until``) built once into a scratch directory that the server owns and
deletes when it stops (made with the first replay); the few most recent replays are kept.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pwf.errors import InputError, PwfError
from pwf.fold.replay import replay
from pwf.store.opening import open_file

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pwf.store import EventStore, Head, VerifyReport

__all__ = ["KEPT_REPLAYS", "Chain", "Database", "View"]

KEPT_REPLAYS: Final = 8
"""Replays kept in the scratch directory; the least recently viewed goes first."""


@dataclass(frozen=True)
class View:
    """One page's source: a read-only store and the seq it stands at."""

    store: EventStore
    at: int | None
    """The seq asked for (None: the live head)."""
    seq: int
    """The seq the store's state stands at: the head, or the end of the last whole batch."""
    live_head: int
    """The live log's head seq when the page was read."""


@dataclass(frozen=True)
class Chain:
    """``pwf log verify`` of the log a page reads."""

    report: VerifyReport
    head: Head


class Database:
    """A pwf database opened for reading only, with its replays cached in a scratch directory."""

    def __init__(self, path: Path, busy_timeout_ms: int = 5_000) -> None:
        """Check that ``path`` is a pwf database; the scratch directory waits for the first replay.

        Raises:
            InputError: there is no database at ``path``.
            StoreError: it is not a pwf database.
        """
        self.path = path.absolute()
        self.busy_timeout_ms = busy_timeout_ms
        with self._open(self.path):
            pass
        self._scratch: Path | None = None
        self._replays: OrderedDict[int, Path] = OrderedDict()
        self._verified: dict[Path, tuple[Head, VerifyReport]] = {}
        self._lock = threading.Lock()
        """Held while the kept replays are looked up or changed."""
        self._making = threading.Lock()
        """Held while a replay is made."""
        self._waiting = threading.Lock()
        """Held by the one request that waits for :attr:`_making`."""
        self._verifying = threading.Lock()
        """Held while a log is verified for :meth:`chain`."""

    @property
    def scratch(self) -> Path:
        """The scratch directory of the replays, made when the first is."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="pwf-web-"))
        return self._scratch

    def close(self) -> None:
        """Delete the scratch directory and every replay in it."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def _open(self, path: Path) -> EventStore:
        """The pwf database file at ``path``, read-only: the view reads files by path."""
        return open_file(path, read_only=True, busy_timeout_ms=self.busy_timeout_ms)

    @contextmanager
    def view(self, at: int | None) -> Iterator[View]:
        """The live database, or (with ``at``) the replay of its log up to seq ``at``.

        Raises:
            InputError: the log has no seq ``at``, or it was compacted away.
            PwfError: the replay up to ``at`` would wait behind two others (:meth:`_replay`).
        """
        with self._open(self.path) as live:
            head = live.head().seq
            if at is None:
                yield View(store=live, at=None, seq=head, live_head=head)
                return
            if at < 1 or at > head:
                raise InputError(f"the log ends at seq {head}; there is no seq {at}")
            replayed = self._replay(live, at)
        with self._open(replayed) as store:
            yield View(store=store, at=at, seq=store.head().seq, live_head=head)

    def _replay(self, live: EventStore, at: int) -> Path:
        """The replay up to ``at``: kept, or made now, one at a time.

        A kept replay is found without waiting for one being made.  One
        request at most waits for the replay being made; any other that needs
        a new one is refused at once, so a client asking for many seqs holds
        no more than two of the server's threads, and the live pages go on.

        Raises:
            PwfError: another replay is being made and one more already waits.
        """
        found = self._kept(at)
        if found is not None:
            return found
        if not self._making.acquire(blocking=False):
            if not self._waiting.acquire(blocking=False):
                raise PwfError(
                    f"the page as of seq {at} needs a replay of the log up to it, and another"
                    " is being made: ask again in a moment"
                )
            try:
                self._making.acquire()
            finally:
                self._waiting.release()
        try:
            return self._kept(at) or self._made(live, at)
        finally:
            self._making.release()

    def _kept(self, at: int) -> Path | None:
        with self._lock:
            found = self._replays.get(at)
            if found is None or not found.exists():
                return None
            self._replays.move_to_end(at)
            return found

    def _made(self, live: EventStore, at: int) -> Path:
        with self._lock:
            out = self.scratch / f"at-{at}.db"
        out.unlink(missing_ok=True)
        replay(live, out, until_seq=at)
        with self._lock:
            self._replays[at] = out
            while len(self._replays) > KEPT_REPLAYS:
                _, old = self._replays.popitem(last=False)
                self._verified.pop(old, None)  # one dict operation: no wait for a verify
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{old}{suffix}").unlink(missing_ok=True)
        return out

    def chain(self, view: View) -> Chain:
        """``pwf log verify`` of the view's log, as of its head when the page reads it.

        The first page of a log walks it whole; when its head has moved since,
        only the events appended after the last head found intact are walked
        (``verify(after=...)``): a log page of a live host costs what was
        appended since the last one, not the whole log again.  A broken chain
        is walked whole each time its head moves, so a repair shows.  One
        file is verified at a time; replays wait only for their own lock.
        """
        store = view.store
        head = store.head()
        path = store.projections_file.path
        with self._verifying:
            known = self._verified.get(path)
            if known is None or known[0] != head:
                after = known[1].head if known is not None and known[1].ok else None
                report = store.verify(after=after)
                known = (report.head, report)
                self._verified[path] = known
        return Chain(report=known[1], head=known[1].head)
