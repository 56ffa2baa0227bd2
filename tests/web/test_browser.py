"""The web view in a real headless Chromium: an operator's walk, hostile strings, an unchanged db.

Each test drives ``pwf web`` (its own process) with Playwright and writes a
screenshot of every page it looks at to ``test-artifacts/web/``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from tests.web import _web_world as _world
    from tests.web._web_served import ARTIFACTS, serve
else:
    import _web_world as _world
    from _web_served import ARTIFACTS, serve


def shoot(page: Any, name: str) -> None:
    """A full-page screenshot into the test-artifacts folder."""
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def seq_of(world_db: Path, event_type: str) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "pwf", "log", "show", "--db", str(world_db), "--type", event_type],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.splitlines()[-1].split()[0])


def step_back_in_time(page: Any, world_db: Path) -> None:
    """View the interaction as of the pause, then step back one batch before it."""
    paused = seq_of(world_db, "run.paused")
    page.fill("header input[name=at]", str(paused + 2))
    page.click("header button[type=submit]")
    page.wait_for_load_state()
    assert f"as of seq {paused + 1}" in page.locator("header .asof").inner_text()
    assert "run-paused" in page.locator("#diagnosis").inner_text()
    assert 1 == page.locator("svg#model-time rect.turn").count()
    shoot(page, "interaction-earlier")
    page.click("#step-back")  # to the end of the batch before run.pause's
    page.wait_for_load_state()
    assert (
        f"as of seq {paused - 1} (seq {paused} is inside a batch"
        in page.locator("header .asof").inner_text()
    )
    assert "run-paused" not in page.locator("#diagnosis").inner_text()


def follow_an_event_to_its_run(page: Any) -> None:
    """Open the log, filter it to run.finished events, and follow the first to its run."""
    page.click("header >> text=Log")
    page.wait_for_load_state()
    assert "chain intact" in page.locator("#chain").inner_text()
    shoot(page, "log")
    page.fill("form.filters input[name=type]", "run.finished")
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state()
    link = page.locator("a.to-run").first
    target = link.inner_text()
    link.click()
    page.wait_for_load_state()
    assert target == page.locator("#subject").inner_text()
    assert page.locator("svg#run-timeline circle.mark").count() >= 5
    assert '{"notes":"done"}' in page.locator("#values").inner_text()
    shoot(page, "run")


def test_an_operator_follows_a_waiting_interaction_back_in_time_and_to_its_run(
    browser: Any,
    world_url: str,
    world_db: Path,
) -> None:
    page = browser.new_page()
    page.goto(world_url + "/")
    assert "pendingInteractions" in page.locator("#counts").inner_text()
    shoot(page, "overview")

    page.locator("a.waiting-interaction", has_text=_world.WAITING).click()
    page.wait_for_load_state()
    assert _world.WAITING == page.locator("#subject").inner_text()
    assert "turn-open" in page.locator("#diagnosis").inner_text()
    picture = page.locator("svg#model-time")
    assert picture.is_visible()
    assert 2 == picture.locator("line.shift").count()
    assert 1 == picture.locator("line.deadline").count()
    assert 2 == picture.locator("rect.turn").count()
    assert page.locator("svg#interaction-timeline circle.mark").count() >= 10
    shoot(page, "interaction")

    step_back_in_time(page, world_db)

    page.locator("header .asof a", has_text="live").click()
    page.wait_for_load_state()
    assert 0 == page.locator("header .asof").count()
    follow_an_event_to_its_run(page)

    page.click("header >> text=Runs")
    page.wait_for_load_state()
    page.select_option("form.filters select[name=status]", "queued")
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state()
    assert ["run-8", "run-7", "run-6"] == page.locator("#runs td:first-child a").all_inner_texts()
    shoot(page, "runs")


def assert_inert(page: Any) -> None:
    """No element that a hostile string would have made exists in the page."""
    counts = page.evaluate(
        "() => ['script', 'img', 'iframe', 'object', 'embed', 'b', 'i']"
        ".map(tag => [tag, document.getElementsByTagName(tag).length])"
    )
    assert [] == [(tag, count) for tag, count in counts if count], page.url


def lone_surrogates(page: Any, base: str) -> None:
    """Lone surrogates: the log's bytes and the rows keep them; a page shows the escape.

    The rows hold the id by its code units (ADR 0071), its link carries their
    WTF-8 and finds the run, and the page writes the half as ``\\udc80``.
    """
    shown = _world.LONE_RUN.replace("\udc80", "\\udc80")
    page.goto(base + "/runs?status=queued")
    page.locator("a", has_text=shown).click()
    page.wait_for_load_state()
    assert shown == page.locator("#subject").inner_text()
    assert {"text": _world.LONE_TEXT} == json.loads(
        page.locator("pre.value[data-name=input]").inner_text()
    )
    assert_inert(page)
    shoot(page, "hostile-lone-surrogate")
    page.goto(base + "/log?type=run.reserved")
    bodies = page.locator("td.body pre").all_inner_texts()
    assert any('"runId":"run-\\udc80-lone"' in body for body in bodies), bodies
    assert_inert(page)


def test_hostile_strings_render_as_text_and_nothing_runs(
    browser: Any,
    hostile_db: Path,
) -> None:
    dialogs: list[str] = []
    errors: list[str] = []
    page = browser.new_page()

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda error: errors.append(str(error)))
    with serve(hostile_db) as base:
        page.goto(base + "/")
        assert _world.HOSTILE_RUN in page.locator("#waiting").inner_text()
        shoot(page, "hostile-overview")
        assert_inert(page)
        page.locator("a.waiting-run", has_text=_world.HOSTILE_RUN).click()
        page.wait_for_load_state()
        assert _world.HOSTILE_RUN == page.locator("#subject").inner_text()
        shown = json.loads(page.locator("pre.value[data-name=input]").inner_text())
        assert _world.HOSTILE_TEXT == shown["text"]
        assert "\"'><svg onload=alert(2)>" == shown["<img src=x onerror=alert(1)>"]
        shoot(page, "hostile-run")
        assert_inert(page)
        page.locator("a", has_text=_world.HOSTILE_REQUEST).first.click()
        page.wait_for_load_state()
        assert _world.HOSTILE_REQUEST == page.locator("#subject").inner_text()
        assert {"prompt": _world.HOSTILE_TEXT} == json.loads(page.locator("#contract").inner_text())
        payload = page.locator("#submissions pre").inner_text()
        assert {"notes": _world.HOSTILE_TEXT} == json.loads(payload)
        assert "sub-<script>" in page.locator("#submissions").inner_text()
        shoot(page, "hostile-interaction")
        assert_inert(page)
        page.goto(base + "/runs?status=failed")
        page.locator("a", has_text=_world.HOSTILE_FAILED).click()
        page.wait_for_load_state()
        assert _world.HOSTILE_FAILED == page.locator("#subject").inner_text()
        assert _world.HOSTILE_TEXT == json.loads(
            page.locator("pre.value[data-name=error]").inner_text()
        )
        assert_inert(page)
        lone_surrogates(page, base)
        for path in ("/runs", "/log", "/runs?session=session-<i>x</i>", "/?at=12"):
            page.goto(base + path)
            assert _world.HOSTILE_RUN in page.locator("main").inner_text()
            assert_inert(page)
        shoot(page, "hostile-log")
    assert [] == dialogs
    assert [] == errors


def _fingerprint(db: Path) -> tuple[str, str, dict[str, str]]:
    """``pwf digest``, the head (``pwf log tail``), and the SHA-256 of the file and its WAL.

    The ``-shm`` file is SQLite's shared memory, where readers mark what they read.
    """
    digest = subprocess.run(
        [sys.executable, "-m", "pwf", "digest", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    head = subprocess.run(
        [sys.executable, "-m", "pwf", "log", "tail", "--db", str(db), "-n", "1", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (db, db.with_name(db.name + "-wal"))
        if path.exists()
    }
    return digest, head, files


def test_browsing_changes_nothing(
    browser: Any,
    world_db: Path,
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    shutil.copy(world_db, db)
    before = _fingerprint(db)
    page = browser.new_page()
    with serve(db) as base:
        for path in ("/", "/runs", f"/interaction?id={_world.WAITING}", "/log", "/log?at=100"):
            for at in ("", "at=120"):
                joiner = "&" if "?" in path else "?"
                page.goto(base + path + (joiner + at if at and "at=" not in path else ""))
                assert page.locator("main h1").count() == 1
        hrefs = page.eval_on_selector_all("a", "links => links.map(link => link.href)")
        for href in [h for h in hrefs if re.search(r"/(run|interaction)\?", h)][:10]:
            page.goto(href)
    after = _fingerprint(db)
    assert before == after
