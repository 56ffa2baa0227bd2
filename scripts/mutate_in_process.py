"""A pytest plugin for the chain target's mutation runs: split walks walk their ranges here.

``make mutate`` loads it (``-p mutate_in_process``) for the chain target only
(ADR 0056).  Every test then walks a split log's other ranges one after the
other in the test's own process instead of in forked ones, through
``tests/integration/_inprocess.py``: the same function on the same range,
its value or its failure handed back as a fork would (ADR 0049, ADR 0054).
The mutated functions are the same either way; a fork of a mutmut child
costs some thirty times the walk of a seven-event range, and what a forked
range did was never recorded as covered by the test that started it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def _ranges_in_process() -> Iterator[None]:
    # Imported when a test runs, after mutmut has put the mutated sources first on the path
    # and pytest has put tests/integration there.
    helper = importlib.import_module("_inprocess")
    with helper.ranges_in_process():
        yield
