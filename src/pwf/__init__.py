"""pwf: an event-sourced host state for agent workflows.

The Python API (``docs/api.md``) is exported here and loaded on first use, so
``import pwf`` (and every ``pwf`` command) imports nothing else:

- :class:`Database`: a state database in this process: run requests, read
  the log as typed events and the projections as rows;
- :class:`LogReader`: read a database's log without writing;
- :class:`HostClient`: one connection to a served host (``pwf serve``):
  request, watch pushed events; :func:`call` retries a request with the same
  ``requestId`` until a host answers; :func:`request_message` builds a request.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
"""`typing.TYPE_CHECKING` without importing `typing`, which `import pwf` does not need."""
if TYPE_CHECKING:
    from pwf.api import Database, LogReader
    from pwf.client import HostClient, call, request_message
    from pwf.events import Entry
    from pwf.protocol.client import ClientResponse
    from pwf.store import Head, VerifyReport

__all__ = [
    "DISTRIBUTION",
    "ClientResponse",
    "Database",
    "Entry",
    "Head",
    "HostClient",
    "LogReader",
    "VerifyReport",
    "__version__",
    "call",
    "request_message",
]

__version__ = "0.1.0"
"""The package version; the build reads it from here (``pwf --version`` prints it)."""

DISTRIBUTION = "pwf-host"
"""The name pwf is installed under (ADR 0073); ``pwf`` on the package index is another project.

The import package and the command stay ``pwf``; install hints name this.  A plain
constant: ``import pwf`` imports no ``typing``.
"""

_LAZY = {
    "ClientResponse": "pwf.protocol.client",
    "Database": "pwf.api",
    "Entry": "pwf.events",
    "Head": "pwf.store",
    "HostClient": "pwf.client",
    "LogReader": "pwf.api",
    "VerifyReport": "pwf.store",
    "call": "pwf.client",
    "request_message": "pwf.client",
}


def __getattr__(name: str) -> object:
    """Load an exported name's module when the name is first used."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pwf' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy exports included."""
    return sorted({*globals(), *__all__})
