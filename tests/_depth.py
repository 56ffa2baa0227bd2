"""How many examples a Hypothesis test runs: a quick count for ``make test``, a deep one on demand.

``make test`` (and CI, which runs it) uses each test's quick count, chosen so
the property is still exercised from many starting points; ``make
test-deep`` sets ``PWF_TEST_DEPTH=deep`` and runs the counts the tests had
before ADR 0049 bounded them.  Tests pass both numbers to :func:`examples`,
so the two profiles are visible where each test is written.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["DEEP", "examples"]

DEEP: Final = os.environ.get("PWF_TEST_DEPTH") == "deep"
"""True under ``make test-deep``."""


def examples(quick: int, deep: int) -> int:
    """``deep`` under ``make test-deep``, else ``quick``."""
    return deep if DEEP else quick
