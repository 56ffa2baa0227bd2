"""The host's files: its state directory and its process lock (HOST §1.1-§1.3).

An edge room: creates a directory and writes and deletes one file.  A lock
left by a process that is gone (or whose pid was reused) is replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Final

from pwf.errors import InputError, PwfError
from pwf.private import make_directories, read_object
from pwf.server.supervision.identity import alive

__all__ = ["LOCK_SCHEMA", "MAX_SOCKET_PATH_BYTES", "HostPaths", "acquire_lock", "release_lock"]

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
            holder = read_object(path)
            if holder is not None and alive(holder.get("pid"), holder.get("startIdentity")):
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


def release_lock(path: Path, host_id: str) -> None:
    """Delete the lock only when it is this host's (HOST §1.3)."""
    holder = read_object(path)
    if holder is not None and holder.get("hostId") == host_id:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
