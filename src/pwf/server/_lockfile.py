"""The host's files: state directory, process lock, start identity, orphans (HOST §1.1-§1.6).

An edge room: reads ``/proc``, writes files, sends signals.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Final

from pwf.errors import InputError, PwfError
from pwf.private import make_directories
from pwf.supervise import REGISTRY_SCHEMA, start_identity

__all__ = [
    "LOCK_SCHEMA",
    "MAX_SOCKET_PATH_BYTES",
    "HostPaths",
    "acquire_lock",
    "reap_orphans",
    "release_lock",
    "start_identity",
]

LOCK_SCHEMA: Final = "pi-workflows.host-lock.v1"
MAX_SOCKET_PATH_BYTES: Final = 107
"""``sun_path`` holds 108 bytes on Linux, one of them the terminating NUL."""


class HostPaths:
    """``<dirname(db)>/host`` and the files the host keeps there (HOST §1.1)."""

    def __init__(self, db: Path) -> None:
        """Name the paths of the host of ``db``; nothing is created yet.

        Raises:
            InputError: the socket path would be too long for a Unix socket.
        """
        # Lexical, as the original's path.resolve: ``a/../db`` is ``./db`` even through a link.
        self.state_dir = Path(os.path.abspath(db)).parent / "host"  # noqa: PTH100
        self.socket = self.state_dir / "host.sock"
        self.lock = self.state_dir / "host.lock.json"
        self.children = self.state_dir / "host.children.json"
        length = len(os.fsencode(self.socket))
        if length > MAX_SOCKET_PATH_BYTES:
            raise InputError(
                f"the host socket path {self.socket} is {length} bytes, over the"
                f" {MAX_SOCKET_PATH_BYTES} a Unix socket allows;"
                " keep the database in a shorter directory"
            )

    def create(self) -> None:
        """Create the state directory and make it 0700, also when it existed."""
        make_directories(self.state_dir)
        self.state_dir.chmod(0o700)


def _alive(pid: object, identity: object) -> bool:
    return (
        isinstance(pid, int)
        and pid > 0
        and isinstance(identity, str)
        and start_identity(pid) == identity
    )


def acquire_lock(path: Path, pid: int, identity: str, host_id: str) -> None:
    """Take the process lock with an exclusive create (0600); a stale lock is replaced.

    Raises:
        PwfError: a live process holds the lock.
    """
    content = json.dumps(
        {"hostId": host_id, "pid": pid, "schema": LOCK_SCHEMA, "startIdentity": identity},
        separators=(",", ":"),
        sort_keys=True,
    )
    for _ in range(8):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            holder = _read_lock(path)
            if holder is not None and _alive(holder.get("pid"), holder.get("startIdentity")):
                raise PwfError(
                    f"A workflow host is already running with PID {holder['pid']}"
                ) from None
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(content + "\n")
        return
    raise PwfError(f"could not take the host lock {path}: it keeps changing")


def _read_lock(path: Path) -> dict[str, object] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def release_lock(path: Path, host_id: str) -> None:
    """Delete the lock only when it is this host's (HOST §1.3)."""
    holder = _read_lock(path)
    if holder is not None and holder.get("hostId") == host_id:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def reap_orphans(path: Path) -> int:
    """SIGKILL the process group of every recorded child that is still exactly alive (§1.6)."""
    registry = _read_lock(path)
    if registry is None or registry.get("schema") != REGISTRY_SCHEMA:
        return 0
    processes = registry.get("processes")
    reaped = 0
    for item in processes if isinstance(processes, list) else []:
        if isinstance(item, dict) and _alive(item.get("pid"), item.get("startIdentity")):
            with contextlib.suppress(OSError):
                os.killpg(int(item["pid"]), signal.SIGKILL)
                reaped += 1
    return reaped
