"""Prune cutoffs read like JavaScript's ``Date.parse`` for ISO 8601 (DOMAIN §13.2, §15.15)."""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pwf.commands.prune import Cutoff, iso_utc, parse_cutoff
from pwf.errors import CommandError
from pwf.host.prune import resolve_cutoff

if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_TIME = 8_640_000_000_000_000


@pytest.mark.parametrize(
    ("text", "ms", "zoned"),
    [
        ("2026-08-01", 1_785_542_400_000, True),
        ("2026-08-01T00:00:00.000Z", 1_785_542_400_000, True),
        ("2026-08-01T00:00:00.000+02:00", 1_785_535_200_000, True),
        ("2026-08-01T00:00-01:30", 1_785_547_800_000, True),
        ("2026-08", 1_785_542_400_000, True),
        ("2026", 1_767_225_600_000, True),
        ("1970-01-01T00:00:05.000Z", 5_000, True),
        ("1970-01-01T00:00:05.5Z", 5_500, True),
        ("1970-01-01T00:00:05.123456Z", 5_123, True),
        ("2024-02-29", 1_709_164_800_000, True),
        ("1969-12-31T23:59:59.999Z", -1, True),
        ("+275760-09-13T00:00:00.000Z", MAX_TIME, True),
        ("2026-08-01T10:00", 1_785_578_400_000, False),
        ("2026-08-01T10:00:00.250", 1_785_578_400_250, False),
    ],
)
def test_iso_forms_parse_like_date_parse(text: str, ms: int, zoned: bool) -> None:
    assert parse_cutoff(text) == Cutoff(ms, zoned)


@pytest.mark.parametrize(
    "text",
    [
        "yesterday",
        "",
        "2026-02-30",
        "2025-02-29",
        "2026-13-01",
        "2026-00-10",
        "2026-08-01T24:00",
        "2026-08-01T10:60",
        "2026-08-01T10:00:61",
        "2026-08-01T10:00+24:00",
        "2026-08-01 10:00",
        "2026/08/01",
        "Aug 1 2026",
        "1",
        "-000000-01-01",
        "+275760-09-13T00:00:00.001Z",
        "2026-08-01T10:00:00.Z",
        "\uff12\uff10\uff12\uff16-08-01",
    ],
)
def test_everything_else_is_not_a_cutoff(text: str) -> None:
    assert parse_cutoff(text) is None


@given(st.integers(min_value=-MAX_TIME, max_value=MAX_TIME))
def test_iso_utc_reads_back(ms: int) -> None:
    assert parse_cutoff(iso_utc(ms)) == Cutoff(ms, zoned=True)


@given(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)))  # noqa: DTZ001
def test_iso_utc_agrees_with_the_calendar(moment: dt.datetime) -> None:
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000, tzinfo=dt.UTC)
    ms = (moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)
    shown = f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S.")
    assert iso_utc(ms) == shown + f"{moment.microsecond // 1000:03d}Z"


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("berlin")
def test_a_zone_less_date_time_is_local_time() -> None:
    summer = parse_cutoff("2026-08-01T10:00")
    winter = parse_cutoff("2026-01-01T10:00")
    assert summer is not None
    assert winter is not None
    assert resolve_cutoff(summer) == summer.ms - 2 * 3_600_000
    assert resolve_cutoff(winter) == winter.ms - 3_600_000
    dated = parse_cutoff("2026-08-01")
    assert dated is not None
    assert resolve_cutoff(dated) == dated.ms


def test_a_local_time_outside_the_calendar_is_refused() -> None:
    with pytest.raises(CommandError, match="valid timestamp"):
        resolve_cutoff(Cutoff(MAX_TIME, zoned=False))
