"""``pwf web`` over HTTP: each page, its filters, "as of seq", the log's bytes, errors, headers.

The server runs as ``pwf web`` in its own process over the realistic
database of :mod:`tests.web._web_world`; pages are fetched with plain HTTP.
The numbers of the deadline shifts are DOMAIN §10.2's rule applied to the
world's script, not read back from pwf.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import sqlite3
import time
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from pwf.cli import cli
from pwf.web._data import PAGE

if TYPE_CHECKING:
    from pathlib import Path

    from tests.web import _web_world as _world
    from tests.web._web_served import get, serve
else:
    import _web_world as _world
    from _web_served import get, serve

INTERACTION = f"/interaction?id={_world.WAITING}"


def text_of(page: str) -> str:
    """The page's text without tags, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def pwf(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    return result.stdout


def test_every_page_answers_with_strict_headers(world_url: str) -> None:
    for path in ("/", "/runs", "/run?id=run-1", INTERACTION, "/log"):
        status, headers, page = get(world_url + path)
        assert 200 == status, path
        assert headers["content-type"] == "text/html; charset=utf-8"
        assert "script-src" not in headers["content-security-policy"]
        assert headers["content-security-policy"].startswith("default-src 'none'")
        assert "<script" not in page.lower()
        assert not re.search(r'(src|href)="(https?:)?//', page)  # no external assets


def test_overview_counts_and_diagnoses_what_waits(world_url: str) -> None:
    _, _, page = get(world_url + "/")
    text = text_of(page)
    assert "pendingInteractions 1" in text
    assert "queuedRuns 3" in text
    assert "waitingRuns 1" in text
    row = page[page.index(f">{_world.WAITING}<") :]
    row = row[: row.index("</tr>")]
    assert "turn-open" in row
    assert "since" in text_of(row)
    for queued in ("run-6", "run-7", "run-8"):
        assert f">{queued}<" in page
    assert "queued-awaiting-worker" in page


def test_overview_lists_what_pwf_status_lists(world_url: str, world_db: Path) -> None:
    status = json.loads(pwf("status", "--db", str(world_db), "--json"))
    expected = [(w["id"], w["sinceSeq"]) for w in status["interactions"] + status["runs"]]
    _, _, page = get(world_url + "/")
    rows = page[page.index('id="waiting"') :]
    shown = re.findall(
        r'class="waiting-(?:interaction|run)" href="[^"]+">([^<]+)</a>.*?seq (\d+)', rows, re.DOTALL
    )
    assert expected == [(html.unescape(name), int(seq)) for name, seq in shown]
    for name, count in status["counts"].items():
        assert f"{name} {count}" in text_of(page)


def _measured_to(page: str) -> int:
    """The time the overview says its waits are measured to, as epoch milliseconds."""
    found = re.search(r"waits are measured to (\S+?Z),", text_of(page))
    assert found is not None, text_of(page)
    return int(dt.datetime.fromisoformat(found.group(1)).timestamp() * 1000)


def test_overview_measures_waits_to_the_wall_clock_as_status_does(
    world_url: str, world_db: Path
) -> None:
    """One clock (ADR 0079): the live page's now is the wall clock, and it says so."""
    before = time.time_ns() // 1_000_000
    _, _, page = get(world_url + "/")
    after = time.time_ns() // 1_000_000
    assert before <= _measured_to(page) <= after
    assert "the wall clock when the page was read, as pwf status takes it" in text_of(page)
    last = json.loads(pwf("log", "tail", "--db", str(world_db), "-n", "1", "--json"))["at"]
    assert last < before  # the world's last event is older than the wall clock


def test_overview_with_now_lists_what_status_with_now_lists(world_url: str, world_db: Path) -> None:
    status = json.loads(pwf("status", "--db", str(world_db), "--json", "--now", "99999999"))
    _, _, page = get(world_url + "/?now=99999999")
    assert 99_999_999 == _measured_to(page)
    for item in status["interactions"] + status["runs"]:
        row = page[page.index(f">{html.escape(item['id'])}<") :]
        row = row[: row.index("</tr>")]
        assert _web_duration(item["waitingMs"]) in text_of(row)


def _web_duration(ms: int) -> str:
    from pwf.web._app import _duration  # noqa: PLC0415 - the page's own formatting

    return _duration(ms)


def test_times_inside_a_diagnosis_are_shown_as_times(world_url: str) -> None:
    _, _, page = get(world_url + "/?now=1796615271087")
    text = text_of(page)
    assert "passed at 2026-12-07T" in text
    assert not re.search(r"(started at|passed at|deadline) \d{6,}", text)


def test_overview_counts_name_the_sets_they_count(world_url: str, world_db: Path) -> None:
    """The count above each list is that list's set, by status; waitingRuns says what it is."""
    status = json.loads(pwf("status", "--db", str(world_db), "--json", "--all"))
    _, _, page = get(world_url + "/")
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+([,)])", r"\1", text_of(page)))
    total = sum(status["openRuns"].values())
    assert total == len(status["runs"])
    parts = ", ".join(f"{name} {n}" for name, n in status["openRuns"].items())
    assert f"runs not ended: {total} ({parts})" in text
    assert "waitingRuns above counts the runs whose status is waiting" in text


def test_overview_totals_count_the_events_runs_and_interactions(
    world_url: str, world_db: Path
) -> None:
    connection = sqlite3.connect(world_db)
    try:
        counted = connection.execute(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM runs),"
            " (SELECT count(*) FROM interactive_requests)"
        ).fetchone()
    finally:
        connection.close()
    _, _, page = get(world_url + "/")
    events, runs, requests = counted
    assert events > 10
    assert f"{events} events, {runs} runs, {requests} interactions." in text_of(page)


def test_overview_lists_are_bounded_and_say_how_many_more(tmp_path: Path) -> None:
    from pwf.status import LIMIT  # noqa: PLC0415

    db = tmp_path / "many.db"
    world = _world.World(db)
    try:
        for index in range(LIMIT + 5):
            payload = _world.start_payload(f"s-{index}", {})
            world.request(index, "run.start", payload, run_id=f"r-{index:02}")
    finally:
        world.close()
    with serve(db) as base:
        _, _, page = get(base + "/")
    listed = re.findall(r'class="waiting-run" href="[^"]+">([^<]+)</a>', page)
    assert [f"r-{index:02}" for index in range(LIMIT)] == listed
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+([,)])", r"\1", text_of(page)))
    assert f"runs not ended: {LIMIT + 5} (queued {LIMIT + 5}), the oldest {LIMIT}" in text
    assert "and 5 more" in text


def test_a_page_as_of_a_seq_measures_to_that_seqs_time(world_url: str, world_db: Path) -> None:
    _, _, page = get(world_url + "/?at=12")
    stands = re.search(r"Read at seq (\d+);", text_of(page))
    assert stands is not None
    seq = int(stands.group(1))  # 12, or the end of the batch before it
    assert seq <= 12
    event = json.loads(pwf("log", "show", "--db", str(world_db), "--json").splitlines()[seq - 1])
    assert (seq, event["at"]) == (event["seq"], _measured_to(page))
    assert f"the time of seq {seq}, as pwf explain --at takes it" in text_of(page)


def test_runs_filter_by_status_and_session(world_url: str) -> None:
    _, _, page = get(world_url + "/runs?status=completed")
    shown = set(re.findall(r'href="/run\?id=([^"&]+)"', page))
    assert {"run-1", "run-2", "run-3", "run-4", "run-5"} == shown
    _, _, page = get(world_url + "/runs?session=session-q7")
    assert {"run-7"} == set(re.findall(r'href="/run\?id=([^"&]+)"', page))
    _, _, page = get(world_url + "/runs?status=waiting&session=" + _world.SESSION)
    assert {_world.WAITING_RUN} == set(re.findall(r'href="/run\?id=([^"&]+)"', page))


def test_runs_are_paged(tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    world = _world.World(db)
    try:
        for index in range(55):
            payload = _world.start_payload(f"s-{index}", {})
            world.request(index, "run.start", payload, run_id=f"r-{index:02}")
    finally:
        world.close()
    with serve(db) as base:
        _, _, first = get(base + "/runs")
        _, _, second = get(base + "/runs?page=2")
        _, _, beyond = get(base + "/runs?page=3")
    ids = [re.findall(r'href="/run\?id=([^"&]+)"', page) for page in (first, second, beyond)]
    assert [50, 5, 0] == [len(found) for found in ids]
    assert [f"r-{index:02}" for index in reversed(range(55))] == ids[0] + ids[1]
    assert "page 1 of 2" in text_of(first)
    assert 'id="next"' in first
    assert 'id="previous"' in second
    assert 'id="next"' not in second


def test_run_page_shows_queue_attempts_workers_lineage_and_result(world_url: str) -> None:
    _, _, page = get(world_url + "/run?id=run-2")
    text = text_of(page)
    assert "attempt-2" in text
    assert 'id="run-timeline"' in page
    workers = page[page.index('id="workers"') : page.index("</table>", page.index('id="workers"'))]
    assert 3 == workers.count("<tr>") - 1  # a launch, then one per answer: the first was rejected
    values = text_of(page[page.index('id="values"') :])
    assert '{"n":2}' in values
    assert '{"notes":"done"}' in values
    assert "root run-2" in text


def test_interaction_page_explains_the_deadline(world_url: str) -> None:
    _, _, page = get(world_url + INTERACTION)
    text = text_of(page)
    assert "turn-open" in text
    # DOMAIN §10.2: turn-1 starts 5 000 ms after the attempt (base = attempt start), turn-2
    # 43 000 ms after turn-1 ended (base = latest ended turn); the budget is the node's timeoutMs.
    shifts = text_of(
        page[page.index('id="shifts"') : page.index("</table>", page.index('id="shifts"'))]
    )
    assert "turn.start 5000 ms" in shifts
    assert "turn.start 43000 ms" in shifts
    assert "budget 600.0 s of active model time + 48.0 s idle credited by 2 shifts" in text
    picture = page[
        page.index('id="model-time"') : page.index("</svg>", page.index('id="model-time"'))
    ]
    assert 2 == picture.count('class="shift"')
    assert 'class="deadline"' in picture
    assert 'class="pause"' in picture
    assert 2 == picture.count('class="turn') - picture.count('class="turns')
    assert "Draft the release notes for 2.1.0" in text


def test_as_of_an_earlier_seq(world_url: str) -> None:
    paused = int(json.loads(pwf_log(world_url, "run.paused"))["seq"])
    _, _, page = get(f"{world_url}{INTERACTION}&at={paused + 2}")
    text = text_of(page)
    assert f"as of seq {paused + 1}" in text  # the batch of run.paused ends one seq later
    assert "run-paused" in text
    assert "turn-2" not in text
    # A seq inside a batch shows the state before that batch, as `pwf replay --until` folds it.
    _, _, inside = get(f"{world_url}/?at={paused}")
    assert f"as of seq {paused - 1}" in text_of(inside)
    # Links keep the seq.
    assert f'href="/log?at={paused + 2}"' in page


def pwf_log(world_url: str, event_type: str) -> str:
    """The newest event of a type, as the log page lists it for that type."""
    _, _, page = get(f"{world_url}/log?type={event_type}")
    bodies = re.findall(r'<td class="body"><pre>(.*?)</pre>', page, re.DOTALL)
    return html.unescape(bodies[0])  # newest first


def test_log_shows_stored_bytes_chain_and_links(world_url: str, world_db: Path) -> None:
    shown = pwf("log", "show", "--db", str(world_db), "--type", "turn.started", "--json")
    _, _, page = get(world_url + "/log?type=turn.started")
    bodies = [
        html.unescape(body) for body in re.findall(r'<td class="body"><pre>(.*?)</pre>', page)
    ]
    assert shown.splitlines() == bodies[::-1]  # the page lists newest first
    head = json.loads(pwf("log", "tail", "--db", str(world_db), "-n", "1", "--json"))
    assert f"chain intact · {head['seq']} events · head seq {head['seq']}" in text_of(page)
    assert head["contentHash"] in page
    assert f'class="to-run" href="/run?id={_world.WAITING_RUN}"' in page
    _, _, requested = get(world_url + "/log?type=interaction.requested&run=" + _world.WAITING_RUN)
    assert f'class="to-interaction" href="/interaction?id={_world.WAITING}"' in requested


@pytest.mark.parametrize(
    ("name", "value"),
    [("session", _world.SESSION), ("request", "req-1"), ("run", "run-3"), ("type", "run.finished")],
)
def test_log_filters_as_log_show_does(
    world_url: str, world_db: Path, name: str, value: str
) -> None:
    shown = pwf("log", "show", "--db", str(world_db), f"--{name}", value, "--json")
    expected = [json.loads(line)["seq"] for line in shown.splitlines()]
    _, _, page = get(f"{world_url}/log?{name}={quote(value)}")
    assert expected
    assert expected[::-1] == [int(seq) for seq in re.findall(r'<tr id="seq-(\d+)">', page)]


def test_log_lists_newest_first_with_older_and_newer_pages(world_url: str, world_db: Path) -> None:
    head = int(json.loads(pwf("log", "tail", "--db", str(world_db), "-n", "1", "--json"))["seq"])
    assert head > 2 * PAGE
    _, _, first = get(world_url + "/log")
    seqs = [int(seq) for seq in re.findall(r'<tr id="seq-(\d+)">', first)]
    assert list(range(head, head - PAGE, -1)) == seqs
    assert 'id="previous"' not in first
    older = re.search(r'id="next" href="([^"]+)"', first)
    assert older is not None
    _, _, second = get(world_url + html.unescape(older.group(1)))
    seqs = [int(seq) for seq in re.findall(r'<tr id="seq-(\d+)">', second)]
    assert list(range(head - PAGE, head - 2 * PAGE, -1)) == seqs
    newer = re.search(r'id="previous" href="([^"]+)"', second)
    assert newer is not None
    _, _, back = get(world_url + html.unescape(newer.group(1)))
    assert [int(seq) for seq in re.findall(r'<tr id="seq-(\d+)">', back)] == list(
        range(head, head - PAGE, -1)
    )
    # A link to one seq (from the overview and the timelines) lands on a page that holds it.
    _, _, landed = get(world_url + "/log?from=7")
    assert 'id="seq-7"' in landed


@pytest.mark.parametrize(
    ("path", "code", "line"),
    [
        ("/run?id=nope", 404, "no run nope in the log"),
        ("/interaction?id=nope", 404, "no interaction nope in the log"),
        ("/run", 400, "the page needs ?id="),
        ("/?at=abc", 400, "at must be a whole number of at least 1, not 'abc'"),
        ("/?at=0", 400, "at must be a whole number of at least 1, not '0'"),
        ("/log?from=-3", 400, "from must be a whole number of at least 1, not '-3'"),
        ("/?at=99999", 400, "the log ends at seq"),
        ("/runs?page=x", 400, "page must be a whole number"),
    ],
)
def test_bad_input_is_one_line(world_url: str, path: str, code: int, line: str) -> None:
    status, _, page = get(world_url + path)
    assert code == status
    error = html.unescape(re.findall(r'<p class="error" id="error">(.*?)</p>', page)[0])
    assert error.startswith(line)
    assert "\n" not in error
    assert "Traceback" not in page


def test_ids_are_quoted_in_links(world_url: str) -> None:
    status, _, page = get(world_url + "/run?id=" + quote("run-1&at=3"))
    assert 404 == status
    assert "no run run-1&amp;at=3 in the log" in page


def test_a_lone_surrogate_id_links_to_its_own_run(hostile_db: Path) -> None:
    """The runs page links the id by its code units' WTF-8, and the link finds that run (ADR 0071).

    Were the id bound as U+FFFD, the link would name ``run-\ufffd-lone``, a run
    nobody started.
    """
    with serve(hostile_db) as base:
        _, _, listing = get(base + "/runs?status=queued")
        assert '<a href="/run?id=run-%ED%B2%80-lone">run-\\udc80-lone</a>' in listing
        status, _, page = get(base + "/run?id=run-%ED%B2%80-lone")
        assert 200 == status
        assert 'id="subject">run-\\udc80-lone</span>' in page
        assert 404 == get(base + "/run?id=" + quote("run-\ufffd-lone"))[0]
