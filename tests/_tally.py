"""What a served writer did, counted from its metrics hook (``Writer.observe``).

The writer keeps no counters for tests; :func:`tally` hangs a
:class:`collections.Counter` on its hook, which then counts ``group``
(commits), ``redone`` (groups run again with savepoints) and ``waited``
(requests a group waited for).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pwf.server._writer import Writer

__all__ = ["tally"]


def tally(writer: Writer) -> collections.Counter[str]:
    """Count what ``writer`` tells its metrics hook from now on."""
    counts: collections.Counter[str] = collections.Counter()

    def observe(event: str) -> None:
        counts[event] += 1

    writer.observe = observe
    return counts
