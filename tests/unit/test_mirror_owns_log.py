"""A mirrored store owns the shared log it is given, even when its file cannot be opened.

The rooms that open a host's local file on a shared log (``pwf`` verbs with
``--store``, a served host) hand the log to :func:`pwf.store.opening.open_mirror`
and close nothing themselves: the store closes the log on ``close`` and on a
failed open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from pwf.errors import InputError
from pwf.store.opening import open_mirror

if TYPE_CHECKING:
    from pathlib import Path


class _Log:
    """Stands for the shared log: only whether it was closed is looked at."""

    path = "postgresql://host/db"

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_file_that_cannot_be_opened_closes_the_log(tmp_path: Path) -> None:
    log = _Log()
    with pytest.raises(InputError, match="is a directory"):
        open_mirror(tmp_path, cast("Any", log))
    assert log.closed == 1


def test_a_file_that_cannot_be_installed_closes_the_file_and_the_log(tmp_path: Path) -> None:
    log = _Log()

    def refuse(_: object) -> None:
        raise InputError("refused")

    with pytest.raises(InputError, match="refused"):
        open_mirror(tmp_path / "host.db", cast("Any", log), install=refuse)
    assert log.closed == 1
