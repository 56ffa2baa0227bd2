"""Plain helpers the command-line tests share (fixtures live in ``conftest.py``)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

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
