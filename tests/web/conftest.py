"""Fixtures of the web view's tests: realistic databases, a running ``pwf web``, a real browser.

The browser is Debian's Chromium at ``/usr/bin/chromium``, driven by
Playwright with that executable (Playwright never downloads one here).  When
it is missing the browser tests skip with the reason, except in CI
(``CI=true``), where they fail: CI installs it (``.ci/run``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.web import _web_world as _world
    from tests.web._web_served import ARTIFACTS, serve
else:
    import _web_world as _world
    from _web_served import ARTIFACTS, serve

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def world_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The realistic database (see :mod:`tests.web._web_world`), built once."""
    db = tmp_path_factory.mktemp("world") / "state.db"
    _world.build(db)
    return db


@pytest.fixture(scope="session")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database whose ids, input and prompt hold markup, quotes and script."""
    db = tmp_path_factory.mktemp("hostile") / "state.db"
    _world.hostile(db)
    return db


@pytest.fixture(scope="module")
def world_url(world_db: Path) -> Iterator[str]:
    """``pwf web`` serving the realistic database."""
    with serve(world_db) as base:
        yield base


def _chromium_missing() -> str | None:
    if not CHROMIUM.exists():
        return f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401, PLC0415 - only the browser tests need it
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[dev,web]')"
    return None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A fresh headless Chromium context (its own user-data-dir); skipped or failed without one."""
    missing = _chromium_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; CI must install it (.ci/run)")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - see _chromium_missing

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()
