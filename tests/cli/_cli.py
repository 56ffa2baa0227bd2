"""Plain helpers the command-line tests share (fixtures live in ``conftest.py``)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from click.testing import Result
    from tests._tamper import editable
else:
    from _tamper import editable


def one_line(text: str) -> str:
    """The single line an error must be; fails on tracebacks and multi-line output."""
    lines = text.splitlines()
    assert [lines[0]] == lines, text
    assert "Traceback" not in text
    return lines[0]


def edit(path: Path, *statements: str) -> None:
    """Change a database by hand.

    ``events`` takes a change as format v1's table did (:mod:`tests._tamper`).
    """
    connection = editable(sqlite3.connect(path))
    try:
        for statement in statements:
            connection.execute(statement)
        connection.commit()
    finally:
        connection.close()


PRUNE_CUTOFF: Final = "1970-01-01T00:00:05.000Z"
"""The cutoff at which :func:`prunable`'s log loses ``run-1``'s tree alone."""


def prunable(
    run: Callable[..., Result], path: Path, client_line: Callable[..., bytes], *args: str
) -> Path:
    """A database at ``path`` whose prune at :data:`PRUNE_CUTOFF` removes one run.

    Runs 1, 2 and 3 start at 1 000, 2 000 and 3 000; ``run-1`` is cancelled
    at 4 000 and ``run-2`` at 6 000, and ``run-3`` stays queued.  ``args``
    go to ``pwf init``.
    """
    assert run("init", "--db", str(path), *args).exit_code == 0
    lines = b"".join(client_line(number, at=number * 1000) for number in (1, 2, 3))
    lines += client_line(1, "run.cancel", at=4000) + client_line(2, "run.cancel", at=6000)
    done = run("request", "--db", str(path), stdin=lines)
    assert (done.exit_code, done.stdout.count('"outcome":"accepted"')) == (0, 5), done.stdout
    return path
