"""``bench/bench_maintenance.py`` times a prune's steps by name: every name must still resolve.

The bench wraps functions by ``module:attribute`` to time the steps of a
prune under the write lock; when one moves (the compaction's image steps
moved from ``pwf.host._compacting`` to ``pwf.store.image``), ``make bench``
stopped at that section with an ``AttributeError``.  This test resolves
each name as the bench does, without running a prune.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


def test_every_timed_step_resolves_to_a_function(bench: Callable[[str], Any]) -> None:
    maintenance = bench("bench_maintenance")
    targets = [target for _, target in maintenance.UNDER_LOCK]
    targets += [maintenance._LOCKED, maintenance._INSTALL, maintenance._SWAP]
    for target in targets:
        module, _, path = target.partition(":")
        owner: Any = importlib.import_module(module)
        for part in path.split("."):
            owner = getattr(owner, part)
        assert callable(owner), target
