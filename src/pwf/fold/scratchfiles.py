"""Scratch files beside a database: held by their maker while they live, swept once it died.

Imports nothing of pwf (os, fcntl, re, tempfile: this is an edge room).
Replay, rebuild and verify fold into ``DB.rebuild-*``, ``DB.verify-*`` or
``FILE.tmp-*`` (eight random characters after the dash), and a long fold's
second process into ``….part-*`` beside it; each is deleted when its fold
ends, whatever happens, but a process killed outright leaves its files
behind (ADR 0013).  :func:`make` creates one and takes an exclusive
``flock`` on it for as long as its maker (or a process it forked) keeps the
descriptor open; :func:`sweep` deletes the scratch files beside a database
that nobody holds and that are a minute older than a file just made.  The
``flock`` is separate from SQLite's own byte-range locks, which it never
disturbs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["ORPHAN_AGE", "SUFFIXES", "make", "release", "sweep"]

ORPHAN_AGE: Final = 60.0
"""Seconds a scratch file must have been left alone, beyond being unheld, before it is swept."""
SUFFIXES: Final = ("", "-journal", "-wal", "-shm")
"""A SQLite file and the files SQLite may keep beside it."""
_SCRATCH: Final = re.compile(
    r"\.(?:rebuild|verify|tmp)-[a-z0-9_]{8}(?:\.part-[a-z0-9_]{8})?(-journal|-wal|-shm)?"
)
"""What follows a database's name in the name of one of its scratch files."""


def make(prefix: str, directory: Path | None) -> tuple[Path, int]:
    """A new empty file, ``prefix`` and eight random characters, and the descriptor that holds it.

    ``directory`` None means the system's temporary directory.

    Raises:
        OSError: the file cannot be created.
    """
    descriptor, name = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name), descriptor


def release(path: Path, descriptor: int) -> None:
    """Delete ``path`` and the files SQLite kept beside it, then let go of it."""
    try:
        for suffix in SUFFIXES:
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    finally:
        os.close(descriptor)


def sweep(beside: Path, fresh: Path) -> list[Path]:
    """Delete the scratch files of ``beside`` that a killed fold left; return every file deleted.

    A candidate is named like one of ``beside``'s scratch files, is held by
    no process, and neither it nor a file SQLite keeps beside it was
    modified within :data:`ORPHAN_AGE` seconds before ``fresh`` (a file the
    caller has just made, whose time stamp stands for now, read from the
    same file system).  Files that cannot be read or deleted are left alone.
    """
    try:
        now = fresh.stat().st_mtime
        entries = sorted(beside.parent.iterdir())
    except OSError:
        return []
    named = [
        (entry, found.group(1))
        for entry in entries
        if entry != fresh
        and entry.name.startswith(beside.name)
        and (found := _SCRATCH.fullmatch(entry.name[len(beside.name) :])) is not None
    ]
    removed: list[Path] = []
    for entry, suffix in named:
        if suffix is None:  # a scratch file: swept with the files SQLite keeps beside it
            removed += _orphaned(entry, now)
    for entry, suffix in named:
        # SQLite's file beside a scratch file that is gone already
        gone = suffix is not None and not Path(str(entry)[: -len(suffix)]).exists()
        if gone and _older(entry, now):
            with contextlib.suppress(OSError):
                entry.unlink()
                removed.append(entry)
    return removed


def _older(path: Path, now: float) -> bool:
    try:
        return path.stat().st_mtime <= now - ORPHAN_AGE
    except OSError:
        return False


def _orphaned(path: Path, now: float) -> list[Path]:
    """Delete ``path`` and its SQLite files when nobody holds it and all are old; return them."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    deleted: list[Path] = []
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        files = [Path(f"{path}{suffix}") for suffix in SUFFIXES]
        files = [file for file in files if file.exists()]
        if all(_older(file, now) for file in files):
            for file in files:
                file.unlink()
                deleted.append(file)
    except OSError:
        pass  # held by its maker or a process it forked, or not ours to delete
    finally:
        os.close(descriptor)
    return deleted
