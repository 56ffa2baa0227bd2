"""``pwf log import`` into a new database atomically: a scratch file, then a link into place.

A database that does not exist yet is built in ``DB.tmp-XXXXXXXX`` beside
it and linked to its name only once the whole file was imported and
checkpointed, so an import that fails, is interrupted or is killed leaves
no half-initialised database behind (the scratch file of a killed one is
swept by the next import, ADR 0013).  An existing empty database is filled
in place, in the one write transaction :func:`pwf.store.jsonl.import_jsonl`
uses.  On a terminal the bytes read are shown as progress.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pwf.cli._options import open_store
from pwf.cli._progress import activity
from pwf.errors import ImportRefusedError, InputError
from pwf.fold import scratchfiles
from pwf.private import make_directories
from pwf.store.jsonl import import_jsonl

if TYPE_CHECKING:
    from collections.abc import Callable

    from pwf.store import Head

__all__ = ["import_file"]


class _Counting:
    """A binary stream that tells ``progress`` how many bytes were read."""

    def __init__(self, stream: BinaryIO, total: int, progress: Callable[[int, int], None]) -> None:
        self.stream, self.total, self.progress = stream, total, progress
        self.read = 0

    def readline(self, limit: int = -1) -> bytes:
        line = self.stream.readline(limit)
        self.read += len(line)
        self.progress(self.read, self.total)
        return line


def _size(stream: BinaryIO) -> int:
    """The stream's size when it is a regular file, else 0 (unknown)."""
    try:
        return os.fstat(stream.fileno()).st_size
    except (OSError, ValueError):
        return 0


def _fill(db: str, source: str, *, create: bool) -> tuple[Head, int]:
    """Import ``source`` ("-" for stdin) into ``db``; its head and the events it holds."""
    with activity("importing") as progress:
        if source == "-":
            stream: BinaryIO = sys.stdin.buffer
            return _into(db, _Counting(stream, _size(stream), progress), create=create)
        try:
            with Path(source).open("rb") as opened:
                return _into(db, _Counting(opened, _size(opened), progress), create=create)
        except FileNotFoundError:
            raise ImportRefusedError(0, f"no such file: {source}") from None


def _into(db: str, stream: _Counting, *, create: bool) -> tuple[Head, int]:
    with open_store(db, create=create) as store:
        head = import_jsonl(store, stream)
        events = head.seq - store.origin().seq  # a compacted log starts after its origin
        store.projections_file.checkpoint()
    return head, events


def import_file(path: Path, source: str) -> tuple[Head, int]:
    """Import ``source`` into the database at ``path``; its head and how many events it holds.

    Raises:
        ImportRefusedError: a line is bad or the database already holds events.
        InputError: another process created ``path`` while the import ran.
    """
    if path.exists():
        return _fill(str(path), source, create=True)
    make_directories(path.parent)
    scratch, held = scratchfiles.make(f"{path.name}.tmp-", path.parent)
    try:
        scratchfiles.sweep(path, scratch)
        found = _fill(str(scratch), source, create=True)
        try:
            os.link(scratch, path)
        except FileExistsError:
            raise InputError(f"{path} was created while the import ran; nothing imported") from None
    finally:
        scratchfiles.release(scratch, held)
    return found
