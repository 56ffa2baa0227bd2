"""Fixtures the integration tests share; plain helpers are in ``_harness.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._harness import Fixture
else:
    from _harness import Fixture


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    """Fixture F (``run-1`` waiting on its interaction with M1), closed after the test."""
    fixture = Fixture.f(tmp_path / "s.db")
    yield fixture
    fixture.close()
