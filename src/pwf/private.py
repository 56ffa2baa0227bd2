"""Files and directories only their owner can read, whatever the umask; imports nothing of pwf.

Every directory pwf creates is 0700 and every file 0600: the mode is set
explicitly after creation, since the process's umask may have widened or
narrowed what ``mkdir`` and ``open`` asked for.  Directories that already
existed are left as they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "create_file",
    "make_directories",
    "read_object",
    "sync",
]

DIRECTORY_MODE: Final = 0o700
FILE_MODE: Final = 0o600


def make_directories(directory: Path) -> None:
    """Create ``directory`` and each missing parent, each 0700.

    Raises:
        OSError: a directory cannot be created.
    """
    missing: list[Path] = []
    here = Path(os.path.abspath(directory))  # noqa: PTH100 - no symlink is resolved here
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            continue
        path.chmod(DIRECTORY_MODE)


def create_file(path: Path, *, exclusive: bool = True, truncate: bool = False) -> int:
    """Open ``path`` for writing, creating it 0600; return the descriptor.

    With ``exclusive`` an existing file is an error; otherwise an existing
    file keeps its bytes (unless ``truncate``) and is made 0600 too.

    Raises:
        OSError: the file cannot be created, or exists and ``exclusive`` is set.
    """
    flags = os.O_CREAT | os.O_WRONLY | (os.O_EXCL if exclusive else 0)
    flags |= os.O_TRUNC if truncate else 0
    descriptor = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(descriptor, FILE_MODE)
    except OSError:
        os.close(descriptor)
        raise
    return descriptor


def read_object(path: Path) -> dict[str, object] | None:
    """The JSON object in ``path``, or None when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def sync(path: Path) -> None:
    """Write ``path`` (a file, or a folder: the names in it) through to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
