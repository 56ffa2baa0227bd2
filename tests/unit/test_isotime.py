"""One ISO writer for the whole of pwf, with JavaScript's ``toISOString`` at every edge.

The expected strings are Node 20's ``new Date(ms).toISOString()``; where
``node`` is on the machine, the test also asks it, for those and 300
instants spread across ``Date``'s whole range.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Final

import pytest

from pwf.isotime import civil, days_from_epoch, iso_utc
from pwf.views.status import Live, served_host_status

NODE_SAYS: Final = {
    253_402_300_799_999: "9999-12-31T23:59:59.999Z",
    253_402_300_800_000: "+010000-01-01T00:00:00.000Z",
    -62_167_219_200_000: "0000-01-01T00:00:00.000Z",
    -62_167_219_200_001: "-000001-12-31T23:59:59.999Z",
    0: "1970-01-01T00:00:00.000Z",
    -1: "1969-12-31T23:59:59.999Z",
    8_640_000_000_000_000: "+275760-09-13T00:00:00.000Z",
    -8_640_000_000_000_000: "-271821-04-20T00:00:00.000Z",
    1_785_600_032_000: "2026-08-01T16:00:32.000Z",
}


@pytest.mark.parametrize(("ms", "text"), sorted(NODE_SAYS.items()))
def test_the_edges_are_nodes(ms: int, text: str) -> None:
    assert iso_utc(ms) == text


def test_host_status_writes_a_year_past_9999_as_node_does() -> None:
    """``host.status``'s times wrote ``10000-01-01…`` where Node writes ``+010000-01-01…``."""

    class Row(dict[str, object]):
        pass

    class Ctx:
        now = 0

        def one(self, _sql: str, *_params: object) -> Row:
            return Row(
                host_id="h",
                expires_at=253_402_300_800_000,
                heartbeat_at=253_402_300_799_999,
                started_at=-62_167_219_200_001,
                epoch=1,
            )

        def value(self, *_args: object) -> int:
            return 0

        def all(self, *_args: object) -> list[object]:
            return []

    live = Live(socket_available=True, active_workers=0, connected_clients=0)
    status = served_host_status(Ctx(), live)  # type: ignore[arg-type]
    assert status["expiresAt"] == "+010000-01-01T00:00:00.000Z"
    assert status["heartbeatAt"] == "9999-12-31T23:59:59.999Z"
    assert status["startedAt"] == "-000001-12-31T23:59:59.999Z"


def test_days_and_dates_round_trip() -> None:
    for days in [*range(-800_000, 800_000, 997), -719_468, -719_469, 2_932_896, 2_932_897]:
        assert days_from_epoch(*civil(days)) == days


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_agrees_across_dates_whole_range() -> None:
    span = 17_280_000_000_000_001  # Date's whole range, -8.64e15 to 8.64e15 ms
    spread = [-8_640_000_000_000_000 + (n * 7_919_000_000_003_331) % span for n in range(300)]
    instants = [*NODE_SAYS, *spread]
    script = (
        "const ms = JSON.parse(process.argv[1]);"
        " console.log(JSON.stringify(ms.map((m) => new Date(m).toISOString())))"
    )
    done = subprocess.run(
        ["node", "-e", script, json.dumps(instants)], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == [iso_utc(ms) for ms in instants]


def test_the_web_view_writes_a_span_as_the_command_line_does() -> None:
    """One duration format: ``pwf status``'s ``2d 7h`` on the web overview (was ``55 h 33 min``)."""
    pytest.importorskip("jinja2")
    from pwf.cli._times import duration as cli_duration  # noqa: PLC0415 - the two rooms compared
    from pwf.web._app import _duration as web_duration  # noqa: PLC0415

    for ms in (0, 999, 59_999, 3_599_999, 199_980_000, 86_400_000 * 400):
        assert web_duration(ms) == cli_duration(ms)
    assert web_duration(199_980_000) == "2d 7h"
    assert web_duration(None) == "-"


@pytest.mark.parametrize(("ms", "text"), sorted(NODE_SAYS.items()))
def test_the_web_view_writes_times_as_node_does(ms: int, text: str) -> None:
    """The web view wrote its times with ``datetime``, which fails past year 9999 and before 1."""
    from pwf.web._app import _timed, _when  # noqa: PLC0415 - the page's own formatting

    class Found:
        summary = f"deadline {ms} passed"
        times = (ms,)

    assert _when(ms) == text
    assert _timed(Found()) == f"deadline {text} passed"


def test_a_summary_rewrites_only_its_own_whole_times() -> None:
    """The command line and the web view rewrite a summary's times by one rule."""
    from pwf.cli._times import timed  # noqa: PLC0415
    from pwf.isotime import written_times  # noqa: PLC0415

    text = "at 1000 (seq 1000.5, id x1000) until 2000"
    assert written_times(text, (1000,), iso_utc) == (
        "at 1970-01-01T00:00:01.000Z (seq 1000.5, id x1000) until 2000"
    )
    assert timed(text, (1000, 2000), "iso") == written_times(text, (1000, 2000), iso_utc)
    assert timed(text, (1000,), "raw") == text
    assert written_times(text, (), iso_utc) == text
