"""Times printed and read by the command line: durations, ISO, relative, ISO input."""

from __future__ import annotations

import click
import pytest

from pwf.cli._times import TIME, duration, shown


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0ms"),
        (999, "999ms"),
        (1000, "1s"),
        (61_000, "1m 1s"),
        (60_000, "1m"),
        (3_600_000 + 5_000, "1h"),
        (86_400_000 * 2 + 3_600_000 * 3 + 60_000, "2d 3h"),
    ],
)
def test_duration(ms: int, text: str) -> None:
    assert text == duration(ms)


def test_shown_forms() -> None:
    at = 1_785_600_000_000
    assert "2026-08-01T16:00:00.000Z" == shown(at, "iso")
    assert str(at) == shown(at, "raw")
    assert "5s ago" == shown(at, "relative", at + 5000)
    assert "in 2m" == shown(at, "relative", at - 120_000)
    assert "-" == shown(None, "iso")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1785600000000", 1_785_600_000_000),
        ("2026-08-01T16:00:00Z", 1_785_600_000_000),
        ("2026-08-01T18:00:00+02:00", 1_785_600_000_000),
        ("2026-08-01T16:00:00.250Z", 1_785_600_000_250),
        ("2026-08-01", 1_785_542_400_000),
    ],
)
def test_time_input(text: str, ms: int) -> None:
    assert ms == TIME.convert(text, None, None)


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "12:00", "-5", "9" * 20])
def test_bad_time_input(text: str) -> None:
    with pytest.raises(click.BadParameter):
        TIME.convert(text, None, None)
