"""Timeline pictures: the geometry of the SVGs the templates draw (the templates escape text).

:func:`events_picture` lays the events that touched a run or an interaction
on lanes by kind, left to right in seq order.  :func:`model_time_picture`
draws an interaction's active model time on a true time axis: its turns,
the run's pauses, the attempt's deadline and every shift that moved it
(DOMAIN §10), so one can see why the deadline is where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pwf.explain import Item
    from pwf.web._data import Pause, Shift

__all__ = [
    "Axis",
    "Bar",
    "Line",
    "Mark",
    "Picture",
    "events_picture",
    "lane_of",
    "model_time_picture",
]

WIDTH: Final = 960
LEFT: Final = 120
RIGHT: Final = 24
TOP: Final = 24
LANE: Final = 30
LANES: Final = ("command", "run", "worker", "attempt", "interaction", "message", "session")
_KINDS: Final = (
    ("command.", "command"),
    ("worker.", "worker"),
    ("run.claimed", "worker"),
    ("attempt.", "attempt"),
    ("node.", "attempt"),
    ("interaction.", "interaction"),
    ("submission.", "interaction"),
    ("message.", "message"),
    ("turn.", "message"),
    ("followup.", "message"),
    ("terminal.", "message"),
    ("coordinator.", "session"),
    ("branch.", "session"),
    ("run.", "run"),
)


@dataclass(frozen=True)
class Mark:
    """A point event: a dot on a lane, linked to its seq, with a tooltip."""

    x: float
    y: float
    seq: int
    title: str
    lane: str


@dataclass(frozen=True)
class Bar:
    """A span on a lane (a turn, a pause), or an arrow when ``arrow`` (a deadline shift)."""

    x1: float
    x2: float
    y: float
    label: str
    title: str
    css: str
    arrow: bool = False


@dataclass(frozen=True)
class Line:
    """A vertical marker across the lanes (the deadline, now)."""

    x: float
    label: str
    css: str
    anchor: str = "middle"
    row: int = 1
    """Which line of labels above the lanes holds its label."""


@dataclass(frozen=True)
class Picture:
    """Everything one SVG draws, in pixels."""

    width: int
    height: int
    lanes: list[tuple[str, float]]
    ticks: list[tuple[float, str]]
    marks: list[Mark] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    gap: float | None = None
    """Where the axis is broken (time cut out), if it is."""


def lane_of(event_type: str) -> str:
    """The lane an event type is drawn on."""
    for prefix, lane in _KINDS:
        if event_type.startswith(prefix):
            return lane
    return "run"


def _seconds(ms: int) -> str:
    """A time since the picture's start: milliseconds under a second, else seconds."""
    return f"+{ms} ms" if 0 < ms < 1_000 else f"+{round(ms / 1000, 1):g} s"


def events_picture(items: Sequence[Item]) -> Picture:
    """The events on lanes by kind; x follows seq order, stretched by the time between events."""
    used = [lane for lane in LANES if any(lane_of(item.type) == lane for item in items)]
    rows = {lane: TOP + LANE * index + LANE / 2 for index, lane in enumerate(used)}
    height = int(TOP + LANE * len(used) + 30)
    span = WIDTH - LEFT - RIGHT
    if not items:
        return Picture(width=WIDTH, height=height, lanes=[], ticks=[])
    first, last = items[0].at, items[-1].at
    duration = max(last - first, 1)
    count = max(len(items) - 1, 1)

    def x(index: int, at: int) -> float:
        # Half by rank (events never pile up), half by time (gaps show).
        return LEFT + span * (0.5 * index / count + 0.5 * (at - first) / duration)

    marks = [
        Mark(
            x=x(index, item.at),
            y=rows[lane_of(item.type)],
            seq=item.seq,
            title=f"seq {item.seq} · {item.type} · {item.summary}",
            lane=lane_of(item.type),
        )
        for index, item in enumerate(items)
    ]
    step = max(1, len(items) // 6)
    ticks: list[tuple[float, str]] = []
    for index, item in enumerate(items):
        label = _seconds(item.at - first)
        if (index % step == 0 or index == len(items) - 1) and label not in {t for _, t in ticks}:
            ticks.append((x(index, item.at), label))
    return Picture(
        width=WIDTH,
        height=height,
        lanes=[(lane, rows[lane]) for lane in used],
        ticks=ticks,
        marks=marks,
    )


@dataclass(frozen=True)
class Axis:
    """Time to x: one scale, or two with a break when the deadline lies far beyond the activity.

    The left part covers the activity (turns, pauses, now), the right part
    the deadlines (first, shifted, current); the time between is cut out.
    """

    first: int
    activity_end: int
    deadline_start: int | None
    last: int

    @staticmethod
    def of(first: int, activity_end: int, deadlines: Sequence[int]) -> Axis:
        """One scale unless the deadlines start well past the activity."""
        activity_end += max((activity_end - first) // 8, 1_000)
        last = max([activity_end, *deadlines])
        if not deadlines:
            return Axis(first, activity_end, None, last)
        low = min(deadlines)
        if low - activity_end <= 0.25 * (last - first):
            return Axis(first, last, None, last)
        pad = max((last - low) // 10, 1_000)
        return Axis(first, activity_end, low - pad, last + pad)

    @property
    def broken(self) -> bool:
        """Whether the time between the activity and the deadlines is cut out."""
        return self.deadline_start is not None

    def x(self, at: int) -> float:
        """The x of a time."""
        span = WIDTH - LEFT - RIGHT
        if self.deadline_start is None:
            return LEFT + span * (at - self.first) / max(self.last - self.first, 1)
        left, gap = span * 0.6, span * 0.06
        if at <= self.activity_end:
            return LEFT + left * (at - self.first) / max(self.activity_end - self.first, 1)
        if at < self.deadline_start:
            return LEFT + left + gap / 2
        right = span - left - gap
        share = (at - self.deadline_start) / max(self.last - self.deadline_start, 1)
        return LEFT + left + gap + right * share

    def ticks(self) -> list[tuple[float, str]]:
        """A few labelled times on each part."""
        parts = [(self.first, self.activity_end if self.broken else self.last)]
        if self.deadline_start is not None:
            parts.append((self.deadline_start, self.last))
        # The left part's last tick would stand against the break: it is left out.
        counts = (3, 4) if self.broken else (4,)
        return [
            (
                self.x(low + (high - low) * n // 3),
                _seconds(low + (high - low) * n // 3 - self.first),
            )
            for (low, high), count in zip(parts, counts, strict=True)
            for n in range(count)
        ]


def model_time_picture(  # noqa: PLR0913 - one argument per thing drawn
    *,
    start: int,
    now: int,
    deadline: int | None,
    turns: Sequence[dict[str, object]],
    pauses: Sequence[Pause],
    shifts: Sequence[Shift],
) -> Picture:
    """Turns, pauses, the deadline and its shifts on a time axis from ``start``."""
    activity = [now, start + 1, *[p.end for p in pauses if p.end is not None]]
    activity += [ended for t in turns if isinstance(ended := t.get("endedAt"), int)]
    deadlines = [value for value in (deadline,) if value is not None]
    moves = [shift.event for shift in shifts]
    deadlines += [value for move in moves for value in (move.from_deadline, move.to_deadline)]
    axis = Axis.of(start, max(activity), deadlines)
    x = axis.x
    top = TOP + 14
    lanes = [("turns", top + LANE / 2), ("paused", top + LANE * 1.5)]
    shift_top = top + LANE * 2
    lanes.append(("deadline shifts", shift_top + LANE / 2))
    height = int(shift_top + LANE * max(1, len(shifts)) + 40)
    bars = [_turn_bar(turn, now, x, lanes[0][1]) for turn in turns]
    bars += [_pause_bar(pause, now, x, lanes[1][1]) for pause in pauses]
    bars += [
        _shift_bar(shift, x, shift_top + LANE * index + LANE / 2)
        for index, shift in enumerate(shifts)
    ]
    lines = _time_lines(now, deadline, shifts, x)
    gap = x(axis.deadline_start - 1) if axis.deadline_start is not None else None
    return Picture(
        width=WIDTH,
        height=height,
        lanes=lanes,
        ticks=axis.ticks(),
        bars=bars,
        lines=lines,
        gap=gap,
    )


def _pause_bar(pause: Pause, now: int, place: Callable[[int], float], y: float) -> Bar:
    return Bar(
        x1=place(pause.start),
        x2=place(now if pause.end is None else pause.end),
        y=y,
        label="paused",
        title=f"paused at {pause.start}"
        + ("" if pause.end is None else f", resumed at {pause.end}"),
        css="pause",
    )


def _shift_bar(shift: Shift, place: Callable[[int], float], y: float) -> Bar:
    move = shift.event
    return Bar(
        x1=place(move.from_deadline),
        x2=place(move.to_deadline),
        y=y,
        label=f"+{move.idle_ms / 1000:g} s idle ({move.cause}, seq {shift.seq})",
        title=(
            f"seq {shift.seq} at {shift.at}: {move.cause} credited {move.idle_ms} ms idle;"
            f" deadline {move.from_deadline} -> {move.to_deadline}"
        ),
        css="shift",
        arrow=True,
    )


def _time_lines(
    now: int, deadline: int | None, shifts: Sequence[Shift], place: Callable[[int], float]
) -> list[Line]:
    """The upright lines: now, the deadline and, when it moved, the first deadline."""
    lines = [Line(x=place(now), label="now", css="now", anchor="middle")]
    if deadline is not None:
        lines.append(Line(x=place(deadline), label="deadline", css="deadline", anchor="end"))
    if shifts:
        first = place(shifts[0].event.from_deadline)
        crowded = deadline is not None and place(deadline) - first < 160
        lines.append(
            Line(
                x=first,
                label="first deadline",
                css="first",
                anchor="start",
                row=2 if crowded else 1,
            )
        )
    return lines


def _turn_bar(turn: dict[str, object], now: int, place: Callable[[int], float], y: float) -> Bar:
    started = int(str(turn["startedAt"]))
    ended = turn.get("endedAt")
    stop = ended if isinstance(ended, int) else now
    state = f"{turn['state']}" + (f" ({turn['stopReason']})" if turn.get("stopReason") else "")
    return Bar(
        x1=place(started),
        x2=place(stop),
        y=y,
        label=str(turn["workflowTurnId"]),
        title=f"turn {turn['workflowTurnId']} {state}: {started} -> {ended or 'open'}",
        css="turn" if isinstance(ended, int) else "turn open",
    )
