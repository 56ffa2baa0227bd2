"""The served host's claim: open the store on the writer, claim the host row (HOST §1.5 steps 4-7).

Imports the served host's decisions, the store, the read model and the
writer.  The writer thread opens the store itself, so every connection to
the database is made and used on that one thread; the claim is the first
decision it runs.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING

from pwf.host.served import ServedHost
from pwf.readmodel import ReadModel
from pwf.server._writer import Writer
from pwf.sqlviews import install_views, views_current
from pwf.store.opening import open_file, open_mirror, open_shared_log

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.host.served import Identity, Recovery
    from pwf.server._options import Options
    from pwf.store import EventStore

__all__ = ["open_writer", "take_claim"]


async def open_writer(options: Options, identity: Identity) -> Writer:
    """Start the writer thread on the host's store, caught up and with its views installed."""

    def open_host() -> tuple[EventStore, ServedHost]:
        read_model = ReadModel()
        if options.store_url is not None:
            store = _mirror(options, read_model)
        else:
            store = open_file(
                options.db,
                synchronous=options.synchronous,
                busy_timeout_ms=options.busy_timeout_ms,
                hooks=[read_model],
                serving=True,
            )
        try:
            store.projections_file.install(read_model.install)
            if options.store_url is None:  # a database made before its views (ADR 0049)
                store.projections_file.upgrade(views_current, install_views)
        except BaseException:
            store.close()
            raise
        return store, ServedHost(store, identity, new_epoch=options.new_epoch)

    return await asyncio.to_thread(Writer, open_host)


async def take_claim(writer: Writer, options: Options, clock: Callable[[], int]) -> Recovery:
    """Claim the host row with the hash of the host's token and recover (HOST §1.5 steps 5-7).

    Raises:
        CommandError: a live host owns the claim.
    """
    token_hash = hashlib.sha256(options.token.encode()).hexdigest()
    return await writer.submit(lambda host: host.start(token_hash, options.lease_ms, clock()))


def _mirror(options: Options, read_model: ReadModel) -> EventStore:
    """The host's local file on the shared log at ``options.store_url``, caught up."""
    assert options.store_url is not None
    log = open_shared_log(options.store_url, busy_timeout_ms=options.busy_timeout_ms)
    store = open_mirror(
        options.db,
        log,
        busy_timeout_ms=options.busy_timeout_ms,
        hooks=[read_model],
        install=read_model.install,
    )
    store.refold = _refold
    store.catch_up()
    return store


def _refold(store: EventStore) -> None:
    """Fold the host's blobs again after a prune of the shared log (ADR 0107)."""
    from pwf.fold.rebuild import refold_blobs  # noqa: PLC0415 - only after a prune

    refold_blobs(store)
