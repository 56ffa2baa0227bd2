"""What ``state.verify`` and ``state.status`` read beyond the host: one place for every caller.

``state.verify`` answers pwf's whole verification and ``state.status`` carries
``pwf status``'s overview; both are heavy to import, so they load only when
such a request comes.  The served host, the in-process :class:`pwf.Database`
and ``pwf request`` hand these two to their host (and ``pwf state status`` /
``verify`` to :func:`pwf.host.statereads.state_read`), so each reads them
the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pwf.store import EventStore

__all__ = ["overview", "verify_failure"]


def verify_failure(store: EventStore) -> str | None:
    """``state.verify``: pwf's whole verification (chain, then projections == the log)."""
    from pwf.verify import verify_failure as failure  # noqa: PLC0415 - only state.verify folds the log

    return failure(store)


def overview(store: EventStore, now: int) -> object:
    """``state.status``'s ``overview``: what ``pwf status --json`` prints."""
    from pwf.status import overview_receipt  # noqa: PLC0415 - only state.status reads it

    return overview_receipt(store, now)
