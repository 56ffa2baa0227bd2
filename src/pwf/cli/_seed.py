"""``PWF_SEED``: ids the edge mints (worker and coordinator epochs, maintenance request ids).

Without it they are random UUIDs.  With it each is a UUID-shaped text
derived from the seed, the log's head seq when it is minted and how many
this process minted before, so a script that sends the same lines at the
same ``--at`` times gets the same log, byte for byte, on every run.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.store import EventStore

__all__ = ["SEED_VARIABLE", "seeded_epochs", "seeded_id"]

SEED_VARIABLE: Final = "PWF_SEED"


def _shaped(text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def seed() -> str | None:
    """The seed from the environment, or None."""
    return os.environ.get(SEED_VARIABLE) or None


def seeded_epochs(store: EventStore) -> Callable[[], str] | None:
    """A maker of deterministic worker epochs for ``store`` when ``PWF_SEED`` is set, else None."""
    chosen = seed()
    if chosen is None:
        return None
    counter = itertools.count()

    def make() -> str:
        return _shaped(f"{chosen}\0epoch\0{store.head().seq}\0{next(counter)}")

    return make


def seeded_id(store: EventStore, kind: str) -> str | None:
    """A deterministic id of ``kind`` at the store's head when ``PWF_SEED`` is set, else None."""
    chosen = seed()
    return None if chosen is None else _shaped(f"{chosen}\0{kind}\0{store.head().seq}")
