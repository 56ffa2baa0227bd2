"""The one line that names a missing optional extra and how to install it.

An edge helper, imported only on the error paths that need it.  pwf is
installed as :data:`pwf.DISTRIBUTION` (ADR 0073): the hint names that
distribution with the extra, never the unrelated ``pwf`` of the package index.
"""

from __future__ import annotations

from pwf import DISTRIBUTION

__all__ = ["missing_extra"]


def missing_extra(what: str, extra: str) -> str:
    """``"<what>: pip install '<distribution>[<extra>]'"``, one line."""
    return f"{what}: pip install '{DISTRIBUTION}[{extra}]'"
