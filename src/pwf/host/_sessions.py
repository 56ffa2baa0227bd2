"""Sessions and time: coordinators' views and detaches, expiry and recovery (DOMAIN §10).

Imports commands, events and the host's context room.  Each change is one
decision in its own batch; the session view only reads.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from pwf.commands import Context
from pwf.commands.expiry import begin_timeouts
from pwf.commands.sessions import detach as detach_coordinator
from pwf.commands.sessions import recover_turns
from pwf.commands.sessionview import session_view
from pwf.errors import CommandError
from pwf.events import Cause
from pwf.host._context import context, refusal

if TYPE_CHECKING:
    from pwf.host import Host
    from pwf.store import EventStore

__all__ = ["detach", "expire", "recover", "view"]


def view(
    host: Host[EventStore], session_id: str, now: int, epoch: str | None = None
) -> dict[str, object]:
    """The session snapshot a watch publishes, as coordinator ``epoch`` (or a viewer) sees it."""

    def read_only(_events: object) -> object:
        raise CommandError("a session view reads only")

    ctx = Context(host.store.reader(), read_only, now)
    return session_view(ctx, session_id, epoch)


def detach(host: Host[EventStore], session_id: str, now: int, epoch: str | None = None) -> bool:
    """The coordinator's connection ended (§10.5); False when there was none to detach."""
    with host.transaction() as tx:
        ctx = context(tx, now, host.actor, Cause(operation="session.detach"))
        return detach_coordinator(ctx, session_id, epoch)


def expire(host: Host[EventStore], now: int) -> list[tuple[str, str]]:
    """Begin the timeout of every expired interaction (§10.7); return (run, session) pairs."""
    with host.transaction() as tx:
        ctx = context(tx, now, host.actor, Cause(operation="host.expire"))
        try:
            with tx.savepoint():
                return begin_timeouts(ctx)
        except sqlite3.IntegrityError as error:
            raise refusal(error) from None


def recover(host: Host[EventStore], now: int, heartbeat: int | None) -> int:
    """Host recovery (§10.6) after a host whose last heartbeat was ``heartbeat``."""
    with host.transaction() as tx:
        ctx = context(tx, now, host.actor, Cause(operation="host.recover"))
        return recover_turns(ctx, heartbeat)
