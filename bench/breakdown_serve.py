"""What the served writer spends per ``run.start``, deciding groups of 16 in one process.

Opens a fresh database as ``pwf serve`` does (a serving store with the read
model, a :class:`~pwf.host.served.ServedHost` holding the claim) and decides
``bench/bench_serve.py``'s request lines as its writer does: 16 at a time in
one transaction, each in its own batch, without savepoints (ADR 0061) or,
with ``--savepoints``, each in its own savepoint.  Prints, per request, the
writer thread's own processor time (``time.thread_time``: no other thread,
no waiting), the statements run, and with ``--statements`` each statement's
share of the thread's time.  The statement counts do not depend on the
machine's load; the times do, so compare runs made one after another.

``python bench/breakdown_serve.py [--savepoints] [--statements] [--normal]``
(``--normal``: ``synchronous=NORMAL``, leaving the disk's ``fsync`` out).
"""

from __future__ import annotations

import collections
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_serve import _line, _template

from pwf.host.served import Identity, ServedHost
from pwf.protocol.client import parse_request
from pwf.readmodel import ReadModel
from pwf.sqlviews import install_views
from pwf.store.sqlite import SqliteStore

__all__ = ["main"]

GROUP: Final = 16
GROUPS: Final = 150
AT: Final = 1_764_403_200_000
SPENT: collections.defaultdict[str, float] = collections.defaultdict(float)
RUN: collections.Counter[str] = collections.Counter()


class _Timed(sqlite3.Connection):
    """A connection that adds each statement's thread time to :data:`SPENT`."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # noqa: ANN401 - as sqlite3's
        began = time.thread_time()
        try:
            return super().execute(sql, parameters)
        finally:
            SPENT[sql[:60]] += time.thread_time() - began
            RUN[sql[:60]] += 1

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:  # noqa: ANN401 - as sqlite3's
        began = time.thread_time()
        try:
            return super().executemany(sql, parameters)
        finally:
            SPENT[sql[:60]] += time.thread_time() - began
            RUN[sql[:60]] += 1


def _open(db: Path, *, normal: bool, timed: bool) -> tuple[SqliteStore, ServedHost]:
    connect = sqlite3.connect
    if timed:
        sqlite3.connect = lambda *args, **kwargs: connect(*args, factory=_Timed, **kwargs)  # type: ignore[assignment]
    try:
        read_model = ReadModel()
        store = SqliteStore(
            db,
            create=True,
            synchronous="NORMAL" if normal else "FULL",
            hooks=[read_model],
            serving=True,
        )
    finally:
        sqlite3.connect = connect
    store.install(read_model.install, install_views)
    host = ServedHost(store, Identity("host-bench", os.getpid(), "bench"))
    host.start("ab" * 32, 3_600_000, AT)
    return store, host


def _decide(store: SqliteStore, host: ServedHost, lines: list[bytes], *, bare: bool) -> None:
    requests = [parse_request(line) for line in lines]
    with store.transaction() as tx:
        host.shared = tx
        tx.bare = bare
        try:
            for request in requests:
                with tx.savepoint():
                    response, _ = host.decide(request, AT, "connection-bench")
                    if response.outcome != "accepted":
                        raise RuntimeError(str(response))
        finally:
            host.shared = None


def run(*, bare: bool = True, normal: bool = False, timed: bool = False) -> list[str]:
    """Report lines for :data:`GROUPS` groups of :data:`GROUP` ``run.start``."""
    with tempfile.TemporaryDirectory(prefix="pwf-breakdown-") as workdir:
        store, host = _open(Path(workdir) / "state.db", normal=normal, timed=timed)
        templates = [_template(f"c-{client}") for client in range(GROUP)]
        groups = [
            [_line(templates[client], number * GROUP + client) for client in range(GROUP)]
            for number in range(GROUPS + 5)
        ]
        try:
            for lines in groups[:5]:  # warm the caches and the statement cache
                _decide(store, host, lines, bare=bare)
            SPENT.clear()
            RUN.clear()
            began = time.thread_time()
            for lines in groups[5:]:
                _decide(store, host, lines, bare=bare)
            spent = time.thread_time() - began
        finally:
            store.close()
    count = GROUPS * GROUP
    how = "without savepoints" if bare else "each in its own savepoint"
    sync = "NORMAL" if normal else "FULL"
    lines_out = [
        f"served writer, {count} run.start in groups of {GROUP}, {how}, synchronous={sync}:",
        f"  writer thread  {spent * 1000 / count:.3f} ms/request",
    ]
    if timed:
        lines_out.append(f"  statements  {sum(RUN.values()) / count:.1f}/request")
        lines_out.extend(
            f"  {seconds * 1000 / count:.4f} ms  {RUN[text] / count:5.2f}/request  {text}"
            for text, seconds in sorted(SPENT.items(), key=lambda item: -item[1])[:20]
        )
        lines_out.append(f"  all statements  {sum(SPENT.values()) * 1000 / count:.3f} ms/request")
    return lines_out


def main() -> int:
    """Run the breakdown from the command line."""
    options = set(sys.argv[1:])
    for line in run(
        bare="--savepoints" not in options,
        normal="--normal" in options,
        timed="--statements" in options,
    ):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
