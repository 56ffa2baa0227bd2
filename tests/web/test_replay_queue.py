"""Pages as of an earlier seq: one replay is made at a time, one more waits, the rest are refused.

A replay of a long log takes seconds (15 s up to seq 500 000 of a million
events).  Every request for a new seq waited for the one being made, each
holding one of the server's threads: a client asking for forty seqs froze
every page, the live ones too.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest

from pwf.errors import PwfError
from pwf.fold.replay import replay
from pwf.web import _source
from pwf.web._source import Database

if TYPE_CHECKING:
    from pathlib import Path

    from pwf.store import EventStore


def test_one_replay_is_made_one_waits_and_the_others_are_refused(
    world_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, started = threading.Event(), threading.Event()
    go.set()

    def slow(live: EventStore, out: Path, *, until_seq: int) -> object:
        started.set()
        assert go.wait(30)
        return replay(live, out, until_seq=until_seq)

    monkeypatch.setattr(_source, "replay", slow)
    database = Database(world_db)
    seen: dict[int, int] = {}

    def view(at: int) -> None:
        with database.view(at) as page:
            seen[at] = page.seq

    try:
        view(40)  # kept from here on
        go.clear()
        started.clear()
        making = threading.Thread(target=view, args=(50,))
        making.start()
        assert started.wait(30)
        waiting = threading.Thread(target=view, args=(51,))
        waiting.start()
        for _ in range(3000):
            if database._waiting.locked():
                break
            threading.Event().wait(0.01)
        assert database._waiting.locked()
        asked = time.monotonic()
        with pytest.raises(PwfError, match="another is being made"):
            view(52)
        view(40)  # a kept replay does not wait for the one being made
        assert time.monotonic() - asked < 1.5  # refused at once, and the kept one read at once
        go.set()
        making.join(30)
        waiting.join(30)
        assert sorted(seen) == [40, 50, 51]
        assert not database._making.locked()
        assert not database._waiting.locked()
        view(52)  # asked again once they are made, it is made
        assert 52 in seen
    finally:
        go.set()
        database.close()
