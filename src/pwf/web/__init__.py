"""A read-only web view of a pwf database; imports explain, replay, store, readmodel, commands.

``pwf web`` serves server-rendered pages (Starlette, Jinja2 with autoescape,
uvicorn; the optional ``web`` extra, ADR 0036): the overview of what waits
and why, runs, one run, one interaction with its active model time, and the
log with its chain status.  Every page can be viewed as of an earlier seq.
Each connection must send its request within a deadline, and the view holds
a bounded number at once (ADR 0115).
The database is opened with SQLite's ``mode=ro``: the view never takes the
write lock and never appends.  No other command imports this room, so the
rest of the command line starts without its libraries.
"""

from __future__ import annotations

from pwf.web._app import HEADERS, create_app
from pwf.web._serving import serve

__all__ = ["HEADERS", "create_app", "serve"]
