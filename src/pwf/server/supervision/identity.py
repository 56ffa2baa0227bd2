"""Which process a pid is: its start identity, its parent, and exact kills (HOST §1.4, §1.6, §7.7).

An edge room: reads ``/proc`` (or asks ``ps`` where there is none) and
sends signals.  A pid alone names a process only until it is reused; a pid
with its start identity names one process for good.  The host attests
itself with it in its lock and claim, the registry records it for each
worker and each registered child, and orphan reaping kills only a process
whose identity still matches.  Every read of ``/proc/PID/stat`` is here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Final

__all__ = ["alive", "kill_exact", "parent_pid", "signal_group", "start_identity"]

_PARENT_FIELD: Final = 1
"""``ppid`` is field 4 of ``/proc/PID/stat``, the 2nd after the command name."""
_START_FIELD: Final = 19
"""``starttime`` is field 22 of ``/proc/PID/stat``, the 20th after the command name."""


def start_identity(pid: int) -> str | None:
    """The OS's start identity of process ``pid``, or None when it cannot be read (HOST §1.4).

    ``linux-proc-start:<ticks>`` from ``/proc/PID/stat``; where there is no
    ``/proc``, ``ps-lstart:<time>`` from ``ps -o lstart=``.
    """
    fields = _stat(pid)
    if fields is not None:
        ticks = _field(fields, _START_FIELD)
        return None if ticks is None else f"linux-proc-start:{ticks}"
    started = _ps(pid, "lstart")
    return f"ps-lstart:{started}" if started else None


def parent_pid(pid: int) -> int | None:
    """The parent of process ``pid``, or None when it is not running."""
    fields = _stat(pid)
    found = _ps(pid, "ppid") if fields is None else _field(fields, _PARENT_FIELD)
    return int(found) if found is not None and found.isdigit() else None


def alive(pid: object, identity: object) -> bool:
    """True when ``pid`` is a live process whose start identity is still ``identity``."""
    return (
        isinstance(pid, int)
        and pid > 0
        and isinstance(identity, str)
        and start_identity(pid) == identity
    )


def kill_exact(pid: int, identity: str) -> bool:
    """SIGKILL the process group of ``pid`` (else the pid) if it is still that exact process."""
    if start_identity(pid) != identity:
        return False
    signal_group(pid, signal.SIGKILL)
    return True


def signal_group(pid: int, number: signal.Signals) -> None:
    """Send ``number`` to the process group led by ``pid``, else to ``pid`` alone; gone is fine."""
    try:
        os.killpg(pid, number)
    except ProcessLookupError:
        return
    except PermissionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name; None when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split() if stat else None


def _field(fields: list[str], index: int) -> str | None:
    """One numeric field of ``/proc/PID/stat``, or None when it is missing or not a number."""
    return fields[index] if len(fields) > index and fields[index].isdigit() else None


def _ps(pid: int, column: str) -> str | None:
    """``ps -o <column>= -p <pid>``, stripped; None when ``ps`` cannot be run."""
    try:
        return subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["/bin/ps", "-o", f"{column}=", "-p", str(pid)],
            capture_output=True,
            text=True,
            check=False,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
