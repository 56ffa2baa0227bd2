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


SCENARIOS = "test_scenarios_"
"""The conformance scenarios run against both stores; the other integration tests on SQLite."""


@pytest.fixture(autouse=True)
def log_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the log of a test's stores lives: ``sqlite``, or ``postgresql`` ($PWF_STORE set).

    On ``postgresql`` every store the harness opens through ``open_store`` is a
    host's local file on a fresh shared log (ADR 0038).
    """
    kind: str = getattr(request, "param", "sqlite")
    if kind == "postgresql":
        marker = request.node.get_closest_marker("sqlite_only")
        if marker is not None:
            pytest.skip(marker.args[0] if marker.args else "acts on the SQLite file itself")
        monkeypatch.setenv("PWF_STORE", request.getfixturevalue("pg_url"))
    return kind


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each conformance scenario on SQLite and on a shared PostgreSQL log."""
    if metafunc.module.__name__.startswith(SCENARIOS) and "log_store" in metafunc.fixturenames:
        metafunc.parametrize("log_store", ["sqlite", "postgresql"], indirect=True)
