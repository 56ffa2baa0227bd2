"""The line that names a missing optional extra and how to install it.

An edge helper: imports :mod:`importlib.metadata` only, when an extra is
found missing.  The distribution's name is read from the installed metadata
(the one whose ``pwf`` command this is), so the hint stays right whatever
name pwf is installed under.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DISTRIBUTION", "distribution_name", "missing_extra"]

DISTRIBUTION: Final = "pwf"
"""The name the hint uses when no installed distribution provides pwf."""


def distribution_name() -> str:
    """The installed distribution that provides the ``pwf`` command, else :data:`DISTRIBUTION`."""
    import importlib.metadata  # noqa: PLC0415 - only on an error path

    for distribution in importlib.metadata.distributions():
        for entry in distribution.entry_points:
            if entry.group == "console_scripts" and entry.value.startswith("pwf._entry"):
                return str(distribution.metadata["Name"])
    return DISTRIBUTION


def missing_extra(what: str, extra: str) -> str:
    """``"<what>: pip install '<distribution>[<extra>]'"``, one line."""
    return f"{what}: pip install '{distribution_name()}[{extra}]'"
