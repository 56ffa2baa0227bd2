"""``state.prune``: options, the cutoff and which run trees go (DOMAIN §13.2).

Pure: reads projections through the context, never the clock or the files.
The host does the file work (lock, backup, compaction, vacuum) at the edge
(ADR 0017, ADR 0018).  Cutoffs follow JavaScript ``Date.parse`` for ISO 8601
(ADR 0019): a date alone is UTC midnight, an explicit offset is honoured, and
a date-time without one is the host's local time, which only the edge knows,
so :func:`parse_cutoff` returns the wall-clock reading and whether a zone was given.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec

from pwf.commands import Context, refuse
from pwf.commands.payload import members_or_none
from pwf.commands.rows import PrunedRunRow, Query
from pwf.commands.runs import LIVE_QUEUE, TERMINAL
from pwf.isotime import MS_PER_DAY, days_from_epoch, iso_utc

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "Cutoff",
    "PruneOptions",
    "Selection",
    "iso_utc",
    "parse_cutoff",
    "prune_options",
    "select",
]

_LIVE_QUEUE: Final = ", ".join(f"'{status}'" for status in LIVE_QUEUE)
_MAX_TIME: Final = 8_640_000_000_000_000
"""ECMAScript's largest time value (±100 000 000 days from the epoch)."""

_ISO: Final = re.compile(
    r"(?P<year>\d{4}|[+-]\d{6})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2}))?)?"
    r"(?:T(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d{1,9}))?)?"
    r"(?P<zone>Z|[+-]\d{2}:\d{2})?)?",
    re.ASCII,
)

_INVALID_CUTOFF: Final = "state prune --before requires a valid timestamp"
_NEEDS_BACKUP: Final = "state prune --apply requires --backup <absolute-path>"
_RELATIVE_BACKUP: Final = "state prune backup path must be absolute"


@dataclass(frozen=True)
class Cutoff:
    """A parsed ``--before`` in milliseconds: exact when ``zoned``, else a local wall clock."""

    ms: int
    zoned: bool


@dataclass(frozen=True)
class PruneOptions:
    """Validated ``{before, apply, backupPath?}``."""

    before: str
    cutoff: Cutoff
    apply: bool
    backup_path: str | None


def parse_cutoff(text: str) -> Cutoff | None:
    """The cutoff ``Date.parse`` reads from ISO 8601 ``text``, or None when it is not one.

    Impossible calendar dates are refused rather than rolled over (DOMAIN §15.15).
    """
    found = _ISO.fullmatch(text)
    if found is None or found["year"] == "-000000":
        return None
    wall = _wall_ms(found)
    zone = found["zone"]
    offset = _offset_ms(zone) if zone is not None else 0
    if wall is None or offset is None:
        return None
    # A date alone is UTC; a date-time without a zone is local time.
    zoned = zone is not None or found["hour"] is None
    cutoff = Cutoff(wall - offset, zoned=zoned)
    return cutoff if abs(cutoff.ms) <= _MAX_TIME else None


def _wall_ms(found: re.Match[str]) -> int | None:
    """The date-time's reading as if it were UTC, or None for an impossible one."""
    year = int(found["year"])
    month, day = int(found["month"] or 1), int(found["day"] or 1)
    hour, minute = int(found["hour"] or 0), int(found["minute"] or 0)
    second = int(found["second"] or 0)
    millis = int((found["fraction"] or "0").ljust(3, "0")[:3])
    if not 1 <= month <= 12 or not 1 <= day <= _days_in(year, month):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    seconds = (hour * 60 + minute) * 60 + second
    return days_from_epoch(year, month, day) * MS_PER_DAY + seconds * 1000 + millis


def _offset_ms(zone: str) -> int | None:
    """``Z`` or ``±hh:mm`` as milliseconds east of UTC, or None when out of range."""
    if zone == "Z":
        return 0
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    if hours > 23 or minutes > 59:
        return None
    offset = (hours * 60 + minutes) * 60_000
    return offset if zone[0] == "+" else -offset


def _days_in(year: int, month: int) -> int:
    if month == 2:
        return 29 if calendar.isleap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def prune_options(payload: object) -> PruneOptions:
    """Check ``{before, apply, backupPath?}`` in the original's order, with its messages."""
    values = members_or_none(payload)
    before = values.get("before")
    cutoff = parse_cutoff(before) if isinstance(before, str) else None
    if cutoff is None or not isinstance(before, str):
        raise refuse(_INVALID_CUTOFF)
    apply = values.get("apply", False)
    if not isinstance(apply, bool):
        raise refuse("state prune apply must be true or false")
    backup = values.get("backupPath")
    if backup is not None and not isinstance(backup, str):
        raise refuse(_RELATIVE_BACKUP)
    if apply and not backup:
        raise refuse(_NEEDS_BACKUP)
    if backup is not None and not backup.startswith("/"):
        raise refuse(_RELATIVE_BACKUP)
    unknown = sorted(set(values) - {"before", "apply", "backupPath"})
    if unknown:
        raise refuse(f"state prune does not accept {unknown[0]}")
    return PruneOptions(before=before, cutoff=cutoff, apply=apply, backup_path=backup)


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class Selection:
    """The trees a cutoff makes candidates, those blocked, and the runs that would go."""

    cutoff: int
    roots: tuple[str, ...]
    blocked: dict[str, str]
    """Blocked root -> the first blocker found, for operators."""
    runs: tuple[str, ...]
    """Members of the unblocked trees, sorted."""


@dataclass
class _Run:
    status: str
    finished_at: int | None
    parents: set[str]
    eligible: bool = False


_LAUNCH: Final = msgspec.json.Decoder(dict[str, object])


def _restart_parent(options: object) -> str | None:
    """``restartLineage.parentRunId`` of a run's launch options, when present."""
    if options is None:
        return None
    try:
        value = _LAUNCH.decode(options if isinstance(options, bytes) else b"")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    lineage = value.get("restartLineage")
    parent = lineage.get("parentRunId") if isinstance(lineage, dict) else None
    return parent if isinstance(parent, str) else None


_LINEAGE: Final = Query(
    PrunedRunRow,
    "SELECT r.run_id, r.status, r.finished_at, r.parent_run_id, b.content AS options"
    " FROM runs r LEFT JOIN blobs b ON b.blob_hash = r.launch_options_hash ORDER BY r.run_id",
)


def _runs(ctx: Context, cutoff: int) -> dict[str, _Run]:
    runs: dict[str, _Run] = {}
    for row in ctx.fetch_all(_LINEAGE):
        parents = set() if row.parent_run_id is None else {row.parent_run_id}
        restart = _restart_parent(row.options)
        if restart is not None:
            parents.add(restart)
        finished = row.finished_at
        runs[row.run_id] = _Run(
            status=row.status,
            finished_at=finished,
            parents=parents,
            eligible=row.status in TERMINAL and finished is not None and finished < cutoff,
        )
    return runs


def _tree(root: str, children: dict[str, list[str]]) -> list[str]:
    members, pending, seen = [], [root], {root}
    while pending:
        run_id = pending.pop()
        members.append(run_id)
        for child in children.get(run_id, ()):
            if child not in seen:
                seen.add(child)
                pending.append(child)
    return members


def _blocker(ctx: Context, runs: dict[str, _Run], members: Iterable[str], now: int) -> str | None:
    """The first reason a tree cannot go, in the original's order of checks, or None."""
    ids = sorted(members)
    ineligible = next((run_id for run_id in ids if not runs[run_id].eligible), None)
    if ineligible is not None:
        return f"run {ineligible} is not finished before the cutoff"
    marks = ", ".join("?" * len(ids))
    queue = ctx.one(
        f"SELECT run_id, status FROM run_queue WHERE run_id IN ({marks})"  # noqa: S608 - placeholders only
        f" AND status IN ({_LIVE_QUEUE}) ORDER BY run_id LIMIT 1",
        *ids,
    )
    if queue is not None:
        return f"run {queue['run_id']} is {queue['status']} in the run queue"
    follow_up = ctx.one(
        f"SELECT follow_up_id FROM workflow_follow_ups WHERE run_id IN ({marks})"  # noqa: S608 - placeholders only
        " AND status = 'queued' ORDER BY follow_up_id LIMIT 1",
        *ids,
    )
    if follow_up is not None:
        return f"follow-up {follow_up['follow_up_id']} is queued"
    lease = ctx.one(
        f"SELECT run_id FROM run_queue WHERE run_id IN ({marks})"  # noqa: S608 - placeholders only
        " AND owner_worker_epoch IS NOT NULL AND lease_expires_at > ? ORDER BY run_id LIMIT 1",
        *ids,
        now,
    )
    if lease is not None:
        return f"run {lease['run_id']} is leased by a worker"
    return None


def select(ctx: Context, cutoff: int) -> Selection:
    """Roots, blocked trees and the runs of the others (DOMAIN §13.2 "Selection")."""
    runs = _runs(ctx, cutoff)
    children: dict[str, list[str]] = {}
    for run_id, run in runs.items():
        for parent in run.parents:
            children.setdefault(parent, []).append(run_id)
    roots = tuple(
        run_id
        for run_id, run in runs.items()
        if run.eligible and not any(runs[p].eligible for p in run.parents if p in runs)
    )
    blocked: dict[str, str] = {}
    selected: set[str] = set()
    for root in roots:
        members = _tree(root, children)
        reason = _blocker(ctx, runs, members, ctx.now)
        if reason is None:
            selected.update(members)
        else:
            blocked[root] = reason
    return Selection(cutoff=cutoff, roots=roots, blocked=blocked, runs=tuple(sorted(selected)))
