"""The maintenance lock: the original's ``{database}.maintenance.lock``, held by an ``flock``.

The file keeps the original's name and mode (0600) and holds the holder's
pid.  It is held by an exclusive ``flock`` on an open descriptor, so the
kernel lets go of it when the holder dies, however it dies.  A file that
nobody holds is taken over, with a warning, when it names a process that is
gone (or nothing: a holder killed before it wrote its pid); one that names
a live process, or that another program wrote, is still refused, as the
original refuses any existing lock file.  The file is removed on release.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from typing import TYPE_CHECKING, Final

from pwf import logs
from pwf.errors import CommandError
from pwf.private import create_file

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MaintenanceLock", "acquire_lock", "lock_path"]

_ACTIVE: Final = "State maintenance is already active: {}"
_ATTEMPTS: Final = 8
"""How often a lock file replaced under our feet is opened again before giving up."""


def lock_path(database: Path) -> Path:
    """``{database}.maintenance.lock``."""
    return database.with_name(database.name + ".maintenance.lock")


class MaintenanceLock:
    """A held maintenance lock: the file and the descriptor whose ``flock`` holds it."""

    def __init__(self, path: Path, descriptor: int) -> None:
        """Keep the held descriptor."""
        self.path = path
        self._descriptor: int | None = descriptor

    def release(self) -> None:
        """Remove the file, then let go of the ``flock``; a second call does nothing."""
        if self._descriptor is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._descriptor)
        self._descriptor = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(text: str) -> int | None:
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() else None


def _refusal(path: Path, text: str) -> CommandError:
    pid = _holder(text)
    if pid is not None:
        return CommandError(f"{_ACTIVE.format(path)} (held by pid {pid})")
    return CommandError(
        f"{_ACTIVE.format(path)} (written by another program; remove it once no"
        " maintenance is running)"
    )


def _open(path: Path) -> tuple[int, bool]:
    """The lock file's descriptor, and whether it already existed."""
    try:
        return create_file(path, exclusive=True), False
    except FileExistsError:
        return os.open(path, os.O_RDWR), True


def _try_once(path: Path) -> MaintenanceLock | None:
    """Take the lock, or None when the file was replaced while we locked it."""
    try:
        descriptor, existed = _open(path)
    except FileNotFoundError:
        return None  # removed between our two opens
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in {errno.EWOULDBLOCK, errno.EAGAIN}:
                raise
            raise _refusal(path, _read(descriptor)) from None
        if not _same_file(descriptor, path):
            os.close(descriptor)  # released and removed by its holder meanwhile
            return None
        if existed:
            _take_over(path, _read(descriptor))
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        os.fchmod(descriptor, 0o600)
    except BaseException:
        os.close(descriptor)
        raise
    return MaintenanceLock(path, descriptor)


def _take_over(path: Path, text: str) -> None:
    """Warn about a lock file nobody holds, or refuse it when a live process or program wrote it."""
    pid = _holder(text)
    if text.strip() and (pid is None or (pid != os.getpid() and _alive(pid))):
        raise _refusal(path, text)
    logs.warning("maintenance.stale_lock_taken_over", path=str(path), dead_pid=pid)


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        return os.fstat(descriptor).st_ino == path.stat().st_ino
    except FileNotFoundError:
        return False


def _read(descriptor: int) -> str:
    return os.pread(descriptor, 64, 0).decode(errors="replace")


def acquire_lock(database: Path) -> MaintenanceLock:
    """Hold ``{database}.maintenance.lock`` or refuse with the original's text and the holder.

    Raises:
        CommandError: a live process holds the lock, or the file cannot be made.
    """
    path = lock_path(database)
    try:
        for _ in range(_ATTEMPTS):
            lock = _try_once(path)
            if lock is not None:
                return lock
    except OSError as error:
        raise CommandError(f"cannot create {path}: {error.strerror}") from None
    raise CommandError(_ACTIVE.format(path))
